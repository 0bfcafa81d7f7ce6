package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// DefaultGuardInterval is how often SysctlGuard reads the settings it
// guards.
//
// Why polling, once a second: inotify sees no writes under /proc/sys, and
// the kernel announces forwarding changes on rtnetlink (RTM_NEWNETCONF)
// but not net.ipv4.ip_local_reserved_ports, so one mechanism for both is
// a read of each file. Three reads of a few bytes a second cost nothing
// measurable, and a reset is repaired within a second: before a client's
// first SYN retransmit (1 s), so a connection attempt that met the reset
// succeeds on its retry.
const DefaultGuardInterval = time.Second

// GuardOptions configure GuardSysctls.
type GuardOptions struct {
	// SNATPortLo and SNATPortHi are the SNAT port range that must stay in
	// net.ipv4.ip_local_reserved_ports (ReservePorts).
	SNATPortLo, SNATPortHi uint16
	// RetiredSNAT, when set, returns the retired SNAT ranges (ports an
	// earlier config handed out that live connection pairs may still
	// hold), which must stay reserved too; it is called at each check.
	RetiredSNAT func() []PortRange
	// Root is the sysctl tree; "": SysctlRoot. Tests give a directory of
	// plain files laid out like /proc/sys.
	Root string
	// Interval between checks of Run; 0: DefaultGuardInterval.
	Interval time.Duration
	// Log receives one warning per repair and the failures; nil: logrus's
	// standard logger.
	Log logrus.FieldLogger
}

// SettingRepairs counts the repairs of one guarded setting.
type SettingRepairs struct {
	// Setting is the dotted sysctl name (FIBLookupSetting,
	// ReservedPortsSetting).
	Setting string
	// Repairs counts the resets SysctlGuard found and undid since it was
	// created.
	Repairs uint64
}

// SysctlGuard keeps the sysctls XLB sets (FIBLookupSetting,
// ReservedPortsSetting) at the values it set (issue 13: a sysctl reset
// silently stopped new connections). Each check reads every guarded
// setting; one that lost XLB's value is written back and logged as ONE
// warning naming the setting, the value found, the value restored and
// what the reset looks like. A write that fails is logged as an error
// once, until a check finds the setting right again or a write succeeds.
//
// The guard opens its files when it is created, in the calling thread's
// network namespace, and reads and writes through those descriptors, which
// stay bound to that namespace's sysctls whichever thread runs the checks.
// It only puts back what the instance already set through its Journal,
// which keeps the originals for Journal.Restore.
type SysctlGuard struct {
	log      logrus.FieldLogger
	interval time.Duration
	reqs     []guarded
	context  map[string]*sysctlFile // read to explain a reset

	mu sync.Mutex // serialises checks; guards the counts and failing
}

// guarded is one requirement and its file.
type guarded struct {
	requirement
	file    *sysctlFile
	repairs uint64
	failing bool // the latest write failed (logged once)
}

// GuardSysctls opens the guarded settings' files in the calling thread's
// network namespace. Run checks them; Close releases the files. Errors: a
// file that cannot be opened for reading and writing.
func GuardSysctls(o GuardOptions) (*SysctlGuard, error) {
	if o.Root == "" {
		o.Root = SysctlRoot
	}
	if o.Interval <= 0 {
		o.Interval = DefaultGuardInterval
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	g := &SysctlGuard{log: o.Log, interval: o.Interval, context: map[string]*sysctlFile{}}
	for _, r := range []requirement{fibLookupRequirement(), reservedPortsRequirement(o.SNATPortLo, o.SNATPortHi, o.RetiredSNAT)} {
		f, err := openSysctl(o.Root, r.name, os.O_RDWR)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.reqs = append(g.reqs, guarded{requirement: r, file: f})
		for _, name := range r.context {
			if g.context[name] != nil {
				continue
			}
			// Context only explains: a missing file leaves it unexplained.
			if cf, err := openSysctl(o.Root, name, os.O_RDONLY); err == nil {
				g.context[name] = cf
			}
		}
	}
	return g, nil
}

// Run checks the settings every interval until ctx ends.
func (g *SysctlGuard) Run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.Check()
		}
	}
}

// Check reads every guarded setting once and repairs those that lost
// XLB's value. It returns the number of settings repaired.
func (g *SysctlGuard) Check() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for i := range g.reqs {
		if g.check(&g.reqs[i]) {
			n++
		}
	}
	return n
}

// check reads one setting and repairs it if needed; true when repaired.
func (g *SysctlGuard) check(r *guarded) bool {
	log := g.log.WithField("setting", r.name)
	cur, err := r.file.read()
	if err != nil {
		if !r.failing {
			log.WithError(err).Error("host settings guard: cannot read the setting; it is not watched until a read works")
		}
		r.failing = true
		return false
	}
	want, ok := r.fix(cur)
	if ok {
		if r.failing {
			log.Info("host settings guard: the setting holds XLB's value again")
		}
		r.failing = false
		return false
	}
	cause := r.explain(cur, g.readContext(r.context))
	if err := r.file.write(want); err != nil {
		if !r.failing {
			log.WithError(err).WithFields(logrus.Fields{"found": cur, "want": want, "cause": cause}).
				Error("host settings guard: a host setting XLB needs was reset and cannot be put back; new connections may fail until it is")
		}
		r.failing = true
		return false
	}
	r.failing = false
	r.repairs++
	log.WithFields(logrus.Fields{"found": cur, "restored": want}).
		Warnf("host settings guard: %s was reset and is put back; it looks like %s", r.name, cause)
	return true
}

// readContext reads the named context sysctls; unreadable ones are "".
func (g *SysctlGuard) readContext(names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, name := range names {
		if f := g.context[name]; f != nil {
			out[name], _ = f.read()
		}
	}
	return out
}

// Repairs returns the repair count of every guarded setting, in a fixed
// order (FIBLookupSetting, ReservedPortsSetting).
func (g *SysctlGuard) Repairs() []SettingRepairs {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]SettingRepairs, len(g.reqs))
	for i, r := range g.reqs {
		out[i] = SettingRepairs{Setting: r.name, Repairs: r.repairs}
	}
	return out
}

// Close releases the files. Run must have returned.
func (g *SysctlGuard) Close() error {
	var errs []error
	for _, r := range g.reqs {
		errs = append(errs, r.file.Close())
	}
	for _, f := range g.context {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// sysctlFile is one sysctl's open file. Sysctl files are read whole with
// one read at offset 0 (the kernel returns nothing for a read at another
// offset) and written whole with one write at offset 0; a plain file (a
// test's tree) is truncated after the write, which procfs does not need.
type sysctlFile struct {
	*os.File
	plain bool
}

// maxSysctlValue bounds one read: ip_local_reserved_ports lists at most
// every port, far below it in practice.
const maxSysctlValue = 1 << 16

func openSysctl(root, name string, flag int) (*sysctlFile, error) {
	f, err := os.OpenFile(sysctlPath(root, name), flag, 0)
	if err != nil {
		return nil, fmt.Errorf("host settings guard: %w", err)
	}
	var st unix.Statfs_t
	plain := unix.Fstatfs(int(f.Fd()), &st) != nil || st.Type != unix.PROC_SUPER_MAGIC
	return &sysctlFile{File: f, plain: plain}, nil
}

// read returns the value, trimmed.
func (f *sysctlFile) read() (string, error) {
	buf := make([]byte, maxSysctlValue)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// write replaces the value.
func (f *sysctlFile) write(v string) error {
	b := []byte(v + "\n")
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if f.plain {
		return f.Truncate(int64(len(b)))
	}
	return nil
}
