package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/daemon"
)

// reload is `xlb reload --pid PID`: the unit's ExecReload=.
func reload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("xlb reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pid := fs.Int("pid", 0, "pid of the running xlb (systemd: $MAINPID)")
	timeout := fs.Duration("timeout", 80*time.Second, "how long to wait for the new process to take over")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  xlb reload --pid PID [--timeout DURATION]\n\nHands the running xlb over to the binary on disk, which re-reads xlb.yaml (SIGUSR2),\nand waits: exit 0 when the new process took over, 1 when the hand-off failed\n(the running xlb keeps serving).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	newPID, err := daemon.Reload(*pid, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "xlb reload: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "xlb reload: hot upgrade complete: pid %d handed over to pid %d\n", *pid, newPID)
	return 0
}

// mountBPFFS is `xlb mount-bpffs --config FILE`: the unit's ExecStartPre=.
func mountBPFFS(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("xlb mount-bpffs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/xlb/xlb.yaml", "path of the config file whose state_dir needs a bpffs")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	cfg, _, err := config.Load(*cfgPath)
	if err != nil {
		// The daemon's own start reports the config's errors; without a
		// valid state_dir there is nothing to mount.
		fmt.Fprintf(stderr, "xlb mount-bpffs: nothing mounted: %v\n", err)
		return 0
	}
	mounted, err := daemon.MountStateDir(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "xlb mount-bpffs: %v\n", err)
		return 1
	}
	if mounted {
		fmt.Fprintf(stdout, "xlb mount-bpffs: mounted a bpffs for %s\n", cfg.StateDir)
	}
	return 0
}

// parseFlags parses a subcommand's flags; done reports that the caller
// returns code (help, a bad flag or a stray argument).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, true
	}
	return 0, false
}
