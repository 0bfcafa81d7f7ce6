package hostlab

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/envfile"
)

// maxExposure is the packaged unit's `systemd-analyze security` exposure
// when issue 16 was filed (2.2 on Debian bookworm's systemd); it must not
// grow.
const maxExposure = 2.2

// orphanWarning is the warning a config with orphan_ttl_secs: 100 makes
// the daemon log at its start.
const orphanWarning = "orphan_ttl_secs: 100 is below the minimum of 300 seconds; using 300"

// TestJournalPriorities installs the package on a booted Debian and reads
// the daemon's log back from the journal by priority (issue 16 item 3):
// `journalctl -u xlb -p warning` shows the daemon's warnings and not its
// info lines, in logfmt and in JSON; a config failure with several errors
// is one journal entry per error at priority err. On the way it checks the
// unit's exposure (at most 2.2), that pkg/envfile reads environment files
// as this systemd does, and that `xlb check --env-file /etc/default/xlb`
// fails on admin.auth without a password (item 1).
func TestJournalPriorities(t *testing.T) {
	setup(t)
	h := bootHost(t, "journal")
	step := h.step

	step("install", func(t *testing.T) {
		h.sh("apt-get", "install", "-y", "--no-install-recommends", debIn(0))
	})

	exposure(t, h)

	step("env-file-read-as-systemd-reads-it", func(t *testing.T) {
		const text = "# comment\n; comment\nPLAIN=v1\n  SPACED  =  a b  \nDQ=\"q\\\"b\\\\s\\$d\\x e \"\nSQ='p\"a\\ss '\nUNQ=a\\\"b\\\\c\nJOIN=\"a\" 'b c'd\nCONT=one\\\ntwo\nINNER=a\"b c\"'d'\nEMPTY=\nREPEAT=1\nREPEAT=2\n"
		h.write("/root/cases.env", text, 0o600)
		h.sh("systemd-run", "--wait", "--quiet", "--collect", "-p", "EnvironmentFile=/root/cases.env",
			"-p", "StandardOutput=file:/root/cases.out", "/usr/bin/env", "-0")
		got := map[string]string{}
		for _, kv := range strings.Split(h.sh("cat", "/root/cases.out"), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				got[k] = v
			}
		}
		f := envfile.Parse(text)
		for _, v := range f.Vars {
			want, _, _ := f.Lookup(v.Name)
			if got[v.Name] != want {
				t.Errorf("%s: systemd reads %q, pkg/envfile %q", v.Name, got[v.Name], want)
			}
		}
		if len(f.Vars) != 11 || len(f.Ignored) != 0 {
			t.Errorf("pkg/envfile: %d assignments, ignored %v; want 11, none", len(f.Vars), f.Ignored)
		}
	})

	h.configure()
	config := labConfig(h.l)

	step("check-env-file", func(t *testing.T) {
		// labConfig has an admin: block (its port); the auth goes into it.
		auth := strings.Replace(config, "admin:\n", "admin:\n  auth:\n    username: ops\n", 1)
		if auth == config {
			t.Fatalf("the lab's config has no admin: block:\n%s", config)
		}
		h.write("/root/auth.yaml", auth, 0o644)
		out, err := h.try("xlb", "check", "--env-file", "/etc/default/xlb", "/root/auth.yaml")
		if err == nil || !strings.Contains(out, "/etc/default/xlb: XLB_ADMIN_PASSWORD is not set, but /root/auth.yaml sets admin.auth.username \"ops\", so xlb would refuse to start") {
			t.Errorf("xlb check --env-file with auth and the packaged env file: %v\n%s", err, out)
		}
		h.write("/root/xlb.env", "XLB_ADMIN_PASSWORD='it'\"'\"'s \\ \"quoted\"'\n", 0o600)
		if out, err := h.try("xlb", "check", "--env-file", "/etc/default/xlb", "--env-file", "/root/xlb.env", "/root/auth.yaml"); err != nil {
			t.Errorf("xlb check with a password: %v\n%s", err, out)
		}
	})

	step("warning-at-priority-warning", func(t *testing.T) {
		h.write("/etc/xlb/xlb.yaml", config+"orphan_ttl_secs: 100\n", 0o644)
		h.sh("systemctl", "start", "xlb")
		warnings := h.sh("journalctl", "--no-pager", "-o", "cat", "-u", "xlb", "-p", "warning")
		if !strings.Contains(warnings, orphanWarning) || !strings.Contains(warnings, "level=warning") {
			t.Errorf("journalctl -u xlb -p warning lacks the warning %q:\n%s", orphanWarning, warnings)
		}
		if strings.Contains(warnings, "starting xlb") {
			t.Errorf("journalctl -u xlb -p warning shows info lines:\n%s", warnings)
		}
		all := h.sh("journalctl", "--no-pager", "-o", "cat", "-u", "xlb", "-p", "info")
		if !strings.Contains(all, `msg="starting xlb"`) {
			t.Errorf("journalctl -u xlb -p info lacks the start line:\n%s", all)
		}
		for _, line := range strings.Split(all, "\n") {
			if strings.HasPrefix(line, "<") || strings.HasPrefix(line, "time=") {
				t.Errorf("journal line keeps its priority prefix or a timestamp: %q", line)
			}
		}
		t.Logf("journalctl -u xlb -p warning:\n%s", warnings)
	})

	step("json-at-priority-warning", func(t *testing.T) {
		h.write("/run/systemd/system/xlb.service.d/json.conf",
			"[Service]\nExecStart=\nExecStart=/usr/bin/xlb --config /etc/xlb/xlb.yaml --log.format=json\n", 0o644)
		h.sh("systemctl", "daemon-reload")
		h.sh("systemctl", "restart", "xlb")
		// This process's entries (_PID): an --after-cursor query missed the
		// first lines of a restarted stream.
		out := h.sh("journalctl", "--no-pager", "-o", "cat", "-u", "xlb", "-p", "warning", fmt.Sprintf("_PID=%d", h.mainPID()))
		found := false
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var rec map[string]any
			if !strings.HasPrefix(line, "{") {
				continue
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("not JSON: %q: %v", line, err)
				continue
			}
			if rec["level"] == "info" {
				t.Errorf("an info record at priority warning: %q", line)
			}
			msg, _ := rec["msg"].(string)
			found = found || strings.HasSuffix(msg, orphanWarning) && rec["level"] == "warning"
		}
		if !found {
			t.Errorf("no JSON warning record %q in journalctl -p warning:\n%s\nthe unit's journal:\n%s", orphanWarning, out, h.journal(""))
		}
		h.sh("rm", "/run/systemd/system/xlb.service.d/json.conf")
		h.sh("systemctl", "daemon-reload")
	})

	step("multi-line-error-as-entries", func(t *testing.T) {
		h.sh("systemctl", "stop", "xlb")
		h.write("/run/systemd/system/xlb.service.d/no-restart.conf", "[Service]\nRestart=no\n", 0o644)
		h.sh("systemctl", "daemon-reload")
		bad := strings.Replace(config, "local_port: 80", "local_port: 65536", 1) + "flow_table_typo: 1\n"
		h.write("/etc/xlb/xlb.yaml", bad, 0o644)
		if out, err := h.try("systemctl", "start", "xlb"); err == nil {
			t.Fatalf("xlb started with a broken config:\n%s", out)
		}
		// The unit's only failed start (Restart=no): "xlb failed" appears
		// in this step alone.
		errs := h.sh("journalctl", "--no-pager", "-o", "cat", "-u", "xlb", "-p", "err")
		var daemon []string
		for _, line := range strings.Split(errs, "\n") {
			if strings.Contains(line, `msg="xlb failed"`) {
				daemon = append(daemon, line)
			}
			if strings.Contains(line, `\n`) {
				t.Errorf("a literal \\n in the journal: %q", line)
			}
		}
		if len(daemon) != 2 || !strings.Contains(daemon[0], "ports[0].local_port: must be between 1 and 65535, got 65536") ||
			!strings.Contains(daemon[1], `unknown field \"flow_table_typo\"`) {
			t.Errorf("want two entries at priority err, one per config error; journalctl -p err:\n%s", errs)
		}
		h.sh("rm", "-r", "/run/systemd/system/xlb.service.d")
		h.sh("systemctl", "daemon-reload")
		h.sh("systemctl", "reset-failed", "xlb")
	})
}

// exposure checks the packaged unit's systemd-analyze security exposure
// (at most maxExposure) as a subtest of its own: the journal steps do not
// depend on it. Over the bound it lists the settings that cost exposure.
func exposure(t *testing.T, h *host) {
	t.Run("security-exposure", func(st *testing.T) {
		h.t = st
		defer func() { h.t = t }()
		got := h.exposure("xlb.service")
		st.Logf("systemd-analyze security xlb.service: %.1f (at most %.1f)", got, maxExposure)
		if got <= maxExposure {
			return
		}
		var costs []string
		for _, line := range strings.Split(h.sh("systemd-analyze", "security", "--no-pager", "xlb.service"), "\n") {
			if strings.HasPrefix(line, "✗") {
				costs = append(costs, strings.Join(strings.Fields(line), " "))
			}
		}
		st.Errorf("exposure %.1f, want at most %.1f; what costs exposure:\n%s", got, maxExposure, strings.Join(costs, "\n"))
	})
}
