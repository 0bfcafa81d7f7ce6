package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// drainAPI answers POST /api/v1/drain and /api/v1/undrain as the admin
// listener does, with Basic auth when user is set, and records the
// requests.
func drainAPI(t *testing.T, user, pass string) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); user != "" && (!ok || u != user || p != pass) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var body string
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/drain":
			body = `{"drained":true}`
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/undrain":
			body = `{"drained":false}`
		default:
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body + "\n"))
	}))
	t.Cleanup(ts.Close)
	return ts, &got
}

func TestDrainCommands(t *testing.T) {
	ts, got := drainAPI(t, "", "")
	if code, out, errs := runCLI(t, nil, "--admin", ts.URL, "drain"); code != exitOK || !strings.HasPrefix(out, "drained:") {
		t.Fatalf("drain: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runCLI(t, nil, "undrain", "--admin", ts.URL); code != exitOK || !strings.HasPrefix(out, "undrained:") {
		t.Fatalf("undrain: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if want := []string{"POST /api/v1/drain", "POST /api/v1/undrain"}; strings.Join(*got, ",") != strings.Join(want, ",") {
		t.Fatalf("requests %v, want %v", *got, want)
	}

	authed, _ := drainAPI(t, "operator", "s3cret")
	if code, _, errs := runCLI(t, nil, "--admin", authed.URL, "drain"); code != exitError || !strings.Contains(errs, "requires auth") {
		t.Fatalf("drain without credentials: exit %d, stderr %q", code, errs)
	}
	env := map[string]string{"XLB_ADMIN_PASSWORD": "s3cret"}
	if code, _, errs := runCLI(t, env, "--admin", authed.URL, "--user", "operator", "drain"); code != exitOK {
		t.Fatalf("drain with credentials: exit %d, stderr %q", code, errs)
	}

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the instance is shutting down", http.StatusConflict)
	}))
	defer refusing.Close()
	if code, _, errs := runCLI(t, nil, "--admin", refusing.URL, "drain"); code != exitError || !strings.Contains(errs, "409 Conflict: the instance is shutting down") {
		t.Fatalf("a refused drain: exit %d, stderr %q, want the 409 and its reason", code, errs)
	}
}

// serveSocket serves h on a unix socket in a fresh directory and returns
// its path.
func serveSocket(t *testing.T, h http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

// Over the admin socket (issue 28) drain needs no credentials, even when
// xlb.yaml names an admin user without XLB_ADMIN_PASSWORD: xlbctl takes
// the socket from --socket, or from admin.socket of --config when it
// exists, before the HTTP address.
func TestDrainOverSocket(t *testing.T) {
	var mu sync.Mutex
	var got []string
	sock := serveSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); ok {
			http.Error(w, "credentials over the socket", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"drained":true}` + "\n"))
	}))
	if code, out, errs := runCLI(t, nil, "--socket", sock, "drain"); code != exitOK || !strings.HasPrefix(out, "drained:") {
		t.Fatalf("drain --socket: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	cfg := lbConfig(t, "  port: 8704\n  auth:\n    username: operator\n  socket: "+sock+"\n")
	if code, out, errs := runCLI(t, nil, "--config", cfg, "drain"); code != exitOK || !strings.HasPrefix(out, "drained:") {
		t.Fatalf("drain through admin.socket of --config: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if want := "POST /api/v1/drain,POST /api/v1/drain"; strings.Join(got, ",") != want {
		t.Fatalf("requests %v, want %s", got, want)
	}
	// A socket that does not exist: the HTTP address of the file.
	o, _, _ := parseArgs([]string{"--config", lbConfig(t, "  port: 8705\n  socket: "+sock+".gone\n"), "drain"})
	if tg, err := resolveTarget(o, func(string) string { return "" }); err != nil || tg.socket != "" || tg.url != "http://127.0.0.1:8705" {
		t.Fatalf("a missing socket: %+v %v, want the HTTP address", tg, err)
	}
	// A socket nobody serves (a crashed daemon's): the HTTP address.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	o, _, _ = parseArgs([]string{"--config", lbConfig(t, "  port: 8706\n  socket: "+stale+"\n"), "drain"})
	if tg, err := resolveTarget(o, func(string) string { return "" }); err != nil || tg.socket != "" || tg.url != "http://127.0.0.1:8706" {
		t.Fatalf("a stale socket: %+v %v, want the HTTP address", tg, err)
	}
	if code, _, errs := runCLI(t, nil, "--socket", sock+".gone", "drain"); code != exitError || !strings.Contains(errs, sock+".gone") {
		t.Fatalf("drain --socket at a missing path: exit %d, stderr %q", code, errs)
	}
}
