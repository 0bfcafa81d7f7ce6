package hostlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// What a container needs so that XLB inside it can load and attach XDP
// (measured on kernel 6.18 with systemd-nspawn 252; see the package doc):
const (
	// XDPCapabilities are added to nspawn's default set. CAP_NET_ADMIN:
	// XDP attach, neighbours, net sysctls (nspawn grants it only for its
	// own private networks, not for --network-namespace-path). CAP_BPF:
	// bpf(). CAP_PERFMON is not needed (XLB loads XDP programs only).
	XDPCapabilities = "CAP_NET_ADMIN,CAP_BPF"
	// XDPSystemCalls are allowed in addition to nspawn's seccomp filter,
	// which returns EPERM for bpf() otherwise.
	XDPSystemCalls = "bpf"
	// apiVFSWritable makes nspawn leave /proc/sys/net writable (the daemon
	// writes ip_local_reserved_ports and conf/lo/forwarding); the rest of
	// /proc/sys stays read-only.
	apiVFSWritable = "SYSTEMD_NSPAWN_API_VFS_WRITABLE=network"
)

// RunDirBase is where per-container directories (overlay upper layer,
// console log) are created.
const RunDirBase = "/var/tmp"

const runDirPrefix = "xlb-hostlab-"

// Options describe one container.
type Options struct {
	// Rootfs is the lower layer (EnsureRootfs); it is never written:
	// changes go to an overlay upper layer that Close removes.
	Rootfs string
	// Name is the machine name and hostname: [a-z0-9-], at most 40
	// characters, unique among running containers.
	Name string
	// NetnsPath is a network namespace for the container
	// (/run/netns/NAME), e.g. a lab host's Path. Empty: a private network
	// namespace with only lo (nspawn --private-network).
	NetnsPath string
	// Files are written into the upper layer before start (container path
	// → content, mode 0644; directories are created).
	Files map[string][]byte
}

// Container is a running (booted) or finished container.
type Container struct {
	Name string
	PID1 int // the container's init, as seen from the host (booted only)

	opts    Options
	dir     string // RunDirBase/xlb-hostlab-NAME-XXXX
	upper   string
	cgroups []string
	cmd     *exec.Cmd
	console string // file with nspawn's output (the container's console)
	done    chan struct{}
	waitErr error

	closeOnce sync.Once
	closeErr  error
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// prepare creates the run directory, upper layer and cgroups.
func prepare(o Options) (*Container, error) {
	if !nameRE.MatchString(o.Name) {
		return nil, fmt.Errorf("hostlab: container name %q: want [a-z0-9-], at most 40 characters", o.Name)
	}
	if o.Rootfs == "" {
		return nil, errors.New("hostlab: no root filesystem")
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		return nil, errors.New("hostlab: systemd-nspawn not installed (Debian package systemd-container; run `make deps`)")
	}
	dir, err := os.MkdirTemp(RunDirBase, runDirPrefix+o.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("hostlab: %w", err)
	}
	c := &Container{Name: o.Name, opts: o, dir: dir, upper: filepath.Join(dir, "upper"), console: filepath.Join(dir, "console.log"), done: make(chan struct{})}
	// Who owns this directory: CleanupStale leaves it alone while this
	// process lives.
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(processID(os.Getpid())+"\n"), 0o644); err != nil {
		c.cleanup()
		return nil, fmt.Errorf("hostlab: %w", err)
	}
	if err := os.Mkdir(c.upper, 0o755); err != nil {
		c.cleanup()
		return nil, fmt.Errorf("hostlab: %w", err)
	}
	for path, content := range o.Files {
		p := filepath.Join(c.upper, filepath.Clean("/"+path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, content, 0o644)
		}
		if err != nil {
			c.cleanup()
			return nil, fmt.Errorf("hostlab: %w", err)
		}
	}
	if err := c.makeCgroups(); err != nil {
		c.cleanup()
		return nil, err
	}
	if err := mountBPFFS(bpffsOf(dir)); err != nil {
		c.cleanup()
		return nil, err
	}
	return c, nil
}

// cgroupRoots are the hierarchies in which nspawn --keep-unit creates its
// "payload" and "supervisor" groups, below the cgroup of the nspawn process.
func cgroupRoots() []string {
	var roots []string
	for _, d := range []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			roots = append(roots, d)
		}
	}
	if len(roots) == 0 {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
			roots = append(roots, "/sys/fs/cgroup")
		}
	}
	return roots
}

// makeCgroups creates one cgroup per hierarchy for this container's nspawn
// process, so that the groups nspawn leaves behind are ours to remove and
// two containers never share them.
func (c *Container) makeCgroups() error {
	for _, root := range cgroupRoots() {
		g := filepath.Join(root, filepath.Base(c.dir))
		if err := os.Mkdir(g, 0o755); err != nil {
			return fmt.Errorf("hostlab: cgroup: %w", err)
		}
		c.cgroups = append(c.cgroups, g)
	}
	return nil
}

// nspawnArgs are the systemd-nspawn arguments for o (without the command).
func (c *Container) nspawnArgs(boot bool) []string {
	args := []string{
		"--quiet",
		"--directory=" + c.opts.Rootfs,
		"--overlay=" + c.opts.Rootfs + ":" + c.upper + ":/",
		"--machine=" + c.Name,
		"--register=no", "--keep-unit",
		"--link-journal=no", "--resolv-conf=off", "--timezone=off",
		"--capability=" + XDPCapabilities,
		"--system-call-filter=" + XDPSystemCalls,
		// A bpffs of this container's own (mounted by prepare) where XLB
		// pins its maps and links: parallel containers never share pins.
		"--bind=" + bpffsOf(c.dir) + ":" + containerBPFFS,
	}
	if c.opts.NetnsPath != "" {
		args = append(args, "--network-namespace-path="+c.opts.NetnsPath)
	} else {
		args = append(args, "--private-network")
	}
	if boot {
		args = append(args, "--boot", "--console=read-only")
	} else {
		args = append(args, "--as-pid2", "--console=pipe")
	}
	return args
}

// start runs systemd-nspawn with args, its process placed in c's cgroups
// first (a shell writes its own pid, then execs nspawn).
func (c *Container) start(args []string) error {
	script := ""
	for i := range c.cgroups {
		script += fmt.Sprintf(`echo $$ > "$%d/cgroup.procs" && `, i+1)
	}
	script += fmt.Sprintf(`shift %d && exec systemd-nspawn "$@"`, len(c.cgroups))
	argv := append([]string{"-c", script, "sh"}, c.cgroups...)
	argv = append(argv, args...)
	c.cmd = exec.Command("/bin/sh", argv...)
	c.cmd.Env = append(os.Environ(), apiVFSWritable)
	// The console goes to a file, not a pipe: nspawn must be able to
	// shut the container down even if this process is gone.
	console, err := os.OpenFile(c.console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("hostlab: %w", err)
	}
	defer console.Close()
	c.cmd.Stdout, c.cmd.Stderr = console, console
	// Its own process group: a terminal's ^C reaches the test, which
	// stops the container in order.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("hostlab: start systemd-nspawn: %w", err)
	}
	os.WriteFile(filepath.Join(c.dir, "nspawn"), []byte(processID(c.cmd.Process.Pid)+"\n"), 0o644)
	go func() { c.waitErr = c.cmd.Wait(); close(c.done) }()
	return nil
}

func (c *Container) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Boot starts the container with systemd as PID 1 and waits (up to
// timeout) until `systemctl is-system-running` says running or degraded.
// On error nothing is left behind.
func Boot(o Options, timeout time.Duration) (*Container, error) {
	c, err := prepare(o)
	if err != nil {
		return nil, err
	}
	if err := c.start(c.nspawnArgs(true)); err != nil {
		return nil, errors.Join(err, c.cleanup())
	}
	if err := c.waitBooted(timeout); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *Container) waitBooted(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	state := ""
	for time.Now().Before(deadline) {
		if c.exited() {
			return fmt.Errorf("hostlab: systemd-nspawn exited (%v) during boot:\n%s", c.waitErr, tail(c.Console(), 30))
		}
		if c.PID1 == 0 {
			c.PID1 = containerInit(c.cmd.Process.Pid)
		}
		if c.PID1 != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out, _ := c.Exec(ctx, nil, "systemctl", "is-system-running")
			cancel()
			state = strings.TrimSpace(out)
			if state == "running" || state == "degraded" {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("hostlab: container %s not booted within %v (state %q):\n%s", c.Name, timeout, state, tail(c.Console(), 30))
}

// containerInit returns the child of the nspawn process that runs in
// another PID namespace (the container's init), or 0.
func containerInit(nspawn int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", nspawn))
	self, _ := os.Readlink("/proc/self/ns/pid")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && ns != self {
				return pid
			}
		}
	}
	return 0
}

// Env is the environment of commands run with Exec.
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"LANG=C.UTF-8",
	"HOME=/root",
	"TERM=dumb",
	"DEBIAN_FRONTEND=noninteractive",
	"SYSTEMD_PAGER=",
	"SYSTEMD_COLORS=0",
}

// Exec runs a command inside the booted container (all of its namespaces,
// via nsenter) with stdin (may be nil) and returns its combined output.
// The command runs with root's full privileges, outside the container's
// cgroup and seccomp filter: it is the operator's shell, not a service.
func (c *Container) Exec(ctx context.Context, stdin []byte, args ...string) (string, error) {
	if c.PID1 == 0 {
		return "", errors.New("hostlab: container not booted")
	}
	argv := append([]string{"--target", strconv.Itoa(c.PID1), "--all", "--"}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", argv...)
	cmd.Env = Env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return out.String(), err
}

// WriteFile writes content to path inside the booted container.
func (c *Container) WriteFile(ctx context.Context, path string, content []byte, mode os.FileMode) error {
	script := fmt.Sprintf(`mkdir -p "$(dirname "$1")" && cat > "$1" && chmod %o "$1"`, mode.Perm())
	out, err := c.Exec(ctx, content, "sh", "-c", script, "sh", path)
	if err != nil {
		return fmt.Errorf("hostlab: write %s: %w\n%s", path, err, out)
	}
	return nil
}

// Console is what the container printed on its console so far.
func (c *Container) Console() string {
	b, _ := os.ReadFile(c.console)
	return string(b)
}

// Run runs args as the only process of a container that is not booted (no
// systemd: as in a chroot or an image build) and returns its combined
// output, the console included. The container is removed afterwards.
func Run(ctx context.Context, o Options, args ...string) (string, error) {
	c, err := prepare(o)
	if err != nil {
		return "", err
	}
	nargs := append(c.nspawnArgs(false), "--")
	nargs = append(nargs, args...)
	if err := c.start(nargs); err != nil {
		return "", errors.Join(err, c.cleanup())
	}
	var runErr error
	select {
	case <-c.done:
		runErr = c.waitErr
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	out := c.Console()
	if runErr != nil {
		runErr = fmt.Errorf("hostlab: %s in container %s: %w", strings.Join(args, " "), c.Name, runErr)
	}
	return out, errors.Join(runErr, c.Close())
}

// Close stops the container (a clean poweroff, then SIGKILL of the
// container's init if it does not finish in time) and removes everything
// it created: the overlay upper layer, the run directory and nspawn's
// leftover cgroups. It is idempotent.
func (c *Container) Close() error {
	c.closeOnce.Do(func() {
		var err error
		if c.cmd != nil && c.cmd.Process != nil && !c.exited() {
			err = stopNspawn(c.cmd.Process.Pid, c.waitExit)
		}
		if err == nil {
			err = c.cleanup()
		}
		c.closeErr = err
	})
	return c.closeErr
}

// stopNspawn stops the container of the systemd-nspawn process pid: SIGTERM
// (nspawn asks the container's systemd to halt), after 30 s SIGKILL of the
// container's init (which ends its PID namespace), then of nspawn itself.
// wait(d) reports whether nspawn exited within d.
func stopNspawn(pid int, wait func(time.Duration) bool) error {
	syscall.Kill(pid, syscall.SIGTERM)
	if wait(30 * time.Second) {
		return nil
	}
	if init := containerInit(pid); init != 0 {
		syscall.Kill(init, syscall.SIGKILL)
	}
	if wait(10 * time.Second) {
		return nil
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if wait(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("hostlab: systemd-nspawn (pid %d) does not exit", pid)
}

func (c *Container) waitExit(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// cleanup removes the cgroups (deepest first), unmounts the container's
// bpffs and removes the run directory.
func (c *Container) cleanup() error {
	return cleanupRun(c.dir, c.cgroups)
}

// cleanupRun removes what a container left on the host: its cgroups, its
// bpffs mount and its run directory. The directory stays when unmounting
// fails (removeTree never crosses a mount).
func cleanupRun(dir string, cgroups []string) error {
	errs := []error{removeCgroups(cgroups)}
	if err := unmountBPFFS(bpffsOf(dir)); err != nil {
		return errors.Join(append(errs, err)...)
	}
	return errors.Join(append(errs, removeTree(dir))...)
}

func removeCgroups(groups []string) error {
	var errs []error
	for _, g := range groups {
		var dirs []string
		filepath.WalkDir(g, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("hostlab: rmdir cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// CleanupStale removes what runs that died (crash, test timeout, a second
// ^C) left behind: for each run directory whose owning process is gone, it
// stops the container if its systemd-nspawn still runs, then removes the
// directory and the cgroups. It returns the names of those containers.
// Directories of live runs are left alone.
func CleanupStale() ([]string, error) {
	dirs, _ := filepath.Glob(filepath.Join(RunDirBase, runDirPrefix+"*"))
	var names []string
	var errs []error
	for _, d := range dirs {
		owner, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) < time.Minute {
				continue // being prepared right now, perhaps
			}
		} else if processAlive(strings.TrimSpace(string(owner))) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "nspawn")); err == nil {
			id := strings.TrimSpace(string(b))
			if processAlive(id) {
				pid, _ := strconv.Atoi(strings.Fields(id)[0])
				err := stopNspawn(pid, func(t time.Duration) bool {
					deadline := time.Now().Add(t)
					for time.Now().Before(deadline) {
						if !processAlive(id) {
							return true
						}
						time.Sleep(100 * time.Millisecond)
					}
					return false
				})
				if err != nil {
					errs = append(errs, err)
					continue
				}
			}
		}
		var groups []string
		for _, root := range cgroupRoots() {
			groups = append(groups, filepath.Join(root, filepath.Base(d)))
		}
		errs = append(errs, cleanupRun(d, groups))
		// RunDirBase/xlb-hostlab-NAME-RANDOM
		name := strings.TrimPrefix(filepath.Base(d), runDirPrefix)
		if i := strings.LastIndex(name, "-"); i > 0 {
			names = append(names, name[:i])
		}
	}
	return names, errors.Join(errs...)
}

// processID is "PID STARTTIME": a process identity that survives PID reuse.
func processID(pid int) string {
	return strconv.Itoa(pid) + " " + startTime(pid)
}

func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// Fields after the command (which may contain spaces) in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	state, start := f[0], f[19]
	if state == "Z" || state == "X" {
		return ""
	}
	return start
}

// processAlive reports whether the process of a processID still runs.
func processAlive(id string) bool {
	f := strings.Fields(id)
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	return err == nil && startTime(pid) == f[1]
}
