package main

import (
	"net/http"
	"net/http/httptest"
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
