package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/xlbproject/xlb/internal/testnet/loadgen"
	"github.com/xlbproject/xlb/test/lab"
)

// nginxStreamModule is nginx's stream proxy (Debian package
// libnginx-mod-stream).
const nginxStreamModule = "/usr/lib/nginx/modules/ngx_stream_module.so"

// proxyMaxConn is how many connections a proxy process accepts: what its
// descriptor limit (this process's, inherited) allows, two sockets per
// proxied connection and some room for everything else.
func proxyMaxConn(files int) int { return (files - 1024) / 2 }

// haproxyConfig is HAProxy in TCP mode, round robin over the backends,
// one process with a thread per CPU (its default).
func haproxyConfig(l *lab.Lab, files int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    maxconn %d\n\n", proxyMaxConn(files))
	fmt.Fprintf(&b, "defaults\n    mode tcp\n    maxconn %d\n    timeout connect 10s\n    timeout client 10m\n    timeout server 10m\n\n", proxyMaxConn(files))
	fmt.Fprintf(&b, "frontend bench\n    bind %s\n    default_backend servers\n\n", vip)
	b.WriteString("backend servers\n    balance roundrobin\n")
	for i, t := range backendTargets(l) {
		fmt.Fprintf(&b, "    server backend%d %s\n", i+1, t)
	}
	return b.String()
}

// nginxConfig is nginx's stream proxy, round robin over the backends, a
// worker per CPU.
func nginxConfig(l *lab.Lab, dir string, files int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "load_module %s;\n", nginxStreamModule)
	b.WriteString("daemon off;\nmaster_process on;\nworker_processes auto;\n")
	fmt.Fprintf(&b, "worker_rlimit_nofile %d;\npid %s;\nerror_log %s warn;\n", files, filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"))
	fmt.Fprintf(&b, "events {\n    worker_connections %d;\n}\n", 2*proxyMaxConn(files))
	b.WriteString("stream {\n    upstream servers {\n")
	for _, t := range backendTargets(l) {
		fmt.Fprintf(&b, "        server %s;\n", t)
	}
	fmt.Fprintf(&b, "    }\n    server {\n        listen %s backlog=4096;\n        proxy_pass servers;\n        proxy_timeout 10m;\n        proxy_half_close on;\n    }\n}\n", vip)
	return b.String()
}

func startHAProxy(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	return startProxy(e, l, "haproxy", haproxyConfig(l, e.files), func(dir, cfg string) []string {
		return []string{"haproxy", "-db", "-f", cfg}
	})
}

func startNginx(e *env, l *lab.Lab) ([]netip.AddrPort, func() error, error) {
	dir, err := os.MkdirTemp(e.tmp, "nginx-")
	if err != nil {
		return nil, nil, err
	}
	return startProxy(e, l, "nginx", nginxConfig(l, dir, e.files), func(_, cfg string) []string {
		return []string{"nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", cfg}
	})
}

// startProxy writes config into a directory of its own and runs the
// command argv(dir, config file) in the balancer namespace, its output
// going to a log saved with the results when it fails. The balancer
// namespace reuses its source ports toward the backends the way the
// clients do (loadgen.ReuseSourcePorts), so a proxy is not limited by
// Linux's default port range.
func startProxy(e *env, l *lab.Lab, name, config string, argv func(dir, cfg string) []string) ([]netip.AddrPort, func() error, error) {
	if err := loadgen.ReuseSourcePorts(l.XLB); err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(e.tmp, name+"-")
	if err != nil {
		return nil, nil, err
	}
	cfg := filepath.Join(dir, name+".conf")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(dir, "output.log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	args := argv(dir, cfg)
	cmd := l.XLB.Command(context.Background(), args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, nil, fmt.Errorf("%s (Debian package %s): %w", args[0], name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() error {
		err := stopProcess(cmd, done, 30*time.Second)
		out.Close()
		if err != nil {
			if b, rerr := os.ReadFile(logPath); rerr == nil {
				e.saveLog(name+"-"+l.Prefix+".log", string(b))
			}
		}
		return errors.Join(err, os.RemoveAll(dir))
	}
	select {
	case err := <-done:
		done <- err
		b, _ := os.ReadFile(logPath)
		return nil, nil, errors.Join(fmt.Errorf("%s exited at once (%v):\n%s", name, err, b), stop())
	case <-time.After(200 * time.Millisecond):
	}
	return []netip.AddrPort{vip}, stop, nil
}

// stopProcess ends cmd with SIGTERM (both proxies stop at once on it),
// then SIGKILL after timeout; done delivers cmd.Wait's result. A process
// killed by our SIGTERM is not an error.
func stopProcess(cmd *exec.Cmd, done chan error, timeout time.Duration) error {
	var err error
	select {
	case err = <-done: // it exited by itself: whatever it says is an error
		if err == nil {
			err = errors.New("exited before it was stopped")
		}
		return fmt.Errorf("%s: %w", cmd.Args, err)
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not stop within %v of SIGTERM", cmd.Args, timeout)
	}
}
