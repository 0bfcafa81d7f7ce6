package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/daemon"
)

// reload is `xlb reload --pid PID`: the unit's ExecReload=.
func reload(args []string, stdout, stderr io.Writer) int {
	c := newCommand("xlb reload", "xlb reload --pid PID [--pass-environment] [--timeout DURATION]",
		"Hands the running xlb over to the binary on disk, which re-reads xlb.yaml (SIGUSR2),\n"+
			"and waits: exit 0 when the new process took over, 1 when the hand-off failed\n"+
			"(the running xlb keeps serving). With --pass-environment the new process gets this\n"+
			"command's environment (systemd's ExecReload=: the unit's EnvironmentFile= read\n"+
			"afresh), ARGS included, instead of the running process's.")
	pid := c.fs.Int("pid", 0, "`PID` of the running xlb (systemd: $MAINPID)")
	passEnv := c.fs.Bool("pass-environment", false, "start the new process with this command's environment (the unit's ExecReload= sets it)")
	timeout := c.fs.Duration("timeout", 80*time.Second, "how long to wait for the new process to take over (a Go `DURATION`)")
	if code, done := c.parse(args, 0, stdout, stderr); done {
		return code
	}
	var env []string
	if *passEnv {
		env = os.Environ()
	}
	newPID, note, err := daemon.Reload(*pid, *timeout, env)
	if note != "" {
		fmt.Fprintf(stderr, "xlb reload: %s\n", note)
	}
	if err != nil {
		fmt.Fprintf(stderr, "xlb reload: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "xlb reload: hot upgrade complete: pid %d handed over to pid %d\n", *pid, newPID)
	return 0
}

// mountBPFFS is `xlb mount-bpffs --config FILE`: the unit's ExecStartPre=.
func mountBPFFS(args []string, stdout, stderr io.Writer) int {
	c := newCommand("xlb mount-bpffs", "xlb mount-bpffs [--config FILE]",
		"Mounts a bpffs at the parent of the config's state_dir when none is there, so that\n"+
			"pinned state outlives the process (the unit's ExecStartPre=). A config that does\n"+
			"not load mounts nothing and is left to the daemon's start to report.")
	cfgPath := c.fs.String("config", "/etc/xlb/xlb.yaml", "path of the config `FILE` whose state_dir needs a bpffs")
	if code, done := c.parse(args, 0, stdout, stderr); done {
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
