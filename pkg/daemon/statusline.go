package daemon

import (
	"fmt"
	"strings"

	"github.com/xlbproject/xlb/pkg/backend"
)

// runningStatus is the STATUS= line while running.
func (d *runner) runningStatus() string {
	s := d.store.Load()
	var modes []string
	for _, a := range s.Attached {
		modes = append(modes, a.Interface+" "+string(a.Mode))
	}
	var active uint64
	if s.Sample != nil {
		active = s.Sample.Active
	}
	discovered, routable := 0, 0
	for _, svc := range s.Services {
		for _, b := range svc.Backends {
			if b.Discovered {
				discovered++
				if b.State == backend.Routable {
					routable++
				}
			}
		}
	}
	line := fmt.Sprintf("running: XDP %s; %d/%d backends routable; %d active connections",
		strings.Join(modes, ", "), routable, discovered, active)
	if len(s.Services) > 1 {
		line += fmt.Sprintf("; %d services", len(s.Services))
	}
	if s.Sample != nil && s.Sample.Maintenance.Failing() {
		line += fmt.Sprintf("; maintenance failing (%d cycles in a row)", s.Sample.Maintenance.ConsecutiveFailures)
	}
	return line
}
