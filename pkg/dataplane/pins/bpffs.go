package pins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// EnsureBPFFS makes stateDir a directory (mode 0700) on a BPF filesystem:
// when its parent is not on one, it mounts a bpffs there (mount -t bpf,
// mode 0700) and reports mounted. On a machine without systemd's
// /sys/fs/bpf mount the default state_dir /sys/fs/bpf/xlb gets one
// (DESIGN §6). stateDir must be absolute, and its last element free of
// dots (a BPF filesystem refuses them). Errors name the path.
func EnsureBPFFS(stateDir string) (mounted bool, err error) {
	if !filepath.IsAbs(stateDir) {
		return false, fmt.Errorf("dataplane: state_dir %q must be an absolute path", stateDir)
	}
	if strings.Contains(filepath.Base(stateDir), ".") {
		return false, fmt.Errorf("dataplane: state_dir %s: a BPF filesystem refuses names with a dot (%q)", stateDir, filepath.Base(stateDir))
	}
	parent := filepath.Dir(stateDir)
	if on, _ := onBPFFS(stateDir); !on {
		on, err := onBPFFS(parent)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("dataplane: state_dir %s: statfs %s: %w", stateDir, parent, err)
		}
		if !on {
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return false, fmt.Errorf("dataplane: state_dir %s: create the bpffs mount point: %w", stateDir, err)
			}
			if err := unix.Mount("bpf", parent, "bpf", 0, "mode=0700"); err != nil {
				return false, fmt.Errorf("dataplane: state_dir %s: %s is not a BPF filesystem and mounting one there failed: %w (mount it first: mount -t bpf bpf %s)", stateDir, parent, err, parent)
			}
			mounted = true
		}
	}
	if err := os.Mkdir(stateDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return mounted, fmt.Errorf("dataplane: state_dir %s: %w", stateDir, err)
	}
	if on, err := onBPFFS(stateDir); err != nil || !on {
		return mounted, fmt.Errorf("dataplane: state_dir %s is not on a BPF filesystem (%v)", stateDir, err)
	}
	return mounted, nil
}

// onBPFFS reports whether path is on a BPF filesystem.
func onBPFFS(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, err
	}
	return uint32(st.Type) == unix.BPF_FS_MAGIC, nil
}

// ProbePinning is the FeaturePinning probe: the BPF filesystem under
// stateDir (EnsureBPFFS) and one pin of a throwaway map there. A
// read-only stateDir's refusal says how to make it writable.
func ProbePinning(stateDir string) error {
	err := probePinningIn(stateDir)
	if errors.Is(err, unix.EROFS) {
		// The packaged unit's sandbox (ProtectKernelTunables=yes) leaves
		// only the default state_dir writable in the bpffs.
		return fmt.Errorf("%w (the packaged xlb.service makes only /sys/fs/bpf/xlb writable: add ReadWritePaths=-%s in a drop-in, systemctl edit xlb)", err, stateDir)
	}
	return err
}

// probePinningIn mounts the BPF filesystem when missing and pins, then
// unpins, a throwaway map under stateDir.
func probePinningIn(stateDir string) error {
	if _, err := EnsureBPFFS(stateDir); err != nil {
		return err
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xlb_probe", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("create a probe map: %w", err)
	}
	defer m.Close()
	p := filepath.Join(stateDir, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := m.Pin(p); err != nil {
		return fmt.Errorf("pin a probe map at %s: %w", p, err)
	}
	return m.Unpin()
}

// The layout of state_dir (DESIGN §6): the metadata record, a directory of
// map pins, a directory of link pins, and the two directories of a pin
// replacement in progress (pins.go). A BPF filesystem refuses names with a
// dot (reserved for the kernel's own files), hence no dot files.
const (
	MetaFile    = "meta"
	MapsDir     = "maps"
	LinksDir    = "links"
	StagingDir  = "staging" // the complete new set, meta pinned last
	RetiredDir  = "retired" // replaced pins, removed once the new set is in place
	stagingMeta = StagingDir + "/" + MetaFile
)

func MetaPath(stateDir string) string { return filepath.Join(stateDir, MetaFile) }

func MapPath(stateDir, name string) string { return filepath.Join(stateDir, MapsDir, name) }

// LinkPath is where the link of interface ifname is pinned. Interface
// names may hold dots (VLANs: eth0.100), which a BPF filesystem refuses:
// they are escaped as %2E (and % as %25).
func LinkPath(stateDir, ifname string) string {
	return filepath.Join(stateDir, LinksDir, linkEscaper.Replace(ifname))
}

// IfnameOfLink is the interface name of a file under links/.
func IfnameOfLink(file string) string { return linkUnescaper.Replace(file) }

var (
	linkEscaper   = strings.NewReplacer("%", "%25", ".", "%2E")
	linkUnescaper = strings.NewReplacer("%25", "%", "%2E", ".")
)
