// Package xlbproc runs the real xlb daemon binary inside a test namespace
// (a testnet.Host, e.g. a lab's XLB host) for end-to-end tests and the
// demo: build it, write its config, start it, wait until it balances,
// follow it across hot-upgrade hand-offs (SIGUSR2), stop it with a signal
// and collect its log.
package xlbproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// daemonPackage is the import path of the xlb daemon; versionVar is the
// variable -ldflags -X sets to the release version.
const (
	daemonPackage = "github.com/xlbproject/xlb/cmd/xlb"
	versionVar    = "github.com/xlbproject/xlb/pkg/buildinfo.Version"
)

// Build compiles cmd/xlb into dir and returns the binary's path; the
// caller's working directory must be inside this module (as it is for
// `go test`). XLB_BINARY, when set, is used instead.
func Build(dir string) (string, error) {
	if p := os.Getenv("XLB_BINARY"); p != "" {
		return filepath.Abs(p)
	}
	return build(filepath.Join(dir, "xlb"))
}

// BuildVersion compiles cmd/xlb into dir/name with buildinfo.Version set
// to version (what the status API reports as "version"), whatever
// XLB_BINARY says: hand-off tests need two builds that tell themselves
// apart. The working directory must be inside this module.
func BuildVersion(dir, name, version string) (string, error) {
	return build(filepath.Join(dir, name), "-ldflags", "-X "+versionVar+"="+version)
}

func build(out string, flags ...string) (string, error) {
	args := append(append([]string{"build"}, flags...), "-o", out, daemonPackage)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// Options for Start.
type Options struct {
	// Tee copies the daemon's log to this file as it runs (e.g. os.Stderr).
	Tee *os.File
	// Args are extra command-line arguments.
	Args []string
	// Env adds environment variables.
	Env []string
}

// Start writes config into dir and starts binary inside host's namespace.
// The daemon's stdout and stderr go to one pipe that successors inherit,
// so Log continues across hand-offs.
func Start(host *testnet.Host, binary, dir, config string, o Options) (*Proc, error) {
	path := filepath.Join(dir, "xlb.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"--config", path}, o.Args...)
	cmd := host.Command(context.Background(), binary, args...)
	cmd.Env = append(os.Environ(), o.Env...)
	p, err := startCmd(cmd, path, o.Tee)
	if err != nil {
		return nil, fmt.Errorf("start xlb: %w", err)
	}
	return p, nil
}

// startCmd starts cmd with its stdout and stderr on one pipe that
// successors inherit, and follows it.
func startCmd(cmd *exec.Cmd, config string, tee *os.File) (*Proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// An *os.File, not a Writer: exec hands the descriptor over instead of
	// copying, so Cmd.Wait does not wait for the successors that inherit it.
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	p := newProc(cmd, config, tee)
	go p.copyLog(r)
	go p.follow()
	return p, nil
}

// WaitLog polls the log until it contains s, the daemon (the last owner)
// exits, or timeout.
func (p *Proc) WaitLog(s string, timeout time.Duration) error {
	return p.WaitLogCount(s, 1, timeout)
}

// WaitLogCount polls the log until s occurs at least n times, the daemon
// (the last owner) exits, or timeout.
func (p *Proc) WaitLogCount(s string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.Count(s) >= n {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("xlb exited (%v) before logging %q %d times:\n%s", p.exitErr(), s, n, p.Log())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("xlb did not log %q %d times within %s:\n%s", s, n, timeout, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Count returns how often s occurs in the log so far.
func (p *Proc) Count(s string) int { return strings.Count(p.Log(), s) }

// Signal sends sig to the current owner.
func (p *Proc) Signal(sig syscall.Signal) error { return p.owner().Signal(sig) }

// Wait waits up to timeout for the daemon to exit (the last owner, after
// any hand-offs) and returns its exit code (-1 when killed by a signal);
// on timeout the current owner is killed and an error returned.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.owner().Kill()
		<-p.exited
		return -1, fmt.Errorf("xlb did not exit within %s:\n%s", timeout, p.Log())
	}
	return p.code, nil
}

// Stop sends SIGTERM to the current owner and waits for the exit code.
func (p *Proc) Stop(timeout time.Duration) (int, error) {
	if p.Exited() {
		return p.code, nil
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return -1, err
	}
	return p.Wait(timeout)
}

// Kill kills the current owner if it still runs, then every successor an
// owner started that still runs (cleanup after a failed test; a hand-off
// may have been under way).
func (p *Proc) Kill() {
	if !p.Exited() {
		p.owner().Kill()
		<-p.exited
	}
	for _, c := range p.candidateList() {
		if c.Signal(syscall.Signal(0)) == nil {
			c.Kill()
			c.Wait()
		}
	}
}
