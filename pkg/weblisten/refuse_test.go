package weblisten

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A listener bound to every address resets connections to the refused
// address (127.0.0.2 here, on lo like a service address) before any
// HTTP, and serves the others (127.0.0.1).
func TestRefuseTo(t *testing.T) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(RefuseTo(ln, netip.MustParseAddr("127.0.0.2")))
	t.Cleanup(func() { srv.Close() })

	get := func(host string) (string, error) {
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("127.0.0.1"); err != nil || body != "ok" {
		t.Errorf("127.0.0.1: %q %v, want ok", body, err)
	}
	for i := 0; i < 3; i++ {
		if body, err := get("127.0.0.2"); err == nil {
			t.Errorf("127.0.0.2: answered %q, want a reset", body)
		}
	}
	// The connection is reset, not left open: a raw read sees ECONNRESET
	// (or the connect itself does, when the reset beats its return).
	c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)), 20*time.Second)
	if err == nil {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a refused connection: %v, want ECONNRESET", err)
	}
	if body, err := get("127.0.0.1"); err != nil || body != "ok" {
		t.Errorf("127.0.0.1 after the refusals: %q %v, want ok", body, err)
	}
	if RefuseTo(ln) != ln {
		t.Errorf("RefuseTo without addresses wraps the listener")
	}
}
