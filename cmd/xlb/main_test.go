package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Package scripts run `/proc/$MAINPID/exe capabilities` on the running
// binary and reload only when a line reads exactly hot-upgrade; `xlb
// reload --pass-environment` hands the environment over only when a line
// reads reload-environment.
func TestCapabilities(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"capabilities"}, &out, &errs); code != 0 || out.String() != "hot-upgrade\nreload-environment\n" {
		t.Fatalf("xlb capabilities: exit %d, stdout %q, stderr %q", code, out.String(), errs.String())
	}
}

// mount-bpffs (the unit's ExecStartPre=) leaves config errors to the
// daemon's own start, which reports them with file and line.
func TestMountBPFFSLeavesConfigErrorsToTheStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xlb.yaml")
	if err := os.WriteFile(path, []byte("bogus: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"mount-bpffs", "--config", path}, &out, &errs); code != 0 || !strings.Contains(errs.String(), "nothing mounted") {
		t.Fatalf("xlb mount-bpffs with a broken config: exit %d, stderr %q", code, errs.String())
	}
}

// reload needs a pid; a stray argument is a usage error.
func TestReloadUsage(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"reload"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "no xlb process to reload") {
		t.Errorf("xlb reload without --pid: exit %d, stderr %q", code, errs.String())
	}
	if code := run([]string{"reload", "--pid", "1", "extra"}, &out, &errs); code != 2 {
		t.Errorf("xlb reload with a stray argument: exit %d", code)
	}
}
