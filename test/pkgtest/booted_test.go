package pkgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/hostlab"
)

// booted is a Debian container with systemd as PID 1 (test/hostlab's
// cached root filesystem) and the built packages in /var/tmp/xlb-pkgtest.
type booted struct {
	t   *testing.T
	c   *hostlab.Container
	deb string
	rpm string
}

// bootForScripts boots the container (root, systemd-nspawn and the host
// lab's root filesystem, built by debootstrap on first use: `make
// hostlab-rootfs`). It has a private network namespace with only lo: the
// scripts' tests never run the data path.
func bootForScripts(t *testing.T, name string) *booted {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (systemd-nspawn); run the package tests as root")
	}
	need(t, "systemd-nspawn", "debootstrap")
	p := packages(t)
	rootfs, _, err := hostlab.EnsureRootfs(hostlab.CacheDir(), hostlab.DefaultSpec(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	const dir = "/var/tmp/xlb-pkgtest"
	files := map[string][]byte{}
	for _, f := range []string{p.Deb, p.RPM} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Join(dir, filepath.Base(f))] = b
	}
	c, err := hostlab.Boot(hostlab.Options{Rootfs: rootfs, Name: name, Files: files}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing container %s: %v", name, err)
		}
	})
	return &booted{t: t, c: c, deb: filepath.Join(dir, filepath.Base(p.Deb)), rpm: filepath.Join(dir, filepath.Base(p.RPM))}
}

// sh runs a shell script in the container; it must succeed.
func (b *booted) sh(script string) string {
	b.t.Helper()
	out, err := b.try(script)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return out
}

// try runs a shell script in the container and returns its output and error.
func (b *booted) try(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return b.c.Exec(ctx, nil, "sh", "-c", script)
}

func (b *booted) write(path, content string, mode os.FileMode) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.c.WriteFile(ctx, path, []byte(content), mode); err != nil {
		b.t.Fatal(err)
	}
}

func (b *booted) mainPID() string {
	b.t.Helper()
	return strings.TrimSpace(b.sh("systemctl show --property=MainPID --value xlb.service"))
}

func (b *booted) state(what string) string {
	out, _ := b.try("systemctl " + what + " xlb.service")
	return strings.TrimSpace(out)
}

// stand-in replaces xlb.service's processes with a sleep (a drop-in): the
// scripts' decisions depend on whether the unit runs, not on what runs,
// and XDP needs an interface this container lacks. The binary of a sleep
// does not know "capabilities", so an upgrade takes the restart path.
const standIn = `[Service]
Type=simple
ExecStartPre=
ExecStart=
ExecStart=/bin/sleep infinity
ExecReload=
WatchdogSec=0
`

// policyDeny is a policy-rc.d that forbids every action, as in image
// builds and on hosts where an operator holds back service restarts.
const policyDeny = "#!/bin/sh\nexit 101\n"
