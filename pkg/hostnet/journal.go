package hostnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultJournalDir is where the journal lives: /run survives a crash of
// the daemon but not a reboot, exactly the lifetime of the settings it
// protects. The systemd unit keeps it across restarts
// (RuntimeDirectory=xlb, RuntimeDirectoryPreserve=restart).
const DefaultJournalDir = "/run/xlb"

// Journal records the original value of every sysctl XLB changes before it
// changes it, in a file keyed by the network namespace's cookie (unique for
// the boot, never reused). If XLB crashes, the next start in the same
// namespace finds the journal and keeps the recorded originals, so a clean
// stop later restores what the host had before the first XLB ran, not what
// the crashed one left behind.
type Journal struct {
	path string
	data journalData
}

// journalData is the journal file's content.
type journalData struct {
	// Sysctls maps a /proc/sys path to its value before XLB changed it.
	Sysctls map[string]string `json:"sysctls"`
	// Neighbours are the kernel-managed neighbour entries XLB created,
	// removed on a clean stop.
	Neighbours []Neighbour `json:"neighbours"`
	// XDP maps an interface name to the id of the XDP program XLB attached
	// to it through netlink (the fallback when XDP bpf_links are refused).
	// Unlike a bpf_link, such a program stays attached when the process
	// crashes; the next start replaces it when the id still matches.
	XDP map[string]uint32 `json:"xdp,omitempty"`
}

// Neighbour names a neighbour entry: interface and IPv4 address.
type Neighbour struct {
	Interface string     `json:"interface"`
	IP        netip.Addr `json:"ip"`
}

// OpenJournal opens or creates the journal for the caller's network
// namespace in dir.
func OpenJournal(dir string) (*Journal, error) {
	cookie, err := netnsCookie()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host settings journal: %w", err)
	}
	j := &Journal{path: filepath.Join(dir, fmt.Sprintf("host-netns-%d.json", cookie))}
	b, err := os.ReadFile(j.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("host settings journal: %w", err)
	default:
		if err := json.Unmarshal(b, &j.data); err != nil {
			return nil, fmt.Errorf("host settings journal %s: %w", j.path, err)
		}
	}
	if j.data.Sysctls == nil {
		j.data.Sysctls = map[string]string{}
	}
	return j, nil
}

// Recovered lists what a previous instance changed and did not restore (it
// crashed): sysctl paths and netlink-attached XDP programs ("xdp IFACE"),
// sorted, then neighbours as "IP dev IFACE".
func (j *Journal) Recovered() []string {
	var out []string
	for k := range j.data.XDP {
		out = append(out, "xdp "+k)
	}
	for k := range j.data.Sysctls {
		out = append(out, k)
	}
	sort.Strings(out)
	for _, n := range j.data.Neighbours {
		out = append(out, n.IP.String()+" dev "+n.Interface)
	}
	return out
}

// Neighbours lists the recorded neighbour entries.
func (j *Journal) Neighbours() []Neighbour { return append([]Neighbour(nil), j.data.Neighbours...) }

// AddNeighbour records a neighbour entry XLB created, before the caller
// relies on it being removed at stop.
func (j *Journal) AddNeighbour(ifname string, ip netip.Addr) error {
	n := Neighbour{Interface: ifname, IP: ip}
	for _, have := range j.data.Neighbours {
		if have == n {
			return nil
		}
	}
	j.data.Neighbours = append(j.data.Neighbours, n)
	return j.save()
}

// XDPPrograms returns the XDP programs a previous instance attached through
// netlink and did not detach (it crashed): interface name → program id.
func (j *Journal) XDPPrograms() map[string]uint32 {
	out := make(map[string]uint32, len(j.data.XDP))
	for k, v := range j.data.XDP {
		out[k] = v
	}
	return out
}

// SetXDPProgram records the XDP program XLB attached to ifname through
// netlink (id 0: none any more).
func (j *Journal) SetXDPProgram(ifname string, id uint32) error {
	if id == 0 {
		if _, ok := j.data.XDP[ifname]; !ok {
			return nil
		}
		delete(j.data.XDP, ifname)
		return j.save()
	}
	if j.data.XDP == nil {
		j.data.XDP = map[string]uint32{}
	}
	j.data.XDP[ifname] = id
	return j.save()
}

// Path is the journal file.
func (j *Journal) Path() string { return j.path }

// Set writes value to the sysctl at path (under /proc/sys), first
// recording its original value unless a previous instance already did.
func (j *Journal) Set(path, value string) error {
	if _, ok := j.data.Sysctls[path]; !ok {
		cur, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		j.data.Sysctls[path] = strings.TrimSpace(string(cur))
		if err := j.save(); err != nil {
			return err
		}
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Original returns the recorded original value of a sysctl, or its current
// value when it has not been changed.
func (j *Journal) Original(path string) (string, error) {
	if v, ok := j.data.Sysctls[path]; ok {
		return v, nil
	}
	cur, err := os.ReadFile(path)
	return strings.TrimSpace(string(cur)), err
}

// Restore writes every original sysctl value back and removes the journal.
// The caller removes the recorded neighbours first.
func (j *Journal) Restore() error {
	var errs []error
	for path, v := range j.data.Sysctls {
		if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", path, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	j.data = journalData{Sysctls: map[string]string{}}
	if err := os.Remove(j.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", j.path, err)
	}
	return nil
}

func (j *Journal) save() error {
	b, err := json.Marshal(j.data)
	if err != nil {
		return err
	}
	tmp := j.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("host settings journal: %w", err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("host settings journal: %w", err)
	}
	return nil
}

// NetnsLock is the instance lock of one network namespace.
type NetnsLock struct {
	f    *os.File
	path string
}

// LockNetns takes the instance lock of the caller's network namespace in
// dir: one XLB per namespace, since two would share the sysctls,
// neighbours and interfaces and each would undo the other's settings on
// stop. The lock (flock) lasts until Release or the end of the process,
// crash included.
func LockNetns(dir string) (*NetnsLock, error) {
	cookie, err := netnsCookie()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("instance lock: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("netns-%d.lock", cookie))
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("instance lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("another xlb is running in this network namespace (lock %s held); one instance per network namespace", path)
			}
			return nil, fmt.Errorf("instance lock %s: %w", path, err)
		}
		// The holder before us may have removed the file between our open
		// and our flock: then we hold a lock on a file nobody else can
		// find. Retry on the file now at the path.
		var held, named unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &named) == nil && held.Ino == named.Ino {
			return &NetnsLock{f: f, path: path}, nil
		}
		f.Close()
	}
}

// Release removes the lock file and releases the lock.
func (l *NetnsLock) Release() error {
	err := os.Remove(l.path)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// netnsCookie returns the caller's network namespace cookie (SO_NETNS_COOKIE).
func netnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("netns cookie: %w", err)
	}
	defer unix.Close(fd)
	var cookie uint64
	l := uint32(8)
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_NETNS_COOKIE,
		uintptr(unsafe.Pointer(&cookie)), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("netns cookie: %w", errno)
	}
	return cookie, nil
}
