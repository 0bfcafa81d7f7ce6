package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// The sweep's output overflows the kernel's iterator buffer many times
// over here (30,000 records of 48 bytes); the kernel then runs the program
// again for the entry that did not fit, and nothing may be counted twice.
func TestSweepCountsEachEntryOnceAcrossBufferRefills(t *testing.T) {
	const pairs = 30000
	e := dt.NewEnv(t, dt.Options{MaxConnections: pairs})
	var keys []dataplane.FlowKey
	var vals []dataplane.FlowValue
	for i := 0; i < pairs; i++ {
		fk := dataplane.FlowKey{SaddrBe: uint32(i), DaddrBe: 7, SportBe: uint16(i), DportBe: 80, Proto: 6, Dir: uint8(dataplane.DirClient)}
		rk := dataplane.FlowKey{SaddrBe: uint32(i), DaddrBe: 8, SportBe: 8080, DportBe: uint16(i), Proto: 6, Dir: uint8(dataplane.DirBackend)}
		gen := uint32(i + 1)
		keys = append(keys, fk, rk)
		vals = append(vals,
			dataplane.FlowValue{Generation: gen, Peer: rk, BackendId: uint32(i % 3), Flags: dataplane.FlagRSTClient, LastSeen: 100},
			dataplane.FlowValue{Generation: gen, Peer: fk, BackendId: uint32(i % 3), LastSeen: 100})
	}
	if _, err := e.DP.PutFlows(keys, vals); err != nil {
		t.Fatal(err)
	}
	var res dataplane.SweepResult
	var suspect [dataplane.SweepCells / 64]uint64
	for round := 0; round < 2; round++ {
		if err := e.DP.Sweep(dataplane.SweepParams{Now: 200, Orphan: 1000, TimeWait: 1000}, &suspect, &res); err != nil {
			t.Fatal(err)
		}
		if res.Entries != 2*pairs || res.Resetting != pairs || res.Active != 0 || len(res.Records) != pairs {
			t.Fatalf("round %d: entries %d resetting %d active %d records %d", round, res.Entries, res.Resetting, res.Active, len(res.Records))
		}
		var perBackend uint64
		for _, b := range res.Backends {
			perBackend += b.Pairs
		}
		if perBackend != pairs {
			t.Fatalf("backend pair counts sum to %d", perBackend)
		}
		for i, c := range res.Cells {
			if c != (dataplane.SweepCell{}) {
				t.Fatalf("cell %d not clean for intact pairs: %+v", i, c)
			}
		}
		seen := map[dataplane.FlowKey]bool{}
		for _, r := range res.Records {
			if r.Kind != dataplane.SweepReset || seen[r.Key] {
				t.Fatalf("record %+v (duplicate %v)", r, seen[r.Key])
			}
			seen[r.Key] = true
		}
	}
}
