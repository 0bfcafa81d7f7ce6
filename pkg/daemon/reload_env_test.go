package daemon

import (
	"os"
	"slices"
	"testing"
	"time"
)

// The successor gets the unit's current environment (what `xlb reload`
// ran with: a rotated password, a removed variable), but the running
// daemon's process variables (journal stream, notify socket, watchdog),
// never the reload command's own; only names of changed variables are
// reported (issue 28, item 6).
func TestSuccessorEnv(t *testing.T) {
	own := []string{
		"PATH=/usr/bin", "XLB_ADMIN_PASSWORD=old", "XLB_BGP_PASSWORD=bgp-old", "ARGS=", "GONE=1",
		"JOURNAL_STREAM=8:111", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_PID=100", "WATCHDOG_USEC=30000000",
		"INVOCATION_ID=aaa", "SYSTEMD_EXEC_PID=100",
	}
	fresh := []string{
		"PATH=/usr/bin", "XLB_ADMIN_PASSWORD=new", "XLB_BGP_PASSWORD=bgp-old", "ARGS=--log.level debug", "ADDED=x",
		"MAINPID=100", "JOURNAL_STREAM=8:222", "NOTIFY_SOCKET=/run/systemd/notify", "INVOCATION_ID=aaa",
		"SYSTEMD_EXEC_PID=200", "XLB_HANDOFF=0",
	}
	env, changed := successorEnv(own, fresh)
	want := []string{
		"PATH=/usr/bin", "XLB_ADMIN_PASSWORD=new", "XLB_BGP_PASSWORD=bgp-old", "ARGS=--log.level debug", "ADDED=x",
		"NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_PID=100", "WATCHDOG_USEC=30000000",
		"JOURNAL_STREAM=8:111", "SYSTEMD_EXEC_PID=100", "INVOCATION_ID=aaa", "XLB_HANDOFF=1",
	}
	if !slices.Equal(env, want) {
		t.Errorf("successor environment\n got %q\nwant %q", env, want)
	}
	if w := []string{"ADDED", "ARGS", "GONE", "XLB_ADMIN_PASSWORD"}; !slices.Equal(changed, w) {
		t.Errorf("changed %q, want %q", changed, w)
	}
}

// ARGS is spliced into the command line as systemd split it: the old
// words at the end replaced by the new ones; a command line that does not
// end with them is left alone.
func TestSuccessorArgs(t *testing.T) {
	for _, c := range []struct {
		args             []string
		oldARGS, newARGS string
		want             []string
		ok               bool
	}{
		{[]string{"--config", "/etc/xlb/xlb.yaml"}, "", "--log.level debug", []string{"--config", "/etc/xlb/xlb.yaml", "--log.level", "debug"}, true},
		{[]string{"--config", "/etc/xlb/xlb.yaml", "--log.level", "debug"}, "  --log.level   debug ", "--log.format=json", []string{"--config", "/etc/xlb/xlb.yaml", "--log.format=json"}, true},
		{[]string{"--config", "x", "--log.level", "debug"}, "--log.level debug", "", []string{"--config", "x"}, true},
		{[]string{"--config", "x", "--log.format", "a b"}, `--log.format "a b"`, `--log.format 'c d'`, []string{"--config", "x", "--log.format", "c d"}, true},
		{[]string{"--config", "x"}, "--log.level debug", "", []string{"--config", "x"}, false},
	} {
		got, ok := successorArgs(c.args, c.oldARGS, c.newARGS)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("successorArgs(%q, %q, %q) = %q, %v; want %q, %v", c.args, c.oldARGS, c.newARGS, got, ok, c.want, c.ok)
		}
	}
}

// splitARGS splits as systemd splits a lone $VAR word of an Exec line.
func TestSplitARGS(t *testing.T) {
	for in, want := range map[string][]string{
		"":                    nil,
		"   ":                 nil,
		"a  b\tc":             {"a", "b", "c"},
		`--x "a b" 'c d'e`:    {"--x", "a b", "c de"},
		`a\ b "q\"q" ''`:      {"a b", `q"q`, ""},
		`--flag="two words"`:  {"--flag=two words"},
		`unfinished "quote x`: {"unfinished", "quote x"},
	} {
		if got := splitARGS(in); !slices.Equal(got, want) {
			t.Errorf("splitARGS(%q) = %q, want %q", in, got, want)
		}
	}
}

// The environment `xlb reload` leaves for a process is private (0600),
// read once and removed.
func TestReloadEnvFile(t *testing.T) {
	pid := 1<<22 + 7 // no such process; the file is keyed by pid only
	if err := writeReloadEnv(pid, []string{"A=1", "B=two words"}); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(reloadEnvPath(pid))
	st, err := os.Stat(reloadEnvPath(pid))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("env file: %v, mode %v; want 0600", err, st.Mode())
	}
	env, ok, err := takeReloadEnv(pid)
	if err != nil || !ok || !slices.Equal(env, []string{"A=1", "B=two words"}) {
		t.Fatalf("takeReloadEnv = %q, %v, %v", env, ok, err)
	}
	if _, err := os.Stat(reloadEnvPath(pid)); !os.IsNotExist(err) {
		t.Errorf("the env file is left behind: %v", err)
	}
	if env, ok, err := takeReloadEnv(pid); ok || err != nil || env != nil {
		t.Errorf("second takeReloadEnv = %q, %v, %v; want nothing", env, ok, err)
	}
	// One a killed reload left long ago is not taken, but removed.
	if err := writeReloadEnv(pid, []string{"A=old"}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-reloadEnvMaxAge - time.Minute)
	if err := os.Chtimes(reloadEnvPath(pid), old, old); err != nil {
		t.Fatal(err)
	}
	if env, ok, err := takeReloadEnv(pid); ok || err != nil || env != nil {
		t.Errorf("takeReloadEnv of a stale file = %q, %v, %v; want nothing", env, ok, err)
	}
	if _, err := os.Stat(reloadEnvPath(pid)); !os.IsNotExist(err) {
		t.Errorf("the stale env file is left behind: %v", err)
	}
	// The environment left for a process that is gone is removed with the
	// stale results.
	if err := writeReloadEnv(pid, []string{"A=gone"}); err != nil {
		t.Fatal(err)
	}
	removeStaleResults()
	if _, err := os.Stat(reloadEnvPath(pid)); !os.IsNotExist(err) {
		t.Errorf("the env file of a gone process is left behind: %v", err)
	}
}
