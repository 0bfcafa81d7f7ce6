package configwatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/config"
)

// Config files used by the tests.
const (
	original = `ports:
  - local_port: 80
    remote_port: 8080
provider:
  static:
    backends:
      - name: backend-1
        ip: 198.51.100.11
`
	// portsChanged differs from original under "ports" only.
	portsChanged = `ports:
  - local_port: 80
    remote_port: 8081
provider:
  static:
    backends:
      - name: backend-1
        ip: 198.51.100.11
`
	// twoKeysChanged differs under "ports" and "provider".
	twoKeysChanged = `ports:
  - local_port: 443
provider:
  static:
    backends:
      - name: backend-1
        ip: 198.51.100.11
      - name: backend-2
        ip: 198.51.100.12
`
	// invalid has an unknown field.
	invalid = original + "shutdown_timout: 5\n"
	// sameButReformatted is original written differently.
	sameButReformatted = "# reformatted\nports: [{local_port: 80, remote_port: 8080}]\nprovider: {static: {backends: [{name: backend-1, ip: 198.51.100.11}]}}\n"
)

// wait bounds every wait for the watcher; generous for noisy machines.
const wait = 20 * time.Second

type harness struct {
	t      *testing.T
	path   string
	hook   *logtest.Hook
	states chan State
	w      *Watcher
	seen   int // log entries already matched
}

// start writes original to a fresh xlb.yaml, loads it and runs a watcher
// on it until the test ends.
func start(t *testing.T) *harness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xlb.yaml")
	writeInPlace(t, path, original)
	return startAt(t, path)
}

func startAt(t *testing.T, path string) *harness {
	t.Helper()
	loaded, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	h := &harness{t: t, path: path, hook: hook, states: make(chan State, 16)}
	h.w = New(path, loaded, log, func(st State) { h.states <- st })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-h.w.ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(wait):
		t.Fatal("watch not in place")
	}
	return h
}

// next returns the next delivered state.
func (h *harness) next() State {
	h.t.Helper()
	select {
	case st := <-h.states:
		if st.Path != h.path {
			h.t.Errorf("state path %q, want %q", st.Path, h.path)
		}
		return st
	case <-time.After(wait):
		h.t.Fatalf("no state delivered within %v", wait)
	}
	return State{}
}

// logged requires exactly one new log entry since the last call, at level,
// whose message contains every want; it returns the entry.
func (h *harness) logged(level logrus.Level, want ...string) *logrus.Entry {
	h.t.Helper()
	entries := h.hook.AllEntries()
	if len(entries) != h.seen+1 {
		h.t.Fatalf("want one new log entry, got %d: %v", len(entries)-h.seen, entries[h.seen:])
	}
	e := entries[h.seen]
	h.seen++
	if e.Level != level {
		h.t.Errorf("log level %v, want %v: %q", e.Level, level, e.Message)
	}
	for _, s := range want {
		if !strings.Contains(e.Message, s) {
			h.t.Errorf("log %q lacks %q", e.Message, s)
		}
	}
	return e
}

func writeInPlace(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil { // O_TRUNC
		t.Fatal(err)
	}
}

// renameOver writes content to a temporary file beside path and renames it
// over path, as editors and config management do.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".xlb.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func wantReload(t *testing.T, st State, keys ...string) {
	t.Helper()
	if !st.ReloadRequired || !slices.Equal(st.ChangedKeys, keys) || st.Invalid != "" || st.Missing {
		t.Errorf("state %+v, want reload required with keys %v", st, keys)
	}
}

func wantClean(t *testing.T, st State) {
	t.Helper()
	if st.ReloadRequired || len(st.ChangedKeys) != 0 || st.Invalid != "" || st.Missing {
		t.Errorf("state %+v, want clean", st)
	}
}

func TestEditInPlace(t *testing.T) {
	h := start(t)
	writeInPlace(t, h.path, portsChanged)
	wantReload(t, h.next(), "ports")
	e := h.logged(logrus.WarnLevel, "xlb.yaml changed on disk (keys: ports)", "running instance keeps its loaded config", "`systemctl reload xlb` applies it")
	if got := e.Data["changed_keys"]; !slices.Equal(got.([]string), []string{"ports"}) {
		t.Errorf("changed_keys field %v", got)
	}
}

func TestRenameOver(t *testing.T) {
	h := start(t)
	renameOver(t, h.path, twoKeysChanged)
	wantReload(t, h.next(), "ports", "provider")
	h.logged(logrus.WarnLevel, "xlb.yaml changed on disk (keys: ports, provider)", "`systemctl reload xlb` applies it")
	// The watch survives the rename: a second replacement is seen too.
	renameOver(t, h.path, portsChanged)
	wantReload(t, h.next(), "ports")
	h.logged(logrus.WarnLevel, "(keys: ports)")
}

func TestRevertClears(t *testing.T) {
	h := start(t)
	writeInPlace(t, h.path, portsChanged)
	wantReload(t, h.next(), "ports")
	h.logged(logrus.WarnLevel, "changed on disk")
	// Written differently but equal in effect counts as reverted.
	renameOver(t, h.path, sameButReformatted)
	wantClean(t, h.next())
	h.logged(logrus.InfoLevel, "xlb.yaml matches the loaded config again; no reload required")
}

func TestDeleteAndRecreate(t *testing.T) {
	h := start(t)
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	st := h.next()
	if !st.Missing || st.ReloadRequired || st.Invalid != "" {
		t.Errorf("state %+v, want missing", st)
	}
	h.logged(logrus.WarnLevel, "xlb.yaml was deleted", "running instance keeps its loaded config")
	// Recreation is handled like any other change.
	writeInPlace(t, h.path, portsChanged)
	wantReload(t, h.next(), "ports")
	h.logged(logrus.WarnLevel, "(keys: ports)")
	writeInPlace(t, h.path, original)
	wantClean(t, h.next())
	h.logged(logrus.InfoLevel, "matches the loaded config again")
}

func TestInvalidIsNotReloadRequired(t *testing.T) {
	h := start(t)
	writeInPlace(t, h.path, invalid)
	st := h.next()
	if st.ReloadRequired || len(st.ChangedKeys) != 0 || st.Missing || !strings.Contains(st.Invalid, "shutdown_timout") {
		t.Errorf("state %+v, want invalid naming the unknown field", st)
	}
	e := h.logged(logrus.WarnLevel, "xlb.yaml on disk is invalid", "running instance keeps its loaded config")
	if msg, _ := e.Data["error"].(string); !strings.Contains(msg, "xlb.yaml:9") || !strings.Contains(msg, "shutdown_timout") {
		t.Errorf("error field %q lacks the file, line and field", msg)
	}
	// Fixed, but different from the loaded config: reload required.
	writeInPlace(t, h.path, portsChanged)
	wantReload(t, h.next(), "ports")
	h.logged(logrus.WarnLevel, "(keys: ports)")
}

// Identical events do not repeat the state or the log line: the next state
// delivered after rewriting the same content is the next distinct one.
func TestNoRepeats(t *testing.T) {
	h := start(t)
	writeInPlace(t, h.path, portsChanged)
	wantReload(t, h.next(), "ports")
	h.logged(logrus.WarnLevel, "(keys: ports)")
	for range 3 {
		writeInPlace(t, h.path, portsChanged)
		time.Sleep(2 * Debounce) // let each rewrite be checked on its own
	}
	renameOver(t, h.path, portsChanged)
	time.Sleep(2 * Debounce)
	writeInPlace(t, h.path, twoKeysChanged)
	wantReload(t, h.next(), "ports", "provider")
	h.logged(logrus.WarnLevel, "(keys: ports, provider)")
}

// A change made between loading the file and starting the watch is
// reported by the first check.
func TestChangeBeforeWatchStarted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xlb.yaml")
	writeInPlace(t, path, original)
	loaded, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	writeInPlace(t, path, portsChanged)
	states := make(chan State, 4)
	log, hook := logtest.NewNullLogger()
	w := New(path, loaded, log, func(st State) { states <- st })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case st := <-states:
		wantReload(t, st, "ports")
	case <-time.After(wait):
		t.Fatal("no state delivered")
	}
	if n := len(hook.AllEntries()); n != 1 {
		t.Errorf("%d log entries, want 1", n)
	}
}

// A Kubernetes ConfigMap mount: xlb.yaml -> ..data/xlb.yaml, ..data ->
// ..v1; an update writes ..v2 and swaps ..data by rename.
func TestConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mkVersion := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeInPlace(t, filepath.Join(dir, name, "xlb.yaml"), content)
	}
	mkVersion("..v1", original)
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/xlb.yaml", filepath.Join(dir, "xlb.yaml")); err != nil {
		t.Fatal(err)
	}
	h := startAt(t, filepath.Join(dir, "xlb.yaml"))
	mkVersion("..v2", portsChanged)
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	wantReload(t, h.next(), "ports")
	h.logged(logrus.WarnLevel, "xlb.yaml changed on disk (keys: ports)")
}

// TestServicesNamedInKeys (issue 29): with a services: list the changed
// keys name each service by its name, as a reload matches them: a key of
// a service both files have, a service only one has.
func TestServicesNamedInKeys(t *testing.T) {
	const services = `services:
  - name: web
    listen: {ip: 192.0.2.10}
    ports: [{local_port: 80, remote_port: 8080}]
    provider: {static: {backends: [{ip: 198.51.100.11}]}}
  - name: api
    listen: {ip: 192.0.2.11}
    ports: [{local_port: 443}]
    provider: {static: {backends: [{ip: 198.51.100.12}]}}
`
	path := filepath.Join(t.TempDir(), "xlb.yaml")
	writeInPlace(t, path, services)
	h := startAt(t, path)
	writeInPlace(t, path, strings.Replace(services, "remote_port: 8080", "remote_port: 8081", 1))
	wantReload(t, h.next(), "services[web].ports")
	h.logged(logrus.WarnLevel, "xlb.yaml changed on disk (keys: services[web].ports)")
	writeInPlace(t, path, strings.Replace(services, "name: api", "name: admin", 1)+"shutdown_timeout: 5\n")
	wantReload(t, h.next(), "services[admin]", "services[api]", "shutdown_timeout")
	h.logged(logrus.WarnLevel, "(keys: services[admin], services[api], shutdown_timeout)")
}
