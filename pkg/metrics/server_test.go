package metrics

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/snapshot"
)

func TestLandingPage(t *testing.T) {
	var store snapshot.Store
	store.Publish(fixtureSnapshot())
	srv, _ := testServer(t, &store)
	resp, body := get(t, srv.Handler(), "/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q", ct)
	}
	for _, want := range []string{`href="metrics"`, "web-lb"} {
		if !strings.Contains(body, want) {
			t.Errorf("landing page lacks %q:\n%s", want, body)
		}
	}
	if resp, _ := get(t, srv.Handler(), "/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: status %d, want 404", resp.StatusCode)
	}
}

func TestServeAndShutdown(t *testing.T) {
	var store snapshot.Store
	srv, _ := testServer(t, &store)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown: %v, want nil", err)
	}
}

func TestNewRequiresStore(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a Store: nil error")
	}
}
