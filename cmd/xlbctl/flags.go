package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/xlbproject/xlb/internal/cliusage"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// options are the command line flags.
type options struct {
	admin      string // "" until resolved: --admin, XLB_ADMIN_URL or xlb.yaml (adminurl.go)
	socket     string // --socket: the admin unix socket
	config     string
	user       string
	service    string // --service: show this service alone
	json       bool
	bytes      bool
	timeout    time.Duration
	interval   time.Duration
	iterations int
	version    bool
	set        map[string]bool // flags given on the command line
}

// defaultConfig is where the packages install xlb.yaml; --config changes it.
const defaultConfig = "/etc/xlb/xlb.yaml"

// flagSet defines the flags into o.
func flagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("xlbctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints errors and usage itself
	fs.StringVar(&o.admin, "admin", "", "admin listener `URL`, e.g. http://127.0.0.1:"+strconv.Itoa(config.DefaultAdminPort)+
		" (default: "+envAdminURL+", else admin.address and admin.port of --config)")
	fs.StringVar(&o.socket, "socket", "", "admin unix socket `PATH` (default: admin.socket of --config, "+config.DefaultAdminSocket+
		", when it exists and this user may use it; drain and undrain need no credentials there)")
	fs.StringVar(&o.config, "config", defaultConfig, "xlb.yaml `FILE` to take the admin listener from when neither --admin nor "+envAdminURL+" is set")
	fs.StringVar(&o.user, "user", "", "HTTP Basic user `NAME` (default: admin.auth.username of --config when the URL came from it); the password is read from "+api.EnvAdminPassword)
	fs.StringVar(&o.service, "service", "", "status, backends, flows, top: show the service `NAME` alone (its readiness decides status's exit code); an error when the instance has no such service")
	fs.BoolVar(&o.json, "json", false, "print the status document as the API returns it (status still exits 3 when not ready)")
	fs.BoolVar(&o.bytes, "bytes", false, "backends, top: exact byte counts and byte rates instead of KiB, MiB, ...")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "timeout of each request")
	fs.DurationVar(&o.interval, "interval", time.Second, "top: time between refreshes")
	fs.IntVar(&o.iterations, "iterations", 0, "top: stop after `N` refreshes (0: until Ctrl-C)")
	fs.BoolVar(&o.version, "version", false, "print xlbctl's version and exit")
	return fs
}

// usage writes the help text, flags included.
func usage(w io.Writer) {
	fs := flagSet(&options{})
	fmt.Fprint(w, `Usage: xlbctl [flags] status|backends|flows|top|drain|undrain [flags]

Reads the XLB status API (GET /api/v1/status) and renders it for a terminal;
drain and undrain are the only commands that change the instance.

Commands:
  status    summary of the instance and of each service; exits 0 when
            ready, 3 when not ready
  backends  each service's backends in id order: state, connections, bytes,
            health, and why one is unreachable or unhealthy
  flows     connection counts by state, initiator and reason, refused SYNs,
            and each service's counts (never addresses)
  top       status and each service's backends with per-second rates,
            redrawn in place every --interval until Ctrl-C
  drain     take the instance out of rotation: readiness answers draining while
            every packet is still forwarded
  undrain   end a drain

Flags (before or after the command):
`)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if name != "" {
			head += " " + name
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n        %s%s\n", head, help, def)
	})
	fmt.Fprintf(w, `
The admin listener: --admin, else --socket, else %s, else from --config:
its admin socket (admin.socket, default %s) when it exists and this user
may connect to it (root), else admin.address and admin.port (0.0.0.0 and
:: mean this host's loopback; https when its admin.web_config_file has
tls_server_config); when --config is the default and no such file
exists, the default socket, else http://127.0.0.1:%d. Over HTTP, drain
and undrain need credentials (--user); over the socket they do not.

Environment:
  %s       admin URL when --admin is not given
  %s  password for --user

Exit codes (as xlb's): 0 ok, 1 error (connection, HTTP status, decoding,
xlb.yaml), 2 usage, 3 not ready (status).
`, envAdminURL, config.DefaultAdminSocket, config.DefaultAdminPort, envAdminURL, api.EnvAdminPassword)
}

// parseArgs parses flags before and after the one command.
func parseArgs(args []string) (options, string, error) {
	var o options
	fs := flagSet(&o)
	if err := fs.Parse(args); err != nil {
		return o, "", err
	}
	if o.version {
		return o, "version", nil
	}
	if fs.NArg() == 0 {
		return o, "", errors.New("no command")
	}
	cmd := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return o, cmd, err
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if fs.NArg() > 0 {
		return o, cmd, fmt.Errorf("unexpected argument %q after %s", fs.Arg(0), cmd)
	}
	switch {
	case o.timeout <= 0:
		return o, cmd, fmt.Errorf("--timeout %s: want a positive duration", o.timeout)
	case o.interval <= 0:
		return o, cmd, fmt.Errorf("--interval %s: want a positive duration", o.interval)
	case o.iterations < 0:
		return o, cmd, fmt.Errorf("--iterations %d: want 0 or more", o.iterations)
	case o.set["admin"] && o.admin == "":
		return o, cmd, errors.New("--admin: empty URL")
	}
	return o, cmd, nil
}

// usageError reports a usage error as xlb does: one line with flags
// spelled --name and a hint to --help; exit 2.
func usageError(stderr io.Writer, err error) int {
	return cliusage.Fail(stderr, "xlbctl", cliusage.DoubleDash(err.Error()))
}
