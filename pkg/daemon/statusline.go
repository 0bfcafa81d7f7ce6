package daemon

import (
	"fmt"
	"strings"
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
	discovered := 0
	for _, b := range s.Backends {
		if b.Discovered {
			discovered++
		}
	}
	line := fmt.Sprintf("running: XDP %s; %d/%d backends routable; %d active connections",
		strings.Join(modes, ", "), s.Routable(), discovered, active)
	if s.Sample != nil && s.Sample.Maintenance.Failing() {
		line += fmt.Sprintf("; maintenance failing (%d cycles in a row)", s.Sample.Maintenance.ConsecutiveFailures)
	}
	return line
}
