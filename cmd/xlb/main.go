// Command xlb is the XLB daemon: an XDP/eBPF layer-4 TCP load balancer.
//
//	xlb --config /etc/xlb/xlb.yaml     run in the foreground
//	xlb check --config FILE            validate FILE and print the effective config
//	xlb reload --pid PID               hot upgrade the running xlb (systemd's ExecReload=)
//	xlb mount-bpffs --config FILE      mount the bpffs for state_dir (systemd's ExecStartPre=)
//	xlb capabilities                   what this version can do (for package scripts)
//	xlb --version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/daemon"
)

const usage = `Usage:
  xlb [--config PATH] [--log-level LEVEL] [--log-format text|json]
  xlb check [--config] PATH
  xlb reload --pid PID [--timeout DURATION]
  xlb mount-bpffs [--config PATH]
  xlb capabilities
  xlb --version

xlb runs the XLB load balancer in the foreground: it attaches its XDP
program to the configured interfaces and balances TCP connections to the
listen address across the backends of xlb.yaml. SIGTERM or SIGINT stops it
(detaching XDP and removing its pinned state after the shutdown window);
SIGUSR2 hands everything over to the binary now on disk, which re-reads
xlb.yaml, without dropping a connection (hot upgrade).

xlb reload sends SIGUSR2 to the xlb with that pid and waits for the outcome:
exit 0 when a new process took over, 1 with the reason when the hand-off
failed (the running xlb keeps serving).

xlb mount-bpffs mounts a bpffs at the parent of state_dir when none is
there, so that pinned state outlives the process.

xlb check validates a config file, prints the effective config (defaults
filled in) on stdout and exits 0, or prints every error with its line and
exits 1.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return check(args[1:], stdout, stderr)
		case "reload":
			return reload(args[1:], stdout, stderr)
		case "mount-bpffs":
			return mountBPFFS(args[1:], stdout, stderr)
		case "capabilities":
			for _, c := range daemon.Capabilities {
				fmt.Fprintln(stdout, c)
			}
			return 0
		}
	}
	fs := flag.NewFlagSet("xlb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/xlb/xlb.yaml", "path of the config file (xlb.yaml)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	format := fs.String("log-format", "text", "log format: text or json")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "xlb: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *version {
		fmt.Fprintf(stdout, "xlb %s (revision %s)\n", buildinfo.Version, buildinfo.Revision)
		return 0
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		fmt.Fprintf(stderr, "xlb: %v\n", err)
		return 2
	}
	if err := serve(*cfgPath, log); err != nil {
		log.WithError(err).Error("xlb failed")
		return 1
	}
	return 0
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("xlb check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/xlb/xlb.yaml", "path of the config file to check (or give it as the argument)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  xlb check [--config] PATH\n\nValidates PATH and prints the effective config (exit 0), or every error with its line (exit 1).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	path := *cfgPath
	switch {
	case fs.NArg() == 1 && !flagSet(fs, "config"):
		path = fs.Arg(0)
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "xlb check: unexpected argument %q\n", fs.Arg(fs.NArg()-1))
		fs.Usage()
		return 2
	}
	cfg, warnings, err := config.Load(path)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	out, err := cfg.Marshal()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	stdout.Write(out)
	return 0
}

// flagSet reports whether the named flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func newLogger(w io.Writer, level, format string) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(w)
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", level)
	}
	log.SetLevel(lvl)
	switch format {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
	}
	return log, nil
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
	log.WithFields(logrus.Fields{"version": buildinfo.Version, "config": cfgPath}).Info("starting xlb")
	return daemon.Run(context.Background(), cfg, daemon.Options{ConfigPath: cfgPath, Log: log})
}
