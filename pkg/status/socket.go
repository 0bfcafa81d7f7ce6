package status

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The admin unix socket (issue 28): every route of the admin API, and the
// one place where drain and undrain need no credentials. The socket file
// is mode 0600 in a 0700 directory, both owned by the daemon's user
// (root), so only that user reaches it; each request knows its peer's
// uid and pid (SO_PEERCRED), which the drain log names.

// Requester is who sent a state-changing request and from where, for the
// log and the drain's record.
type Requester struct {
	// Socket: the request came over the admin unix socket; UID and PID
	// are the peer process's credentials when the kernel gave them
	// (SO_PEERCRED), -1 otherwise.
	Socket   bool
	UID, PID int
	// Remote is the HTTP client's address (host:port); User the identity
	// it proved: the basic-auth user, or "cert:" and the subject's common
	// name of a verified client certificate.
	Remote, User string
}

// String is the requester in one phrase: "unix socket uid 0 pid 4242" or
// "http 192.0.2.7:51234 user operator".
func (r Requester) String() string {
	if r.Socket {
		s := "unix socket"
		if r.UID >= 0 {
			s += " uid " + strconv.Itoa(r.UID)
		}
		if r.PID > 0 {
			s += " pid " + strconv.Itoa(r.PID)
		}
		return s
	}
	s := "http " + r.Remote
	if r.User != "" {
		s += " user " + r.User
	}
	return s
}

// Fields are the requester as log fields.
func (r Requester) Fields() map[string]any {
	if r.Socket {
		return map[string]any{"via": "unix socket", "peer_uid": r.UID, "peer_pid": r.PID}
	}
	return map[string]any{"via": "http", "remote": r.Remote, "user": r.User}
}

// peerKey is the context key of a socket connection's peer credentials.
type peerKey struct{}

// peerContext stores the credentials of a unix connection's peer in its
// requests' context (http.Server.ConnContext).
func peerContext(ctx context.Context, c net.Conn) context.Context {
	r := Requester{Socket: true, UID: -1, PID: -1}
	if uc, ok := c.(*net.UnixConn); ok {
		if rc, err := uc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					r.UID, r.PID = int(cred.Uid), int(cred.Pid)
				}
			})
		}
	}
	return context.WithValue(ctx, peerKey{}, r)
}

// socketPeer returns the socket peer of r's connection; ok is false for a
// request that did not come over the admin socket.
func socketPeer(r *http.Request) (Requester, bool) {
	p, ok := r.Context().Value(peerKey{}).(Requester)
	return p, ok
}

// ListenSocket creates the admin unix socket at path: its directory
// (mode 0700) when missing, then the socket, mode 0600. A socket file
// left by a process that is gone (a crash) is replaced; one that another
// process still serves is an error that names path. Closing the listener
// does not remove the file (a hot-upgrade successor serves on it);
// RemoveSocket does.
func ListenSocket(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("status: admin socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("status: admin socket %s: the path exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("status: admin socket %s: another process serves it (an xlb in another network namespace?); set admin.socket to a path of its own", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("status: admin socket %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("status: admin socket %s: remove the stale socket: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("status: admin socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("status: admin socket: %w", err)
	}
	return ln, nil
}

// RemoveSocket removes the admin socket file at path at the end of a
// clean stop; a missing file is no error.
func RemoveSocket(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("status: remove the admin socket: %w", err)
	}
	return nil
}

// socketHint is what a refused HTTP command tells the client to use.
func socketHint(path string) string {
	if path == "" {
		return "configure admin.auth or basic_auth_users in admin.web_config_file"
	}
	return "run xlbctl on this host as root (it uses the admin socket " + path + "), or configure admin.auth or basic_auth_users in admin.web_config_file"
}

// trimPort returns the host of a Host header value: without a port,
// without IPv6 brackets, in lower case.
func trimPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}
