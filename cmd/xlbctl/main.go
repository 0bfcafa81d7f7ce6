// Command xlbctl is the terminal console of XLB (docs/DESIGN.md §2): it
// reads the status API of one instance and renders it. It never touches
// BPF maps.
//
//	xlbctl [--admin URL] [--socket PATH] [--config FILE] [--user NAME] [--service NAME] [--json] [--bytes] [--timeout D] status|backends|flows|top|drain|undrain
//
// The admin listener comes from --admin, --socket, XLB_ADMIN_URL or the
// admin section of xlb.yaml (its unix socket when this user may use it,
// else its HTTP address), in that order (adminurl.go). drain and undrain
// need no credentials over the socket and need them over HTTP (issue 28).
// drain and undrain are the only
// commands that change anything: they ask the instance to answer
// readiness "draining" (or stop), while it keeps forwarding every packet
// (DESIGN §6a).
//
// status, backends, flows and top show every service of the instance
// (DESIGN §9) grouped, or with --service NAME that one alone. xlbctl reads
// status documents of schema versions 1 (one service, a daemon before
// services) and 2.
//
// Exit codes follow xlb's (cmd/xlb): 0 ok; 1 any error (connection, HTTP,
// decoding, an unreadable xlb.yaml, a --service the instance does not
// have); 2 usage; and 3 the instance (with --service, that service) is
// not ready (status only; 3 as `systemctl is-active` and LSB status
// actions answer for a service that is not running).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/status/api"
)

const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitNotReady = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is main without the process: it parses args, runs one command and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, cmd, err := parseArgs(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return exitOK
	case err != nil:
		return usageError(stderr, err)
	case cmd == "version":
		fmt.Fprintln(stdout, buildinfo.Print("xlbctl"))
		return exitOK
	}
	render, ok := renderers[cmd]
	if !ok && cmd != "top" && cmd != "drain" && cmd != "undrain" {
		return usageError(stderr, fmt.Errorf("unknown command %q", cmd))
	}
	tgt, err := resolveTarget(o, getenv)
	if err != nil {
		return fail(stderr, err)
	}
	var pass string
	if tgt.user != "" {
		if pass = getenv(api.EnvAdminPassword); pass == "" {
			how := "--user " + tgt.user + " given"
			if !o.set["user"] {
				how = "admin.auth.username " + tgt.user + " in " + tgt.from
			}
			return fail(stderr, fmt.Errorf("%s but %s is empty", how, api.EnvAdminPassword))
		}
	}
	c, err := newClient(tgt, pass, o.timeout)
	if err != nil {
		if o.set["admin"] {
			return usageError(stderr, err)
		}
		return fail(stderr, err)
	}
	u := units{exact: o.bytes}
	switch cmd {
	case "top":
		return runTop(ctx, c, o, u, stdout, stderr)
	case "drain", "undrain":
		return runDrain(ctx, c, cmd == "drain", stdout, stderr)
	}
	body, err := c.fetch(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	if o.json && o.service == "" {
		if _, err := stdout.Write(body); err != nil {
			return fail(stderr, err)
		}
		if cmd != "status" {
			return exitOK
		}
		var r struct{ Readiness api.Readiness }
		if err := json.Unmarshal(body, &r); err != nil {
			return fail(stderr, fmt.Errorf("decode status document: %w", err))
		}
		return readyCode(r.Readiness)
	}
	d, err := decode(body)
	if err != nil {
		return fail(stderr, err)
	}
	if err := selectService(d, o.service); err != nil {
		return fail(stderr, err)
	}
	ready := d.Readiness
	if o.service != "" {
		ready = d.Services[0].Readiness
	}
	if o.json {
		// The document as the API returned it; --service only checks the
		// name and picks the readiness of the exit code.
		if _, err := stdout.Write(body); err != nil {
			return fail(stderr, err)
		}
	} else if err := render(stdout, d, u); err != nil {
		return fail(stderr, err)
	}
	if cmd == "status" {
		return readyCode(ready)
	}
	return exitOK
}

// runDrain drains or undrains the instance and says what it answered.
func runDrain(ctx context.Context, c *client, on bool, stdout, stderr io.Writer) int {
	st, err := c.drain(ctx, on)
	if err != nil {
		return fail(stderr, err)
	}
	if st.Drained {
		fmt.Fprintln(stdout, "drained: readiness answers draining; every packet is still forwarded (xlbctl undrain ends it)")
	} else {
		fmt.Fprintln(stdout, "undrained: readiness follows the instance's state again")
	}
	return exitOK
}

// renderers are the one-shot commands; status and flows show no byte
// counts.
var renderers = map[string]func(io.Writer, *api.Document, units) error{
	"status":   func(w io.Writer, d *api.Document, _ units) error { return renderStatus(w, d) },
	"backends": renderBackends,
	"flows":    func(w io.Writer, d *api.Document, _ units) error { return renderFlows(w, d) },
}

func readyCode(r api.Readiness) int {
	if r.Ready {
		return exitOK
	}
	return exitNotReady
}

// fail reports err on stderr; exit 1.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "xlbctl: %v\n", err)
	return exitError
}
