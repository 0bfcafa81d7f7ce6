package xlbproc

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// follow waits for the owner to exit. An exit 0 after the owner logged
// LineHandedOver moves ownership to the successor it named (re-parented
// to this process by then, see SetChildSubreaper); any other exit ends
// the daemon.
func (p *Proc) follow() {
	wait := func() (int, error) {
		err := p.Cmd.Wait()
		return p.Cmd.ProcessState.ExitCode(), err
	}
	for {
		code, err := wait()
		if code == 0 {
			if next := p.successor(); next != nil {
				wait = func() (int, error) { return waitAdopted(next) }
				continue
			}
		}
		p.mu.Lock()
		p.code, p.err = code, err
		p.mu.Unlock()
		close(p.exited)
		return
	}
}

// successor makes the process the exited owner handed over to the new
// owner and returns it, or returns nil when the owner did not hand over.
// An owner with a hand-off under way (LineStarting without an outcome
// yet) wrote its outcome before it exited: wait for the line to come
// through the pipe.
func (p *Proc) successor() *os.Process {
	deadline := time.Now().Add(outcomeWait)
	for {
		p.mu.Lock()
		to, pending := p.handedTo, p.pending
		if to != 0 {
			next := p.candidates[to]
			if next == nil {
				// Re-parented to this process by now: its number cannot be
				// reused before it is reaped.
				var err error
				if next, err = os.FindProcess(to); err != nil {
					p.mu.Unlock()
					return nil
				}
			}
			p.handOffs = append(p.handOffs, HandOff{From: p.cur.Pid, To: to, At: time.Now()})
			p.cur, p.handedTo, p.pending = next, 0, 0
			p.mu.Unlock()
			return next
		}
		p.mu.Unlock()
		if pending == 0 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAdopted waits for a successor to exit and returns its exit code.
// It can collect the code only as the successor's parent (after its
// original parent exited, with this process a child subreaper); otherwise
// it polls until the process is gone and reports the code as unknown.
func waitAdopted(proc *os.Process) (int, error) {
	st, err := proc.Wait()
	if err == nil {
		if !st.Success() {
			return st.ExitCode(), fmt.Errorf("xlb (pid %d): %v", proc.Pid, st)
		}
		return 0, nil
	}
	for running(proc.Pid) {
		time.Sleep(50 * time.Millisecond)
	}
	return -1, fmt.Errorf("xlbproc: pid %d is not a child of this process (SetChildSubreaper follows hand-offs): %w", proc.Pid, err)
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// SetChildSubreaper makes the calling process a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER): a successor whose parent, the old
// daemon, exits after a hand-off is re-parented to it instead of to PID
// 1, which on the lab machines does not reap orphans (LAB-NOTES
// "Processes"). Proc then waits for successors as their parent. Call it
// once, before starting daemons (e.g. in TestMain), and ReapOrphans at
// the end.
func SetChildSubreaper() error {
	if err := prctlSubreaper(); err != nil {
		return fmt.Errorf("xlbproc: PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}

// ReapOrphans kills (SIGKILL, by pid) every child of this process that
// still runs and reaps every child, zombie or killed: what is left of the
// processes a subreaper adopted once nothing else waits for children (the
// end of TestMain). It returns "PID COMM" of each process it had to kill.
func ReapOrphans() []string {
	var killed []string
	for _, c := range children() {
		if c.state != 'Z' {
			if syscall.Kill(c.pid, syscall.SIGKILL) == nil {
				killed = append(killed, fmt.Sprintf("%d %s", c.pid, c.comm))
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err != nil { // ECHILD: none left
			break
		}
		if pid == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return killed
}
