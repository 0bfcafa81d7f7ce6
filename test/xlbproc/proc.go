package xlbproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Log lines of a hand-off (plan of issue 12, pkg/daemon) that Proc
// follows: the old process starts a successor, then reports the outcome.
const (
	LineStarting   = "hot upgrade: starting the new process" // old process; field pid: the successor
	LineHandedOver = "hot upgrade complete: handed over"     // old process on success; field new_pid
	LineFailed     = "hot upgrade failed; still serving"     // old process on failure; field error
)

// Fields of those lines, in logrus text (pid=N) or JSON ("pid":N) form.
var (
	pidField    = regexp.MustCompile(`\bpid"?[=:](\d+)`)
	newPidField = regexp.MustCompile(`\bnew_pid"?[=:](\d+)`)
)

// outcomeWait bounds how long an owner's exit waits for the outcome line
// of a hand-off it started: the line was written before the exit, so it
// is only still in the pipe.
const outcomeWait = 10 * time.Second

// Proc is a running xlb daemon, followed across hot-upgrade hand-offs: the
// owner is the original process until it hands over, then its successor,
// and so on. Following a successor after its parent exits needs the
// calling process to be a child subreaper (SetChildSubreaper); otherwise
// Wait reports the successor's exit without its code.
type Proc struct {
	Cmd    *exec.Cmd // the original process
	Config string    // path of the config file

	mu      sync.Mutex
	log     bytes.Buffer
	tee     *os.File
	partial []byte // an incomplete last line, kept for parsing
	cur     *os.Process
	// candidates are the successors owners started (LineStarting), by pid.
	candidates map[int]*os.Process
	// pending counts the current owner's hand-offs without an outcome
	// line yet; handedTo is the successor's pid once LineHandedOver came.
	pending  int
	handedTo int
	handOffs []HandOff

	// exited is closed once the last owner has exited; code and err are
	// then its exit code (-1: killed by a signal) and wait error.
	exited chan struct{}
	code   int
	err    error
}

// HandOff is one completed hand-off as Proc followed it.
type HandOff struct {
	From, To int       // pids of the old process and its successor
	At       time.Time // when the old process's exit was seen
}

func newProc(cmd *exec.Cmd, config string, tee *os.File) *Proc {
	return &Proc{
		Cmd: cmd, Config: config, tee: tee, cur: cmd.Process,
		candidates: map[int]*os.Process{}, exited: make(chan struct{}),
	}
}

// Log returns everything the daemon and its successors wrote so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Exited reports whether the daemon has exited: the last owner, not an
// old process that handed over.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Pid is the current owner's process id.
func (p *Proc) Pid() int { return p.owner().Pid }

// HandOffs returns the completed hand-offs so far, oldest first.
func (p *Proc) HandOffs() []HandOff {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]HandOff(nil), p.handOffs...)
}

// WaitHandOff waits until the owner is no longer the process from (its
// successor took over) and returns the new owner's pid; it fails when the
// daemon exits instead or timeout passes.
func (p *Proc) WaitHandOff(from int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		if pid := p.Pid(); pid != from {
			return pid, nil
		}
		if p.Exited() {
			return 0, fmt.Errorf("xlb (pid %d) exited (%v) instead of handing over:\n%s", from, p.exitErr(), p.Log())
		}
		if time.Now().After(deadline) {
			why := "did not hand over"
			if p.Count(LineHandedOver) > len(p.HandOffs()) {
				why = "logged that it handed over but did not exit"
			}
			return 0, fmt.Errorf("pid %d %s within %s:\n%s", from, why, timeout, p.Log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *Proc) owner() *os.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *Proc) exitErr() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

func (p *Proc) candidateList() []*os.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*os.Process
	for _, c := range p.candidates {
		out = append(out, c)
	}
	return out
}

// copyLog reads the shared log pipe until every process holding its
// write end has exited.
func (p *Proc) copyLog(r *os.File) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.absorb(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// absorb appends b to the log and parses the hand-off lines it completes.
func (p *Proc) absorb(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tee != nil {
		p.tee.Write(b)
	}
	p.log.Write(b)
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.parseLine(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	p.partial = append([]byte(nil), p.partial...)
}

// parseLine updates the hand-off state from one log line (p.mu held).
func (p *Proc) parseLine(line string) {
	switch {
	case strings.Contains(line, LineStarting):
		p.pending++
		if pid := field(pidField, line); pid > 0 {
			// pidfd_open now, while the successor is the owner's child:
			// the handle stays valid whatever happens to the number.
			if proc, err := os.FindProcess(pid); err == nil {
				p.candidates[pid] = proc
			}
		}
	case strings.Contains(line, LineHandedOver):
		p.pending = 0
		p.handedTo = field(newPidField, line)
	case strings.Contains(line, LineFailed):
		if p.pending > 0 {
			p.pending--
		}
	}
}

func field(re *regexp.Regexp, line string) int {
	m := re.FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
