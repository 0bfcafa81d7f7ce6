// Package xlbproc runs the real xlb daemon binary inside a test namespace
// (a testnet.Host, e.g. a lab's XLB host) for end-to-end tests and the
// demo: build it, write its config, start it, wait until it balances, stop
// it with a signal and collect its log.
package xlbproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// daemonPackage is the import path of the xlb daemon.
const daemonPackage = "github.com/xlbproject/xlb/cmd/xlb"

// Build compiles cmd/xlb into dir and returns the binary's path; the
// caller's working directory must be inside this module (as it is for
// `go test`). XLB_BINARY, when set, is used instead.
func Build(dir string) (string, error) {
	if p := os.Getenv("XLB_BINARY"); p != "" {
		return filepath.Abs(p)
	}
	out := filepath.Join(dir, "xlb")
	if b, err := exec.Command("go", "build", "-o", out, daemonPackage).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", daemonPackage, err, b)
	}
	return out, nil
}

// Proc is a running xlb daemon.
type Proc struct {
	Cmd    *exec.Cmd
	Config string // path of the config file
	log    *syncBuffer
	// exited is done once the process has exited; err is then cmd.Wait's
	// result.
	exited context.Context
	err    error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	tee *os.File
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tee != nil {
		b.tee.Write(p)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
func Start(host *testnet.Host, binary, dir, config string, o Options) (*Proc, error) {
	path := filepath.Join(dir, "xlb.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return nil, err
	}
	args := append([]string{"--config", path}, o.Args...)
	cmd := host.Command(context.Background(), binary, args...)
	exited, markExited := context.WithCancel(context.Background())
	p := &Proc{Cmd: cmd, Config: path, log: &syncBuffer{tee: o.Tee}, exited: exited}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.Env = append(os.Environ(), o.Env...)
	if err := cmd.Start(); err != nil {
		markExited()
		return nil, fmt.Errorf("start xlb: %w", err)
	}
	go func() { p.err = cmd.Wait(); markExited() }()
	return p, nil
}

// Log returns everything the daemon wrote so far.
func (p *Proc) Log() string { return p.log.String() }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool { return p.exited.Err() != nil }

// WaitLog polls the log until it contains s, the process exits, or timeout.
func (p *Proc) WaitLog(s string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(p.Log(), s) {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("xlb exited (%v) before logging %q:\n%s", p.err, s, p.Log())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("xlb did not log %q within %s:\n%s", s, timeout, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Signal sends sig to the daemon.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns its exit
// code; on timeout the process is killed and an error returned.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.exited.Done():
	case <-time.After(timeout):
		p.Cmd.Process.Kill()
		<-p.exited.Done()
		return -1, fmt.Errorf("xlb did not exit within %s:\n%s", timeout, p.Log())
	}
	return p.Cmd.ProcessState.ExitCode(), nil
}

// Stop sends SIGTERM and waits for the exit code.
func (p *Proc) Stop(timeout time.Duration) (int, error) {
	if p.Exited() {
		return p.Cmd.ProcessState.ExitCode(), nil
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return -1, err
	}
	return p.Wait(timeout)
}

// Kill kills the process if it still runs (cleanup after a failed test).
func (p *Proc) Kill() {
	if !p.Exited() {
		p.Cmd.Process.Kill()
		<-p.exited.Done()
	}
}
