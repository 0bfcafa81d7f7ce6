package weblisten

import (
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// curlResult is what curl reported for one request.
type curlResult struct {
	exit    int    // curl's exit status (0 when it got any HTTP answer)
	code    int    // HTTP status, 0 without one
	version string // HTTP version, "1.1" or "2"
	headers string // response headers, as received
	stderr  string
}

// curl runs Debian's curl (make deps installs it) with args and the URL,
// at most 20 s, and reports the status, the HTTP version and the headers.
func curl(t *testing.T, url string, args ...string) curlResult {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is not installed (make deps installs it): %v", err)
	}
	full := append([]string{"-sS", "--max-time", "20", "-o", "/dev/null", "-D", "-",
		"-w", "\n%{http_code} %{http_version}"}, args...)
	cmd := exec.Command(path, append(full, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	r := curlResult{stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	last := s[i+1:]
	r.headers = s[:max(i, 0)]
	if f := strings.Fields(last); len(f) == 2 {
		r.code, _ = strconv.Atoi(f[0])
		r.version = f[1]
	}
	return r
}

// serve starts f's listener on 127.0.0.1 (a free port) with handler h
// guarded by f (open as Guard's) and returns its base URL; the server
// stops when the test ends.
func serve(t *testing.T, f *File, h http.Handler, open func(*http.Request) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, f, ln, h, open)
}

func serveOn(t *testing.T, f *File, ln net.Listener, h http.Handler, open func(*http.Request) bool) string {
	t.Helper()
	srv := &http.Server{Handler: f.Guard(h, open)}
	done := make(chan error, 1)
	go func() { done <- f.Serve(srv, ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil && err != http.ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
	scheme := "http"
	if f.TLS() {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String()
}
