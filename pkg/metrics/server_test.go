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
	srv, _ := testServer(t, &store, nil)
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
	srv, _ := testServer(t, &store, nil)
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

func TestListenAndServeStopsWithContext(t *testing.T) {
	var store snapshot.Store
	srv, err := New(Options{Store: &store, Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ListenAndServe did not return after the context ended")
	}
}

func TestListenAndServeReportsBindError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var store snapshot.Store
	srv, err := New(Options{Store: &store, Address: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ListenAndServe(context.Background()); err == nil {
		t.Error("ListenAndServe on a bound port: nil error")
	}
}

func TestNewRequiresStore(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a Store: nil error")
	}
}
