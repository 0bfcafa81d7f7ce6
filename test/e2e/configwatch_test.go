package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// Editing, replacing or deleting xlb.yaml never changes the running
// instance: XLB logs one warning naming the changed keys and saying that
// `systemctl reload xlb` applies them, and the status API shows it
// until the file is reverted. An invalid file is reported as
// invalid, not as reload-required.
func TestConfigWatch(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	orig := labConfig(l, "")
	p := startXLB(t, l, orig)
	path := p.Config

	waitConfig := func(what string, ok func(c api.Config) bool) api.Config {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			c := statusDoc(t, l).Config
			if ok(c) {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status config stayed %+v", what, c)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	clean := func(c api.Config) bool { return !c.ReloadRequired && c.Invalid == "" && !c.Missing }

	// edit in place: a new port mapping
	edited := strings.Replace(orig, "ports:\n", "ports:\n  - local_port: 81\n    remote_port: 8080\n", 1)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	c := waitConfig("edit in place", func(c api.Config) bool { return c.ReloadRequired })
	if !slices.Equal(c.ChangedKeys, []string{"ports"}) {
		t.Fatalf("changed keys %v, want [ports]", c.ChangedKeys)
	}
	if err := p.WaitLog("keys: ports", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitLog("`systemctl reload xlb` applies it", time.Second); err != nil {
		t.Fatal(err)
	}
	// the running instance did not change: 80 is balanced, 81 is not
	if err := echoThrough(l.Client(), rand.New(rand.NewPCG(1, 1)), 100); err != nil {
		t.Fatalf("port 80 after the edit: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := l.Client().Dial(ctx, "192.0.2.10:81")
	cancel()
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("port 81 after the edit: %v, want ECONNREFUSED from the host stack", err)
	}

	// revert
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	waitConfig("revert", clean)

	// rename-over, as editors and config management do
	tmp := filepath.Join(filepath.Dir(path), ".xlb.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(strings.Replace(orig, "name: e2e", "name: renamed", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	c = waitConfig("rename-over", func(c api.Config) bool { return c.ReloadRequired })
	if !slices.Equal(c.ChangedKeys, []string{"name"}) {
		t.Fatalf("changed keys %v, want [name]", c.ChangedKeys)
	}

	// an invalid file is invalid, not reload-required
	if err := os.WriteFile(path, []byte(orig+"bogus_field: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c = waitConfig("invalid", func(c api.Config) bool { return c.Invalid != "" })
	if c.ReloadRequired || !strings.Contains(c.Invalid, "bogus_field") {
		t.Fatalf("invalid file reported as %+v", c)
	}

	// delete
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitConfig("delete", func(c api.Config) bool { return c.Missing })
	if err := p.WaitLog("xlb running", time.Second); err != nil || p.Exited() {
		t.Fatal("the daemon must keep running without its config file")
	}

	// and back to the original
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	waitConfig("restore", clean)
	stopXLB(t, l, p)
}
