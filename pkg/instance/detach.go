package instance

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xlbproject/xlb/pkg/dataplane"
	"github.com/xlbproject/xlb/pkg/hostnet"
)

// Detached is what Detach took down.
type Detached struct {
	// Links are the interfaces whose pinned XDP link was detached.
	Links []string
	// NetlinkXDP are the interfaces whose netlink-attached XDP program
	// (recorded in the journal) was detached.
	NetlinkXDP []string
	// Pins counts the pins removed under state_dir.
	Pins int
	// Neighbours counts the managed neighbour entries removed.
	Neighbours int
	// Sysctls are the /proc/sys files written back to their recorded
	// original values, sorted.
	Sysctls []string
}

// Empty reports whether Detach found nothing to take down.
func (d Detached) Empty() bool {
	return len(d.Links) == 0 && len(d.NetlinkXDP) == 0 && d.Pins == 0 && d.Neighbours == 0 && len(d.Sysctls) == 0
}

// String says what was taken down, for the log and `xlb detach`.
func (d Detached) String() string {
	if d.Empty() {
		return "nothing was left attached"
	}
	var parts []string
	if xdp := append(slices.Clone(d.Links), d.NetlinkXDP...); len(xdp) > 0 {
		parts = append(parts, "XDP detached from "+strings.Join(xdp, ", "))
	}
	if d.Pins > 0 {
		parts = append(parts, fmt.Sprintf("%d pins removed", d.Pins))
	}
	if d.Neighbours > 0 {
		parts = append(parts, fmt.Sprintf("%d neighbour entries removed", d.Neighbours))
	}
	if len(d.Sysctls) > 0 {
		parts = append(parts, "restored "+strings.Join(d.Sysctls, ", "))
	}
	return strings.Join(parts, "; ")
}

// ErrRunning is Detach's error while an xlb runs in the caller's network
// namespace (it holds the instance lock).
var ErrRunning = hostnet.ErrInstanceRunning

// Detach takes down, in the caller's network namespace, what an instance
// that no longer runs left behind: a crash or SIGKILL, or a stop of a
// failed or restarting unit, keeps the data path attached through its
// pins (DESIGN §6) and the host settings as they were, so stale pairs
// keep forwarding to old backends with no process to clean them up. It
// takes the namespace's instance lock first and refuses with ErrRunning
// while an xlb holds it, then, in Stop's order: detaches the XDP programs
// attached through netlink that the host settings journal in journalDir
// records, detaches every XDP link pinned under stateDir and removes
// every pin there (dataplane.DetachPinned), removes the recorded
// neighbour entries and writes the recorded sysctls back (the journal
// goes with them). journalDir "" is hostnet.DefaultJournalDir. Nothing
// left is no error.
func Detach(stateDir, journalDir string) (Detached, error) {
	if journalDir == "" {
		journalDir = hostnet.DefaultJournalDir
	}
	var out Detached
	lock, err := hostnet.LockNetns(journalDir)
	if err != nil {
		return out, err
	}
	defer lock.Release()
	j, err := hostnet.OpenJournal(journalDir)
	if err != nil {
		return out, err
	}
	var errs []error
	xdp := j.XDPPrograms()
	for _, ifname := range slices.Sorted(maps.Keys(xdp)) {
		done, err := dataplane.DetachNetlinkXDP(ifname, xdp[ifname])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if done {
			out.NetlinkXDP = append(out.NetlinkXDP, ifname)
		}
		errs = append(errs, j.SetXDPProgram(ifname, 0))
	}
	left, err := dataplane.DetachPinned(stateDir)
	out.Links, out.Pins = left.Links, left.Pins
	errs = append(errs, err)
	n, err := j.RemoveNeighbours()
	out.Neighbours = n
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		// The journal stays for another try.
		return out, fmt.Errorf("detach: %w", err)
	}
	for _, r := range j.Recovered() {
		if strings.HasPrefix(r, hostnet.SysctlRoot) {
			out.Sysctls = append(out.Sysctls, r)
		}
	}
	if err := j.Restore(); err != nil {
		out.Sysctls = nil
		return out, fmt.Errorf("detach: %w", err)
	}
	return out, nil
}
