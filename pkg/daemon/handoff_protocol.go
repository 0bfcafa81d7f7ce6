package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/backend"
)

// The hot-upgrade hand-off (DESIGN §6) between a running xlb (the
// predecessor) and the process it starts from the binary now on disk (the
// successor). The predecessor starts the successor with envHandOff set and
// these inherited descriptors; they talk over a SOCK_SEQPACKET socket pair,
// one JSON handOffMsg per packet:
//
//	successor → predecessor  quiesce   (data path loaded against the pins)
//	predecessor → successor  quiesced  (discovery and maintenance stopped; backend names)
//	successor → predecessor  ready     (attached, published, maintenance running, READY=1 sent)
//	successor → predecessor  failed    (why; it exits non-zero)
//
// A successor that exits or closes the socket before ready has failed too.
const (
	envHandOff = "XLB_HANDOFF" // "1" in a successor's environment

	// Inherited descriptors (exec.Cmd.ExtraFiles start at 3).
	fdHandOff = 3 // the successor's end of the socket pair
	fdAdmin   = 4 // the admin listener
	fdMetrics = 5 // the metrics listener
	fdLock    = 6 // the instance lock file (hostnet.AdoptLock)
	// fdSocket is the admin unix socket, inherited when envHandOffSocket
	// is "1" (a predecessor older than the socket passes none).
	fdSocket         = 7
	envHandOffSocket = "XLB_HANDOFF_ADMIN_SOCKET"
)

// Message types.
const (
	msgQuiesce  = "quiesce"
	msgQuiesced = "quiesced"
	msgReady    = "ready"
	msgFailed   = "failed"
)

// handOffMsg is one message of the hand-off.
type handOffMsg struct {
	Type  string `json:"type"`
	PID   int    `json:"pid,omitempty"`   // ready: the successor's pid
	Error string `json:"error,omitempty"` // failed: why
	// Backends are every backend of every service the predecessor knew
	// (quiesced), each with its service, member id and backend id: the
	// successor keeps their ids, and their names while they drain.
	Backends []backend.Known `json:"backends,omitempty"`
	// HZ is the kernel tick rate the predecessor measured (quiesced; 0:
	// none yet).
	HZ int `json:"hz,omitempty"`
	// Drained: an operator drained the predecessor (quiesced); the
	// successor starts drained (DESIGN §6a: the state survives a hot
	// upgrade).
	Drained bool `json:"drained,omitempty"`
}

// handOffConn is one end of the hand-off socket.
type handOffConn struct{ c *net.UnixConn }

// newHandOffPair returns the predecessor's end and the file the successor
// inherits as fdHandOff.
func newHandOffPair() (*handOffConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("hand-off socket pair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "xlb-handoff")
	theirs := os.NewFile(uintptr(fds[1]), "xlb-handoff-successor")
	c, err := fileConn(mine)
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return c, theirs, nil
}

// fileConn wraps a socket file (and closes f: net.FileConn duplicates it).
func fileConn(f *os.File) (*handOffConn, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("hand-off socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("hand-off socket: descriptor %d is a %T, not a unix socket", f.Fd(), c)
	}
	return &handOffConn{c: uc}, nil
}

func (h *handOffConn) send(m handOffMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := h.c.Write(b); err != nil {
		return fmt.Errorf("hand-off: send %s: %w", m.Type, err)
	}
	return nil
}

// recv reads one message; io.EOF when the other end closed.
func (h *handOffConn) recv() (handOffMsg, error) {
	buf := make([]byte, 64<<10)
	n, err := h.c.Read(buf)
	if err != nil {
		return handOffMsg{}, err
	}
	if n == 0 {
		return handOffMsg{}, errPeerClosed
	}
	var m handOffMsg
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return handOffMsg{}, fmt.Errorf("hand-off: bad message: %w", err)
	}
	return m, nil
}

func (h *handOffConn) Close() error { return h.c.Close() }

var errPeerClosed = fmt.Errorf("hand-off: the other process closed the channel")
