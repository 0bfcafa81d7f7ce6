package health

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/config"
)

// targetOf is the target of a listener's address.
func targetOf(t *testing.T, a net.Addr) Target {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return Target{IP: ap.Addr(), Port: ap.Port()}
}

// errText is err's text, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go acceptAll(ln)
	up := targetOf(t, ln.Addr())

	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := targetOf(t, gone.Addr())
	gone.Close()

	full := fullListener(t)

	bound := up
	bound.Source, bound.Interface = loopback, "lo"
	noDevice := up
	noDevice.Interface = "xlbnosuch0"

	cfg := tcpCheck(time.Second, 300*time.Millisecond, 2, 3)
	for _, tc := range []struct {
		name   string
		target Target
		want   string // error text; "" for a pass
	}{
		{"listening", up, ""},
		{"refused", refused, "connect: connection refused"},
		{"accept queue full: the SYN is dropped", full, "timeout"},
		{"from source 127.0.0.1 out of lo", bound, ""},
		{"bound to a missing device", noDevice, "connect: bind to device xlbnosuch0: no such device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errText(probe(context.Background(), cfg, tc.target, cfg.Timeout)); got != tc.want {
				t.Errorf("check: %q, want %q", got, tc.want)
			}
		})
	}
}

// fullListener returns the target of a listener on 127.0.0.1 with a
// backlog of 0 whose accept queue is full (nothing accepts): the kernel
// drops further SYNs, so a connect gets no answer.
func fullListener(t *testing.T) Target {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(loopback, uint16(sa.(*unix.SockaddrInet4).Port))
	for range 10 {
		c, err := net.DialTimeout("tcp", addr.String(), 300*time.Millisecond)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
				return Target{IP: addr.Addr(), Port: addr.Port()}
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the accept queue took 10 connections: not full")
	return Target{}
}

// seenRequest is what the http test server saw of one request.
type seenRequest struct {
	method, uri, host string
	close             bool
	ua                string
}

func TestHTTPProbe(t *testing.T) {
	seen := make(chan seenRequest, 10)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- seenRequest{r.Method, r.RequestURI, r.Host, r.Close, r.UserAgent()}
		switch r.URL.Path {
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/health/ready":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Write([]byte("ok\n"))
		}
	}))
	defer srv.Close()
	defer close(release)
	target := targetOf(t, srv.Listener.Addr())

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go closeAfterRequest(silent)

	for _, tc := range []struct {
		name   string
		path   string
		expect int
		target Target
		want   string
	}{
		{"expected status", "/", 200, target, ""},
		{"another path and status", "/health/ready", 204, target, ""},
		{"wrong status", "/down", 200, target, "status 503"},
		{"200 where 204 is expected", "/", 204, target, "status 200"},
		{"handler hangs past the timeout", "/hang", 200, target, "timeout"},
		{"closed without a response", "/", 200, targetOf(t, silent.Addr()), "read: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.HealthCheck{Type: config.HealthCheckHTTP, Interval: time.Second, Timeout: 300 * time.Millisecond,
				Rise: 2, Fall: 3, Path: tc.path, ExpectStatus: tc.expect}
			if got := errText(probe(context.Background(), cfg, tc.target, cfg.Timeout)); got != tc.want {
				t.Errorf("check: %q, want %q", got, tc.want)
			}
			if tc.target != target {
				return
			}
			r := <-seen
			want := seenRequest{"GET", tc.path, netip.AddrPortFrom(target.IP, target.Port).String(), true, "xlb-health-check"}
			if r != want {
				t.Errorf("server saw %+v, want %+v", r, want)
			}
		})
	}
}

// closeAfterRequest reads one request per connection and closes it
// without a response, until ln is closed.
func closeAfterRequest(ln net.Listener) {
	serveConns(ln, func(c net.Conn) { http.ReadRequest(bufio.NewReader(c)) })
}
