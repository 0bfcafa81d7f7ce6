// Command xlb is the XLB daemon: an XDP/eBPF layer-4 TCP load balancer.
//
//	xlb [--config FILE] [--log.level LEVEL] [--log.format logfmt|json]
//	xlb check [--env-file FILE]... [--config] FILE|-
//	xlb reload --pid PID [--pass-environment]  hot upgrade the running xlb (systemd's ExecReload=)
//	xlb mount-bpffs --config FILE      mount the bpffs for state_dir (systemd's ExecStartPre=)
//	xlb detach [--config FILE]         take down what a stopped xlb left attached (package removal)
//	xlb capabilities                   what this version can do (for package scripts)
//	xlb --version
//
// Every command prints its usage on stdout for --help and exits 0; a
// usage error exits 2.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/daemon"
	"github.com/xlbproject/xlb/pkg/logging"
)

const synopsis = `xlb [--config FILE] [--log.level LEVEL] [--log.format logfmt|json]
xlb check [--env-file FILE]... [--config] FILE|-
xlb reload --pid PID [--pass-environment] [--timeout DURATION]
xlb mount-bpffs [--config FILE]
xlb detach [--config FILE] [--state-dir DIR]
xlb capabilities
xlb --version`

const about = `xlb runs the XLB load balancer in the foreground: it attaches its XDP
program to the configured interfaces and balances TCP connections and UDP
flows to each service's listen address across its backends in xlb.yaml. SIGTERM or SIGINT stops it
(detaching XDP and removing its pinned state after the shutdown window);
SIGUSR2 hands everything over to the binary now on disk, which re-reads
xlb.yaml, without dropping a connection (hot upgrade).

It logs to standard error; when that is the journal (JOURNAL_STREAM), each
line carries its syslog priority: journalctl --priority=warning selects by level.

xlb check validates a config file (or standard input, "-"), prints the
effective config on stdout and exits 0, or prints every error with its line
and exits 1. With --env-file it checks the environment the service gets too.

xlb reload sends SIGUSR2 to the xlb with that pid and waits for the outcome:
exit 0 when a new process took over, 1 with the reason when the hand-off
failed (the running xlb keeps serving). With --pass-environment (the unit's
ExecReload=) the new process gets reload's environment, in which systemd
has read the unit's EnvironmentFile= afresh: passwords and ARGS included.

xlb mount-bpffs mounts a bpffs at the parent of state_dir when none is
there, so that pinned state outlives the process.

xlb detach takes down what an xlb that no longer runs left attached (XDP,
pins, host settings); it refuses while an xlb runs.

Run 'xlb COMMAND --help' for a command's flags.`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return check(args[1:], os.Stdin, stdout, stderr)
		case "reload":
			return reload(args[1:], stdout, stderr)
		case "mount-bpffs":
			return mountBPFFS(args[1:], stdout, stderr)
		case "detach":
			return detach(args[1:], stdout, stderr)
		case "capabilities":
			return capabilities(args[1:], stdout, stderr)
		case "help":
			return daemonCommand(&daemonFlags{}).usageOnly(stdout)
		}
	}
	var f daemonFlags
	cmd := daemonCommand(&f)
	if code, done := cmd.parse(args, 0, stdout, stderr); done {
		return code
	}
	if f.version {
		fmt.Fprintln(stdout, buildinfo.Print("xlb"))
		return 0
	}
	log, err := logging.New(stderr, logging.Options{Level: f.level, Format: f.format, Journal: journal(stderr)})
	if err != nil {
		return cmd.fail(stderr, "%v", err)
	}
	if err := serve(f.config, log); err != nil {
		log.WithError(err).Error("xlb failed")
		return 1
	}
	return 0
}

// daemonFlags are the flags of xlb itself (running the daemon).
type daemonFlags struct {
	config, level, format string
	version               bool
}

// daemonCommand defines xlb's own flags into f. --log-level and
// --log-format, the spellings before node_exporter's, stay as aliases: a
// hot upgrade runs the new binary with the old process's arguments.
func daemonCommand(f *daemonFlags) *command {
	c := newCommand("xlb", synopsis, about)
	c.fs.StringVar(&f.config, "config", "/etc/xlb/xlb.yaml", "path of the config `FILE` (xlb.yaml)")
	c.fs.StringVar(&f.level, "log.level", logging.DefaultLevel, "log only messages of `LEVEL` or above: debug, info, warn or error")
	c.fs.StringVar(&f.format, "log.format", logging.DefaultFormat, "output `FORMAT` of log messages: logfmt or json")
	c.fs.BoolVar(&f.version, "version", false, "print the version (prometheus/common/version's fields) and exit")
	c.alias("log-level", "log.level")
	c.alias("log-format", "log.format")
	return c
}

// usageOnly prints the usage on stdout: `xlb help`.
func (c *command) usageOnly(stdout io.Writer) int {
	c.usage(stdout)
	return 0
}

// journal reports whether w is standard error connected to the journal
// (logging.JournalStream).
func journal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && logging.JournalStream(f, os.Getenv(logging.EnvJournalStream))
}

// capabilities is `xlb capabilities`: what this version can do, one word a
// line, for the package scripts (hot-upgrade: it hands over on SIGUSR2).
func capabilities(args []string, stdout, stderr io.Writer) int {
	c := newCommand("xlb capabilities", "xlb capabilities", "Prints what this version can do, one word a line, for the package scripts:\nhot-upgrade means it hands over on SIGUSR2 (systemctl reload xlb);\nreload-environment that it starts the new process with the environment\n`xlb reload --pass-environment` hands it.")
	if code, done := c.parse(args, 0, stdout, stderr); done {
		return code
	}
	for _, cap := range daemon.Capabilities {
		fmt.Fprintln(stdout, cap)
	}
	return 0
}

// serve runs the daemon (pkg/daemon) with the config at cfgPath until a
// stop signal.
func serve(cfgPath string, log *logrus.Logger) error {
	cfg, warnings, err := config.Load(cfgPath)
	for _, w := range warnings {
		log.Warn(w)
	}
	if err != nil {
		daemon.HandOffFailed(err)
		return err
	}
	log.WithFields(logrus.Fields{"version": buildinfo.Version, "revision": buildinfo.Revision, "branch": buildinfo.Branch,
		"goversion": buildinfo.GoVersion, "config": cfgPath}).Info("starting xlb")
	return daemon.Run(context.Background(), cfg, daemon.Options{ConfigPath: cfgPath, Log: log})
}
