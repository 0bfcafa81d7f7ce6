package hostnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
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
	path, err := namespaceFile(dir, "host-netns-%d.json")
	if err != nil {
		return nil, fmt.Errorf("host settings journal: %w", err)
	}
	j := &Journal{path: path}
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

// RemoveNeighbours deletes the recorded neighbour entries from the
// kernel, looked up by interface name in the caller's network namespace
// (one whose interface or entry is gone is done), and forgets them: what
// a stopped instance's Resolver.Cleanup would have done. It returns how
// many it deleted.
func (j *Journal) RemoveNeighbours() (int, error) {
	if len(j.data.Neighbours) == 0 {
		return 0, nil
	}
	removed := 0
	var errs []error
	for _, n := range j.data.Neighbours {
		l, err := netlink.LinkByName(n.Interface)
		if err != nil {
			var notFound netlink.LinkNotFoundError
			if !errors.As(err, &notFound) {
				errs = append(errs, fmt.Errorf("delete neighbour %s dev %s: %w", n.IP, n.Interface, err))
			}
			continue
		}
		err = netlink.NeighDel(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, IP: net.IP(n.IP.AsSlice())})
		switch {
		case err == nil:
			removed++
		case !errors.Is(err, errNoEntry):
			errs = append(errs, fmt.Errorf("delete neighbour %s dev %s: %w", n.IP, n.Interface, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, err
	}
	j.data.Neighbours = nil
	return removed, j.save()
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
