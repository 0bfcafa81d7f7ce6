package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// Feature names an optional kernel feature the data path can use. The
// daemon probes each one at startup and takes the best path the host
// allows; a refused feature means a fallback, never a failed start.
type Feature string

// The optional features, in the order they are reported.
const (
	// FeatureForEachMapElem is the bpf_for_each_map_elem helper in XDP
	// programs.
	FeatureForEachMapElem Feature = "bpf_for_each_map_elem"
	// FeatureRingBuf is the BPF ring buffer map and its helpers in XDP
	// programs.
	FeatureRingBuf Feature = "ring_buffer"
	// FeatureBatchOps is BPF_MAP_*_BATCH on hash and array maps.
	FeatureBatchOps Feature = "batch_map_ops"
	// FeatureXDPLink is attaching XDP through a bpf_link (BPF_LINK_CREATE)
	// rather than netlink.
	FeatureXDPLink Feature = "xdp_bpf_link"
	// FeaturePinning is pinning the maps, links and metadata under
	// state_dir on a BPF filesystem (Options.StateDir; mounted there when
	// missing), so that a hot upgrade or a restart after a crash keeps
	// every connection (DESIGN §6). Refused (no bpffs can be mounted or
	// pinned to, e.g. a container without one), the instance runs
	// unpinned: a restart or a crash loses every connection.
	FeaturePinning Feature = "pinning"
)

// AllFeatures lists every optional feature.
var AllFeatures = []Feature{FeatureForEachMapElem, FeatureRingBuf, FeatureBatchOps, FeatureXDPLink, FeaturePinning}

// ParseFeatures reads a comma-separated list of feature names (the
// XLB_DISABLE_FEATURES environment variable). Empty items are ignored; an
// unknown name is an error that lists the known ones.
func ParseFeatures(list string) ([]Feature, error) {
	var out []Feature
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f := Feature(item)
		if !slices.Contains(AllFeatures, f) {
			names := make([]string, len(AllFeatures))
			for i, k := range AllFeatures {
				names[i] = string(k)
			}
			return nil, fmt.Errorf("unknown kernel feature %q (known: %s)", item, strings.Join(names, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Feature states, as the status document names them (pkg/status/api).
const (
	StateAvailable = string(api.FeatureAvailable) // probed and usable
	StateRefused   = string(api.FeatureRefused)   // the kernel or a policy (LSM, seccomp) said no
	StateDisabled  = string(api.FeatureDisabled)  // turned off by the operator (Options.Disable)
	StateUnknown   = string(api.FeatureUnknown)   // not probed yet (XDP link: probed by the first attach)
)

// Paths the data path takes, by feature state, as the status document
// names them (pkg/status/api).
const (
	PathBatchLookup = string(api.PathBatchLookup) // flow map read in chunks with BPF_MAP_LOOKUP_BATCH
	PathPerKey      = string(api.PathPerKey)      // flow map read key by key (BPF_MAP_GET_NEXT_KEY + lookup)
	PathBPFLink     = string(api.PathBPFLink)     // XDP attached through a bpf_link, detached when XLB's process ends
	PathNetlink     = string(api.PathNetlink)     // XDP attached through netlink (IFLA_XDP)
	PathNotUsed     = string(api.PathNotUsed)     // this version has no use for the feature
	PathNotAttached = string(api.PathNotAttached) // no interface attached yet
	PathPinned      = string(api.PathPinned)      // maps, links and metadata pinned under state_dir
	PathUnpinned    = string(api.PathUnpinned)    // nothing pinned: a restart or crash loses every connection
)

// FeatureStatus is one optional feature: its probe's outcome and the path
// taken because of it.
type FeatureStatus struct {
	Name  Feature
	State string // StateAvailable, StateRefused, StateDisabled or StateUnknown
	// Detail says why a feature is not available: the probe's error, or
	// that the operator disabled it. Empty when available.
	Detail string
	// Path is what the data path does given State (a Path* constant).
	// Two paths follow a predecessor rather than the probe: the close
	// events of maps adopted from pins (a pinned array means the per-CPU
	// queues), and an interface whose netlink-attached program was
	// replaced in place (netlink, the XDP link left unprobed).
	Path string
}

func (f FeatureStatus) String() string {
	s := fmt.Sprintf("%s=%s", f.Name, f.State)
	if f.Detail != "" {
		s += " (" + f.Detail + ")"
	}
	return s + " -> " + f.Path
}

// Features is the outcome of the startup probes, in AllFeatures order.
type Features []FeatureStatus

// Get returns the status of f.
func (fs Features) Get(f Feature) FeatureStatus {
	for _, s := range fs {
		if s.Name == f {
			return s
		}
	}
	return FeatureStatus{Name: f, State: StateUnknown}
}

// Summary is the features as one log line's worth of text.
func (fs Features) Summary() string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, ", ")
}

// probeFeatures probes every optional feature except the XDP link (which
// only an attach can tell; see Attach) and fills d.features. Pinning is
// probed only with a state_dir: without one it is reported disabled.
func (d *Dataplane) probeFeatures(opts Options) {
	probes := map[Feature]func() error{
		FeatureForEachMapElem: func() error { return features.HaveProgramHelper(ebpf.XDP, asm.FnForEachMapElem) },
		FeatureRingBuf: func() error {
			if err := features.HaveMapType(ebpf.RingBuf); err != nil {
				return err
			}
			return features.HaveProgramHelper(ebpf.XDP, asm.FnRingbufOutput)
		},
		FeatureBatchOps: probeBatchOps,
		FeaturePinning:  func() error { return probePinning(opts.StateDir) },
	}
	d.features = make(Features, 0, len(AllFeatures))
	for _, f := range AllFeatures {
		st := FeatureStatus{Name: f, State: StateAvailable}
		switch {
		case slices.Contains(opts.Disable, f):
			st.State, st.Detail = StateDisabled, "disabled by the operator"
		case f == FeaturePinning && opts.StateDir == "":
			st.State, st.Detail = StateDisabled, "no state_dir (in-process instance)"
		case probes[f] == nil:
			st.State = StateUnknown
		default:
			if err := probes[f](); err != nil {
				st.State, st.Detail = StateRefused, probeError(err)
			}
		}
		st.Path = pathFor(f, st.State)
		d.features = append(d.features, st)
	}
}

// pathFor is the path taken for feature f in state.
func pathFor(f Feature, state string) string {
	ok := state == StateAvailable
	switch f {
	case FeatureBatchOps:
		if ok {
			return PathBatchLookup
		}
		return PathPerKey
	case FeatureXDPLink:
		switch state {
		case StateAvailable:
			return PathBPFLink
		case StateUnknown:
			return PathNotAttached
		}
		return PathNetlink
	case FeatureRingBuf:
		return closePath(ok)
	case FeaturePinning:
		if ok {
			return PathPinned
		}
		return PathUnpinned
	}
	// bpf_for_each_map_elem is probed so operators see what the host
	// allows; this version has no use for it (pkg/maintenance says why).
	return PathNotUsed
}

// setFeatureLocked records a feature's state found after startup (the XDP link,
// at the first attach). Callers hold d.mu.
func (d *Dataplane) setFeatureLocked(f Feature, state, detail string) {
	for i := range d.features {
		if d.features[i].Name == f {
			d.features[i].State, d.features[i].Detail, d.features[i].Path = state, detail, pathFor(f, state)
		}
	}
}

// setPathLocked records a path that differs from what the feature's state
// implies: the close events of adopted maps follow the pins, and a
// predecessor's netlink program replaced in place leaves the XDP link
// unprobed. Callers hold d.mu.
func (d *Dataplane) setPathLocked(f Feature, path string) {
	for i := range d.features {
		if d.features[i].Name == f {
			d.features[i].Path = path
		}
	}
}

// closePath is the close events' path: the ring buffer or the per-CPU queues.
func closePath(ring bool) string {
	if ring {
		return PathRingBuffer
	}
	return PathPerCPUQueue
}

// Features returns the probed features and the paths taken.
func (d *Dataplane) Features() Features {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.features)
}

func (d *Dataplane) featureOn(f Feature) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.featureOnLocked(f)
}

// featureOnLocked is featureOn for callers that hold d.mu (or run in Load,
// before anything else can).
func (d *Dataplane) featureOnLocked(f Feature) bool {
	return d.features.Get(f).State == StateAvailable
}

// probeBatchOps writes and reads back a two-entry hash map with the batch
// commands.
func probeBatchOps() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xlb_probe", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 2})
	if err != nil {
		return fmt.Errorf("create a probe map: %w", err)
	}
	defer m.Close()
	if _, err := m.BatchUpdate([]uint32{1, 2}, []uint32{10, 20}, nil); err != nil {
		return err
	}
	var cursor ebpf.MapBatchCursor
	keys, vals := make([]uint32, 2), make([]uint32, 2)
	n, err := m.BatchLookup(&cursor, keys, vals, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	if n != 2 {
		return fmt.Errorf("batch lookup returned %d of 2 entries", n)
	}
	return nil
}

// probeError shortens a probe's error for status and logs.
func probeError(err error) string {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return "not supported by this kernel"
	}
	return err.Error()
}

// requiredError explains a failed load of the program or its maps: both
// are required, so the daemon cannot start without them.
func requiredError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("dataplane: required: the kernel's verifier rejected the XDP program: %+v", ve)
	}
	return fmt.Errorf("dataplane: required kernel feature refused: loading the XDP program and its maps (BPF_PROG_TYPE_XDP, hash, array, per-CPU array and devmap maps): %w%s", err, policyHint(err))
}

// policyHint names what usually refuses a BPF operation with EPERM.
func policyHint(err error) string {
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return ""
	}
	return "; XLB needs CAP_BPF and CAP_NET_ADMIN (or root), and no BPF LSM, SELinux/AppArmor or seccomp policy that denies the bpf() system call for XDP programs and maps"
}
