package xlbproc

import (
	"os"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// procStat is what /proc/PID/stat says about a process.
type procStat struct {
	pid   int
	comm  string
	state byte // R, S, D, Z, …
}

// readStat reads /proc/PID/stat; ok is false when the process is gone.
func readStat(pid int) (procStat, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procStat{}, false
	}
	st, err := p.Stat()
	if err != nil || st.State == "" {
		return procStat{}, false
	}
	return procStat{pid: st.PID, comm: st.Comm, state: st.State[0]}, true
}

// children lists the processes whose parent is this process.
func children() []procStat {
	all, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []procStat
	for _, p := range all {
		st, err := p.Stat()
		if err != nil || st.PPID != self || st.State == "" {
			continue
		}
		out = append(out, procStat{pid: st.PID, comm: st.Comm, state: st.State[0]})
	}
	return out
}

func prctlSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }
