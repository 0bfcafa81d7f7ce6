package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xlbproject/xlb/pkg/config"
)

// plain is a top frame without its control sequences (inPlace).
func plain(frame string) string {
	return strings.NewReplacer(cursorHome, "", clearToEOL, "", clearToEOS, "").Replace(frame)
}

// serve answers /api/v1/status with code and body; everything else 404.
func serve(t *testing.T, code int, body []byte) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/status" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// runCLI runs xlbctl with args and the environment env.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func notReadyBody(t *testing.T) []byte {
	b, err := json.Marshal(notReady(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readGolden(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExitCodes(t *testing.T) {
	_, body := recorded(t)
	ready := serve(t, 200, body)
	notReadySrv := serve(t, 200, notReadyBody(t))
	unavailable := serve(t, 503, []byte("shutting_down"))
	broken := serve(t, 200, []byte("{not json"))
	future := serve(t, 200, []byte(`{"schema_version": 3}`))
	_, servicesBody := recordedServices(t)
	services := serve(t, 200, servicesBody)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string // exact, when set
		stderr string // substring, when set
	}{
		{"ready", []string{"--admin", ready.URL, "status"}, 0, readGolden(t, "status"), ""},
		{"not ready", []string{"--admin", notReadySrv.URL, "status"}, 3, readGolden(t, "status_not_ready"), ""},
		{"not ready, backends still 0", []string{"--admin", notReadySrv.URL, "backends"}, 0, readGolden(t, "backends_none"), ""},
		{"backends", []string{"--admin", ready.URL, "backends"}, 0, readGolden(t, "backends"), ""},
		{"flows", []string{"--admin", ready.URL, "flows"}, 0, readGolden(t, "flows"), ""},
		{"flags after the command", []string{"backends", "--admin", ready.URL}, 0, readGolden(t, "backends"), ""},
		{"host:port without scheme", []string{"--admin", strings.TrimPrefix(ready.URL, "http://"), "status"}, 0, readGolden(t, "status"), ""},
		{"HTTP 503", []string{"--admin", unavailable.URL, "status"}, 1, "", "503 Service Unavailable: shutting_down"},
		{"not JSON", []string{"--admin", broken.URL, "status"}, 1, "", "decode status document"},
		{"unknown schema", []string{"--admin", future.URL, "backends"}, 1, "", "schema_version 3; this xlbctl reads 1 to 2"},
		{"services", []string{"--admin", services.URL, "status"}, 0, readGolden(t, "status_services"), ""},
		{"services: backends", []string{"--admin", services.URL, "backends"}, 0, readGolden(t, "backends_services"), ""},
		{"--service", []string{"--admin", services.URL, "backends", "--service", "api"}, 0, readGolden(t, "backends_service_api"), ""},
		{"--service of the one service", []string{"--admin", ready.URL, "--service", "web-lb", "status"}, 0, readGolden(t, "status"), ""},
		{"--service of a removed service: not ready", []string{"--admin", services.URL, "--service", "old", "status"}, 3, "", ""},
		{"--service with --json", []string{"--admin", services.URL, "--service", "old", "--json", "status"}, 3, string(servicesBody), ""},
		{"--service unknown", []string{"--admin", services.URL, "--service", "nope", "flows"}, 1, "", "--service nope: the instance has no such service (its services: web, api, old, dns)"},
		{"--service unknown with --json", []string{"--admin", services.URL, "--service", "nope", "--json", "status"}, 1, "", "--service nope"},
		{"connection refused", []string{"--admin", dead.URL, "status"}, 1, "", "connection refused"},
		{"wrong path prefix", []string{"--admin", ready.URL + "/nope", "status"}, 1, "", "404"},
		{"backends --bytes", []string{"--admin", ready.URL, "backends", "--bytes"}, 0, readGolden(t, "backends_bytes"), ""},
		{"unknown command", []string{"--admin", ready.URL, "restart"}, 2, "", `unknown command "restart"`},
		{"no command", []string{"--admin", ready.URL}, 2, "", "no command"},
		{"extra argument", []string{"status", "extra"}, 2, "", `unexpected argument "extra"`},
		{"zero interval", []string{"top", "--interval", "0s"}, 2, "", "--interval 0s"},
		{"unknown flag", []string{"--colour", "status"}, 2, "", "xlbctl: flag provided but not defined: --colour\nRun 'xlbctl --help' for usage.\n"},
		{"empty --admin", []string{"--admin", "", "status"}, 2, "", "--admin: empty URL"},
		{"--admin not a URL", []string{"--admin", "ftp://127.0.0.1:1", "status"}, 2, "", "want http://host:port"},
		{"user without password", []string{"--admin", ready.URL, "--user", "operator", "status"}, 1, "", "XLB_ADMIN_PASSWORD is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, nil, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, errs)
			}
			if c.stdout != "" && out != c.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, c.stdout)
			}
			if c.stderr != "" && !strings.Contains(errs, c.stderr) {
				t.Errorf("stderr %q, want it to contain %q", errs, c.stderr)
			}
			if c.code != exitOK && c.code != exitNotReady && out != "" {
				t.Errorf("error wrote to stdout: %q", out)
			}
			// A usage error is one line and the hint, as xlb's (not the usage).
			if c.code == 2 && strings.Count(errs, "\n") != 2 {
				t.Errorf("usage error: %q, want one line and the hint", errs)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"status", "--help"}} {
		code, out, _ := runCLI(t, nil, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, want := range []string{"--admin URL", "--user NAME", "--json", "--timeout", "--iterations N",
			"--config", "--bytes", "status", "backends", "flows", "top", "XLB_ADMIN_PASSWORD", "XLB_ADMIN_URL",
			"http://127.0.0.1:" + strconv.Itoa(config.DefaultAdminPort), "2 usage", "3 not ready"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
}

// TestJSONPassThrough: --json prints the body byte for byte; status keeps
// its exit code.
func TestJSONPassThrough(t *testing.T) {
	_, body := recorded(t)
	ts := serve(t, 200, body)
	for _, cmd := range []string{"status", "backends", "flows"} {
		code, out, _ := runCLI(t, nil, "--json", "--admin", ts.URL, cmd)
		if code != 0 || out != string(body) {
			t.Errorf("%s --json: exit %d, output differs from the body: %v", cmd, code, out == string(body))
		}
	}
	nr := notReadyBody(t)
	ts = serve(t, 200, nr)
	if code, out, _ := runCLI(t, nil, "status", "--json", "--admin", ts.URL); code != exitNotReady || out != string(nr) {
		t.Errorf("not ready status --json: exit %d, verbatim %v", code, out == string(nr))
	}
	// An unknown schema is still passed through (only rendering needs it).
	future := []byte(`{"schema_version": 3, "readiness": {"ready": true}}`)
	ts = serve(t, 200, future)
	if code, out, _ := runCLI(t, nil, "--json", "--admin", ts.URL, "status"); code != 0 || out != string(future) {
		t.Errorf("schema 3 --json: exit %d, output %q", code, out)
	}
}

func TestBasicAuth(t *testing.T) {
	_, body := recorded(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "operator" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="xlb"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write(body)
	}))
	defer ts.Close()
	env := map[string]string{"XLB_ADMIN_PASSWORD": "s3cret"}
	if code, _, errs := runCLI(t, env, "--admin", ts.URL, "status"); code != 1 || !strings.Contains(errs, "pass --user") {
		t.Errorf("no user: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, map[string]string{"XLB_ADMIN_PASSWORD": "nope"}, "--admin", ts.URL, "--user", "operator", "status"); code != 1 || !strings.Contains(errs, "rejected") {
		t.Errorf("wrong password: exit %d, %q", code, errs)
	}
	if code, out, errs := runCLI(t, env, "--admin", ts.URL, "--user", "operator", "status"); code != 0 || out != readGolden(t, "status") {
		t.Errorf("right password: exit %d, %q", code, errs)
	}
}

// TestTop draws frames until --iterations, each from the cursor's home
// position over the last, and shows rates once two samples were seen.
func TestTop(t *testing.T) {
	early, err := json.Marshal(earlier(t))
	if err != nil {
		t.Fatal(err)
	}
	_, late := recorded(t)
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Write(early)
			return
		}
		w.Write(late)
	}))
	defer ts.Close()
	code, out, errs := runCLI(t, nil, "--admin", ts.URL, "top", "--iterations", "3", "--interval", "10ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	frames := strings.Split(out, cursorHome)
	if len(frames) != 4 || frames[0] != "" {
		t.Fatalf("got %d frames, want 3 each from the cursor's home:\n%q", len(frames)-1, out)
	}
	for i, f := range frames[1:] {
		if !strings.HasSuffix(f, clearToEOL+"\n"+clearToEOS) || strings.Contains(f, "\x1b[2J") {
			t.Errorf("frame %d does not end by erasing the rest of the screen, or erases all of it: %q", i+1, f)
		}
		frames[i+1] = plain(f)
	}
	if !strings.Contains(frames[1], "Rates: - (waiting") {
		t.Errorf("first frame has rates:\n%s", frames[1])
	}
	// Frames 2 and 3 both rate the recorded sample against the earlier one.
	for _, f := range frames[2:] {
		i := strings.Index(f, "\n\n")
		if body := f[i+2:]; body != readGolden(t, "top") {
			t.Errorf("frame differs from top.golden:\n%s", body)
		}
	}

	// A failing server: the frame shows the error, the run exits 1.
	ts.Close()
	code, out, _ = runCLI(t, nil, "--admin", ts.URL, "top", "--iterations", "1")
	if code != 1 || !strings.Contains(out, "error: ") {
		t.Errorf("dead server: exit %d, frame %q", code, out)
	}
}

// TestTopStopsOnSignal: cancelling the context (SIGINT in main) ends top
// with exit 0.
func TestTopStopsOnSignal(t *testing.T) {
	_, body := recorded(t)
	ts := serve(t, 200, body)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--admin", ts.URL, "top", "--interval", "20ms"}, &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" })
	}()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after cancel", code)
	}
}
