package pkgtest

import (
	"strings"
	"testing"
)

// TestDebScriptsBooted drives the .deb's maintainer scripts on a booted
// Debian (systemd as PID 1): ARGS reaches the daemon split into words;
// deb-systemd-invoke carries the upgrade's restart and the removal's stop,
// so a policy-rc.d answering 101 holds both back (and without it they
// happen); purge removes what the package installed and keeps the
// operator's own files in /etc/xlb.
func TestDebScriptsBooted(t *testing.T) {
	b := bootForScripts(t, "pkgtest-deb-scripts")
	const envFile, wants = "/etc/default/xlb", "/etc/systemd/system/multi-user.target.wants/xlb.service"

	out := b.sh("dpkg -i " + b.deb)
	if !strings.Contains(out, "not enabled and not started") {
		t.Errorf("install output:\n%s", out)
	}
	if st := b.state("is-enabled"); st != "disabled" {
		t.Errorf("after install: is-enabled %q, want disabled", st)
	}
	// deb-systemd-helper recorded the links an enable makes (for purge).
	if rec := b.sh("cat /var/lib/systemd/deb-systemd-helper-enabled/xlb.service.dsh-also"); !strings.Contains(rec, wants) {
		t.Errorf("deb-systemd-helper state lacks %s:\n%s", wants, rec)
	}

	t.Run("args", func(t *testing.T) {
		// Two flags in ARGS: split at the space, the second one's bad
		// value is the daemon's error. Unsplit, --log.format would get
		// the whole string.
		b.sh(`sed -i 's/^ARGS=.*/ARGS="--log.format=json --log.level=nonsense"/' ` + envFile)
		b.write("/run/systemd/system/xlb.service.d/no-restart.conf", "[Service]\nRestart=no\n", 0o644)
		b.sh("systemctl daemon-reload")
		if out, err := b.try("systemctl start xlb"); err == nil {
			t.Errorf("xlb started with --log.level=nonsense:\n%s", out)
		}
		j := b.sh("journalctl -u xlb --no-pager -o cat")
		if !strings.Contains(j, `--log.level: want debug, info, warn or error, got "nonsense"`) || strings.Contains(j, "--log.format: want") {
			t.Errorf("journal: want the daemon's --log.level error for ARGS' second word:\n%s", j)
		}
		b.sh(`sed -i 's/^ARGS=.*/ARGS=""/' ` + envFile + "; rm -r /run/systemd/system/xlb.service.d; systemctl daemon-reload; systemctl reset-failed xlb")
	})

	b.write("/etc/systemd/system/xlb.service.d/pkgtest.conf", standIn, 0o644)
	b.sh("systemctl daemon-reload; systemctl enable --now xlb")
	pid := b.mainPID()
	if pid == "0" || b.state("is-active") != "active" {
		t.Fatalf("the stand-in did not start: MainPID %s, %s", pid, b.state("is-active"))
	}

	t.Run("policy-rc.d-forbids-the-restart", func(t *testing.T) {
		b.write("/usr/sbin/policy-rc.d", policyDeny, 0o755)
		out := b.sh("dpkg -i " + b.deb) // a reinstall runs postinst configure OLD-VERSION
		if !strings.Contains(out, "policy-rc.d returned 101") || !strings.Contains(out, "policy-rc.d did not allow 'restart'") {
			t.Errorf("upgrade output: want deb-systemd-invoke's refusal and the script's notice:\n%s", out)
		}
		if now := b.mainPID(); now != pid {
			t.Errorf("MainPID %s, before %s: restarted although policy-rc.d forbids it", now, pid)
		}
	})

	t.Run("without-policy-the-upgrade-restarts", func(t *testing.T) {
		b.sh("rm /usr/sbin/policy-rc.d")
		out := b.sh("dpkg -i " + b.deb)
		if now := b.mainPID(); now == pid || now == "0" {
			t.Errorf("MainPID %s, before %s: the upgrade did not restart the unit:\n%s", now, pid, out)
		}
		if strings.Contains(out, "did not allow") {
			t.Errorf("upgrade output:\n%s", out)
		}
		pid = b.mainPID()
	})

	t.Run("policy-rc.d-forbids-the-stop", func(t *testing.T) {
		b.write("/usr/sbin/policy-rc.d", policyDeny, 0o755)
		out := b.sh("dpkg -r xlb")
		if st := b.state("is-active"); st != "active" || b.mainPID() != pid {
			t.Errorf("after dpkg -r under policy-rc.d 101: %s, MainPID %s (before %s); want still running:\n%s", st, b.mainPID(), pid, out)
		}
		// Disabling is not an action policy-rc.d governs.
		b.sh("test ! -L " + wants)
		b.sh("rm /usr/sbin/policy-rc.d; systemctl stop xlb")
	})

	t.Run("without-policy-remove-stops", func(t *testing.T) {
		b.sh("dpkg -i " + b.deb + "; systemctl enable --now xlb")
		out := b.sh("dpkg -r xlb")
		if st := b.state("is-active"); st == "active" {
			t.Errorf("after dpkg -r: still active:\n%s", out)
		}
		b.sh("test ! -L " + wants)
	})

	t.Run("purge-keeps-the-operators-files", func(t *testing.T) {
		b.sh("dpkg -i " + b.deb)
		b.sh("echo '# edited' >> /etc/xlb/xlb.yaml; echo 'basic_auth_users: {}' > /etc/xlb/web.yml; mkdir /etc/xlb/tls; echo cert > /etc/xlb/tls/xlb.crt")
		b.sh("systemctl enable xlb")
		out := b.sh("dpkg -P xlb")
		for _, gone := range []string{"/etc/xlb/xlb.yaml", envFile, wants, "/var/lib/systemd/deb-systemd-helper-enabled/xlb.service.dsh-also"} {
			if _, err := b.try("test ! -e " + gone + " && test ! -L " + gone); err != nil {
				t.Errorf("after purge %s is still there:\n%s", gone, out)
			}
		}
		if got := b.sh("cd /etc/xlb && find . -mindepth 1 | sort"); got != "./tls\n./tls/xlb.crt\n./web.yml\n" {
			t.Errorf("after purge /etc/xlb holds:\n%s\nwant the operator's web.yml and tls/ only", got)
		}
		// With nothing of the operator's left, purge removes /etc/xlb.
		b.sh("rm -r /etc/xlb/web.yml /etc/xlb/tls; dpkg -i " + b.deb + "; dpkg -P xlb; test ! -e /etc/xlb")
	})
}

// TestRPMScriptletsBooted: the rpm's %post applies the preset policy on a
// first install, as %systemd_post does (Fedora's and EL's "disable *"
// leaves xlb disabled; an "enable xlb.service" preset enables it), starts
// nothing, and %preun disables and stops on erase.
func TestRPMScriptletsBooted(t *testing.T) {
	need(t, "rpm")
	b := bootForScripts(t, "pkgtest-rpm-scripts")
	const presetDir, wants = "/etc/systemd/system-preset", "/etc/systemd/system/multi-user.target.wants/xlb.service"

	b.sh("mkdir -p " + presetDir + "; echo 'disable *' > " + presetDir + "/99-default-disable.preset")
	out := b.sh("rpm -i --nodeps " + b.rpm)
	if st := b.state("is-enabled"); st != "disabled" || !strings.Contains(out, "not enabled and not started") {
		t.Errorf("rpm -i under 'disable *': is-enabled %q:\n%s", st, out)
	}
	b.sh("rpm -e xlb")

	b.sh("echo 'enable xlb.service' > " + presetDir + "/50-xlb.preset")
	out = b.sh("rpm -i --nodeps " + b.rpm)
	if st := b.state("is-enabled"); st != "enabled" || !strings.Contains(out, "enabled by the system's preset policy, not started") {
		t.Errorf("rpm -i under 'enable xlb.service': is-enabled %q:\n%s", st, out)
	}
	if st := b.state("is-active"); st != "inactive" {
		t.Errorf("rpm -i started xlb: %s", st)
	}
	b.write("/etc/systemd/system/xlb.service.d/pkgtest.conf", standIn, 0o644)
	b.sh("systemctl daemon-reload; systemctl start xlb")
	out = b.sh("rpm -e xlb")
	if st := b.state("is-active"); st == "active" {
		t.Errorf("rpm -e left xlb running:\n%s", out)
	}
	b.sh("test ! -L " + wants)
	b.sh("test ! -e /usr/share/doc/xlb && test ! -e /usr/share/xlb")
}
