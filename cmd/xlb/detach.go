package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/instance"
)

// detach is `xlb detach`: take down what a stopped instance left attached
// (the package scripts run it at removal when xlb.service is not active).
func detach(args []string, stdout, stderr io.Writer) int {
	c := newCommand("xlb detach", "xlb detach [--config FILE] [--state-dir DIR]",
		"Takes down what an xlb that no longer runs left on this host: a crash, SIGKILL\n"+
			"or a stop of a failed or restarting unit keeps XDP attached through the pins\n"+
			"in state_dir (established connections keep being forwarded). It detaches the\n"+
			"XDP programs, removes the pins, the managed neighbour entries and the host\n"+
			"settings journal, and writes back the sysctls XLB changed (/run/xlb records\n"+
			"their original values). It refuses, exit 1, while an xlb runs in this network\n"+
			"namespace: stop it instead (systemctl stop xlb). Exit 0 when it took something\n"+
			"down or found nothing left.")
	cfgPath := c.fs.String("config", "/etc/xlb/xlb.yaml", "path of the config `FILE` whose state_dir holds the pins")
	stateDir := c.fs.String("state-dir", "", "the state_dir `DIR` to clean instead of the config's")
	if code, done := c.parse(args, 0, stdout, stderr); done {
		return code
	}
	dir := *stateDir
	if dir == "" {
		cfg, _, err := config.Load(*cfgPath)
		if err != nil {
			// The package removal runs this whatever the config holds.
			fmt.Fprintf(stderr, "xlb detach: %v\nxlb detach: using the default state_dir %s\n", err, config.DefaultStateDir)
			dir = config.DefaultStateDir
		} else {
			dir = cfg.StateDir
		}
	}
	d, err := instance.Detach(dir, "")
	switch {
	case errors.Is(err, instance.ErrRunning):
		fmt.Fprintf(stderr, "xlb detach: refused: %v\nxlb detach: stop it instead (systemctl stop xlb), which detaches XDP after its shutdown window\n", err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "xlb detach: %v\n", err)
		if !d.Empty() {
			fmt.Fprintf(stderr, "xlb detach: done before the error: %s\n", d)
		}
		return 1
	}
	fmt.Fprintf(stdout, "xlb detach: %s (state_dir %s)\n", d, dir)
	return 0
}
