package sched

import (
	"encoding/json"
	"net/netip"
	"os"
	"testing"

	"github.com/xlbproject/xlb/pkg/limits"
)

// hashVectors is testdata/hash_vectors.json: tuples and their hashes,
// computed once by a C build of the kernel's include/linux/jhash.h
// (jhash_3words, jhash_1word). The data path's fixtures check the BPF
// hash (bpf/jhash.h) against the same file.
type hashVectors struct {
	Seed    uint32 `json:"seed"`
	Vectors []struct {
		Saddr     netip.Addr `json:"saddr"`
		Daddr     netip.Addr `json:"daddr"`
		Sport     uint16     `json:"sport"`
		Dport     uint16     `json:"dport"`
		Proto     uint8      `json:"proto"`
		FiveTuple uint32     `json:"five_tuple"`
		ClientIP  uint32     `json:"client_ip"`
	} `json:"vectors"`
}

// TestHashGolden freezes the Maglev hashes. Every host and every version
// must hash a connection alike, and the data path must hash it as
// HashFiveTuple and HashClientIP do: if this test fails, the hash, its
// seed or the order of its words changed, and an upgrade would move every
// Maglev client. Do not update the vectors unless that is intended and
// documented.
func TestHashGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/hash_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var hv hashVectors
	if err := json.Unmarshal(b, &hv); err != nil {
		t.Fatal(err)
	}
	if hv.Seed != limits.SchedSeed {
		t.Fatalf("the vectors' seed is %#x, XLB_SCHED_SEED %#x", hv.Seed, uint32(limits.SchedSeed))
	}
	if len(hv.Vectors) < 100 {
		t.Fatalf("%d vectors, want 100 or more", len(hv.Vectors))
	}
	for _, v := range hv.Vectors {
		if got := HashFiveTuple(v.Saddr, v.Daddr, v.Sport, v.Dport, v.Proto); got != v.FiveTuple {
			t.Errorf("HashFiveTuple(%s, %s, %d, %d, %d) = %d, want %d", v.Saddr, v.Daddr, v.Sport, v.Dport, v.Proto, got, v.FiveTuple)
		}
		if got := HashClientIP(v.Saddr); got != v.ClientIP {
			t.Errorf("HashClientIP(%s) = %d, want %d", v.Saddr, got, v.ClientIP)
		}
	}
}
