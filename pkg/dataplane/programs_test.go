package dataplane

import (
	"testing"

	"github.com/cilium/ebpf"
)

// The daemon loads XDP programs only: hosts whose policy refuses tracing
// programs (a BPF LSM, container seccomp profiles) run XLB unchanged, and
// nothing needs CAP_PERFMON.
func TestOnlyXDPPrograms(t *testing.T) {
	spec, err := loadXlb()
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Programs) == 0 {
		t.Fatal("no programs in the object")
	}
	for name, p := range spec.Programs {
		if p.Type != ebpf.XDP {
			t.Errorf("program %s is %s (section %s); want XDP only", name, p.Type, p.SectionName)
		}
	}
}
