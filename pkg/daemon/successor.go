package daemon

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/xlbproject/xlb/pkg/instance"
)

// successor is this process's side of a hot upgrade when a running
// predecessor started it (handoff_protocol.go): the inherited listeners
// and lock, and the channel to the predecessor.
type successor struct {
	conn     *handOffConn
	admin    net.Listener
	metrics  net.Listener
	socket   *net.UnixListener // nil from a predecessor without an admin socket
	lock     *os.File
	fromPID  int
	reported bool // a ready or failed message went out
	drained  bool // the predecessor was drained (quiesced message)
}

// inheritedSuccessor returns the hand-off this process was started for,
// nil when it was started normally. It takes the inherited descriptors
// and clears envHandOff, so that this process's own successor is told
// afresh.
func inheritedSuccessor() (*successor, error) {
	if os.Getenv(envHandOff) != "1" {
		return nil, nil
	}
	os.Unsetenv(envHandOff)
	s := &successor{fromPID: os.Getppid()}
	var err error
	if s.conn, err = fileConn(os.NewFile(fdHandOff, "xlb-handoff")); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		fd  uintptr
		dst *net.Listener
	}{{fdAdmin, &s.admin}, {fdMetrics, &s.metrics}} {
		f := os.NewFile(l.fd, "xlb-listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			s.fail(fmt.Errorf("inherited listener (descriptor %d): %w", l.fd, err))
			return nil, err
		}
		*l.dst = ln
	}
	s.lock = os.NewFile(fdLock, "xlb-instance-lock")
	if os.Getenv(envHandOffSocket) == "1" {
		os.Unsetenv(envHandOffSocket)
		f := os.NewFile(fdSocket, "xlb-admin-socket")
		ln, err := net.FileListener(f)
		f.Close()
		uln, ok := ln.(*net.UnixListener)
		if err == nil && !ok {
			ln.Close()
			err = fmt.Errorf("a %T, not a unix socket", ln)
		}
		if err != nil {
			err = fmt.Errorf("inherited admin socket (descriptor %d): %w", fdSocket, err)
			s.fail(err)
			return nil, err
		}
		s.socket = uln
	}
	// The watchdog belongs to the main process, which this one becomes.
	if os.Getenv("WATCHDOG_PID") != "" {
		os.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	}
	return s, nil
}

// instanceSuccessor is what instance.Start needs from the predecessor.
func (s *successor) instanceSuccessor() *instance.Successor {
	return &instance.Successor{Lock: s.lock, Quiesce: s.quiesce}
}

// quiesce asks the predecessor to stop writing to the data path and
// returns what it hands over.
func (s *successor) quiesce() (instance.Handed, error) {
	if err := s.conn.send(handOffMsg{Type: msgQuiesce}); err != nil {
		return instance.Handed{}, err
	}
	m, err := s.conn.recv()
	if err != nil {
		return instance.Handed{}, fmt.Errorf("hand-off: waiting for the running xlb to stop its maintenance: %w", err)
	}
	if m.Type != msgQuiesced {
		return instance.Handed{}, fmt.Errorf("hand-off: unexpected message %q", m.Type)
	}
	s.drained = m.Drained
	return instance.Handed{Backends: m.Backends, HZ: m.HZ}, nil
}

// ready tells the predecessor that this process took over: it exits.
func (s *successor) ready() error {
	s.reported = true
	return s.conn.send(handOffMsg{Type: msgReady, PID: os.Getpid()})
}

// fail tells the predecessor why this process gives up (it keeps
// serving), once.
func (s *successor) fail(err error) {
	if s == nil || s.reported {
		return
	}
	s.reported = true
	s.conn.send(handOffMsg{Type: msgFailed, Error: err.Error()})
}

// close releases the channel (the listeners and the lock now belong to
// the running instance or were closed with it).
func (s *successor) close() {
	if s != nil {
		s.conn.Close()
	}
}

// HandOffFailed tells a running predecessor that this process, started as
// its hot-upgrade successor, failed before the daemon ran (an invalid
// config): the predecessor keeps serving and reports err. It does nothing
// in a process started normally.
func HandOffFailed(err error) {
	if os.Getenv(envHandOff) != "1" {
		return
	}
	c, cerr := fileConn(os.NewFile(fdHandOff, "xlb-handoff"))
	if cerr != nil {
		return
	}
	defer c.Close()
	c.send(handOffMsg{Type: msgFailed, Error: err.Error()})
}
