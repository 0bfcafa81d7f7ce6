package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Table size (issue 17 item 3: per-packet cost with 1,000,000 live pairs
// against 1,000). Two environments are built side by side, one with
// tableSmall live pairs and one with tableLarge, and every iteration runs
// one established client data segment (1,400 bytes, as in bench_test.go)
// through each, the environments taking turns by blocks (tableRun), every
// program attached as XLB is (attachDirect); the figures are medians with
// the null program's median subtracted (bench_test.go run).
//
//   - hot: every packet is on the same pair, so the table's size is all
//     that differs (hash buckets, chain length).
//   - spread: packet i is on pair (i * tableStride) mod pairs, so in the
//     large table nearly every packet meets an entry no recent packet
//     touched (a trickle over many idle connections: cache misses).
//     A probe program that does nothing but the forward entry's hash
//     lookup on the same map and frame runs beside XLB in each table: the
//     cost of reaching the state at that size, which any stateful
//     balancer pays. XLB's own share is what is left.
//
// The pairs besides the handshaken one are written straight into the flow
// map (PutFlows), copies of the handshaken pair with their own client
// address and port, backend address and SNAT port, checksum deltas and
// last_seen of the moment they were written; their next hops are the
// handshaken pair's. In spread mode a pair is met again only after
// tableLarge packets, so in the large table every packet also does the
// lone check (bpf/xlb.c check_counterpart: a second lookup on an entry
// idle XLB_LONE_CHECK_TICKS) once the run outlasts those ticks, as a real
// trickle does.
const (
	tableSmall  = 1_000
	tableLarge  = 1_000_000
	tableStride = 104_729 // a prime: coprime to both sizes, so no pair repeats within a pass
)

// tableEnv is a benchEnv whose flow table holds pairs live pairs.
type tableEnv struct {
	*benchEnv
	pairs  int
	probe  *ebpf.Program // the forward entry's lookup alone (lookupProbe)
	seg    dt.Segment    // the handshaken pair's data segment, re-addressed per pair
	hotFrm []byte
}

func newTableEnv(b *testing.B, pairs int) *tableEnv {
	b.Helper()
	be := newBenchEnv(b, uint32(pairs)+16)
	te := &tableEnv{benchEnv: be, pairs: pairs}
	var fk, rk dataplane.FlowKey
	var fv, rv dataplane.FlowValue
	for k, v := range be.e.Flows(b) {
		if k.Direction() == dataplane.DirClient {
			fk, fv = k, v
		} else {
			rk, rv = k, v
		}
	}
	now, err := be.e.DP.KernelNow()
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 65536
	keys := make([]dataplane.FlowKey, 0, 2*chunk)
	vals := make([]dataplane.FlowValue, 0, 2*chunk)
	flush := func() {
		if _, err := be.e.DP.PutFlows(keys, vals); err != nil {
			b.Fatal(err)
		}
		keys, vals = keys[:0], vals[:0]
	}
	// pair 0 is the handshaken one; 1..pairs-1 are its copies
	for i := 1; i < pairs; i++ {
		c, bk, sport := tableClient(i), tableBackend(i, rk.Src().Port()), tableSNATPort(i)
		f, r := fv, rv
		fkey := dataplane.NewFlowKey(c, fk.Dst(), dataplane.DirClient)
		rkey := dataplane.NewFlowKey(bk, netip.AddrPortFrom(rk.Dst().Addr(), sport), dataplane.DirBackend)
		setRecipe(&f, fkey, rkey.Dst(), bk)
		setRecipe(&r, rkey, fkey.Dst(), c)
		f.Generation, r.Generation = uint32(i)+1_000_000_000, uint32(i)+1_000_000_000
		f.LastSeen, r.LastSeen = now.Low32(), now.Low32()
		keys = append(keys, fkey, rkey)
		vals = append(vals, f, r)
		if len(keys) >= 2*chunk {
			flush()
		}
	}
	flush()
	if te.probe, err = lookupProbe(be.e.DP.FlowMap()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { te.probe.Close() })
	attachDirect(b, be.e, "xprobe", te.probe)
	te.seg = be.e.FromClient(fk.Src(), fk.Dst().Port(), dt.ACK|dt.PSH, 1001, 5001, make([]byte, 1400))
	te.hotFrm = be.toBack
	return te
}

// Pair i's client, backend and SNAT port (i >= 1): clients
// 203.0.113.100-227 with ports from 20000, backends 198.51.100.200 on (one
// per 64,512 SNAT ports) on the handshaken pair's backend port, SNAT ports
// 1024-65535 on its SNAT address. Documentation ranges only: the packets
// never leave BPF_PROG_TEST_RUN.
func tableClient(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + i%128)}), uint16(20000+i/128))
}

func tableBackend(i int, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(200 + i/64512)}), port)
}

func tableSNATPort(i int) uint16 { return uint16(1024 + i%64512) }

// setRecipe points v, the entry of key k, at src -> dst and recomputes its
// checksum deltas as bpf/flow.h recipe_csum does (RFC 1624).
func setRecipe(v *dataplane.FlowValue, k dataplane.FlowKey, src, dst netip.AddrPort) {
	n := dataplane.NewFlowKey(src, dst, dataplane.DirClient)
	v.SaddrBe, v.DaddrBe, v.SportBe, v.DportBe = n.SaddrBe, n.DaddrBe, n.SportBe, n.DportBe
	ip := csumReplace32(0, k.SaddrBe, v.SaddrBe)
	ip = csumReplace32(ip, k.DaddrBe, v.DaddrBe)
	l4 := csumReplace16(csumReplace16(ip, k.SportBe, v.SportBe), k.DportBe, v.DportBe)
	v.CsumIp, v.CsumL4 = csumFold(ip), csumFold(l4)
}

func csumReplace32(acc, old, new uint32) uint32 {
	return csumReplace16(csumReplace16(acc, uint16(old), uint16(new)), uint16(old>>16), uint16(new>>16))
}

func csumReplace16(acc uint32, old, new uint16) uint32 { return acc + uint32(^old) + uint32(new) }

func csumFold(s uint32) uint16 {
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// lookupProbe is an XDP program that looks the frame's forward key up in
// flows (an Ethernet/IPv4/TCP frame without IP options, as the benchmark
// sends) and returns XDP_TX when the entry is there, XDP_PASS otherwise:
// the state access of a stateful balancer and nothing else.
func lookupProbe(flows *ebpf.Map) (*ebpf.Program, error) {
	// struct flow_key on the stack at r10-16: saddr, daddr, sport, dport, proto, dir, pad
	var kw [4]byte
	kw[0] = 6 // IPPROTO_TCP; dir XLB_DIR_CLIENT, pad zero
	insns := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // data
		asm.LoadMem(asm.R3, asm.R1, 4, asm.Word), // data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 38),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, 26, asm.Word), // saddr
		asm.StoreMem(asm.RFP, -16, asm.R5, asm.Word),
		asm.LoadMem(asm.R5, asm.R2, 30, asm.Word), // daddr
		asm.StoreMem(asm.RFP, -12, asm.R5, asm.Word),
		asm.LoadMem(asm.R5, asm.R2, 34, asm.Word), // sport, dport
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.Word),
		asm.StoreImm(asm.RFP, -4, int64(binary.LittleEndian.Uint32(kw[:])), asm.Word),
		asm.LoadMapPtr(asm.R1, flows.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.Mov.Imm(asm.R0, dt.XDPTX),
		asm.Return(),
		asm.Mov.Imm(asm.R0, dt.XDPPass).WithSymbol("pass"),
		asm.Return(),
	}
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
}

// frame is pair i's data segment.
func (te *tableEnv) frame(i int) []byte {
	s := te.seg
	if i != 0 {
		s.Src = tableClient(i)
	}
	return s.Frame()
}

// tableBlock is how many iterations run in one environment before the
// next takes over: entering a fixture namespace costs a thread switch, so
// the environments alternate by blocks, not by packet.
const tableBlock = 1000

// tableRun runs b.N iterations: on each, every program of progs on its
// environment's pick(i), in blocks of tableBlock iterations per
// environment, environments and programs rotated, plus the null program;
// it returns each environment's programs' net ns/packet: the median of
// their runs less the null program's (bench_test.go run).
func tableRun(b *testing.B, envs []*tableEnv, progs []func(*tableEnv) *ebpf.Program, pick func(te *tableEnv, i int) []byte) [][]float64 {
	b.Helper()
	samples := make([][][]float64, len(envs))
	for j := range samples {
		samples[j] = make([][]float64, len(progs))
	}
	var tn []float64
	frames := make([][]byte, tableBlock)
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += tableBlock {
		hi := min(lo+tableBlock, b.N)
		for r := range envs {
			j := (r + lo/tableBlock) % len(envs)
			te := envs[j]
			for i := lo; i < hi; i++ {
				frames[i-lo] = pick(te, i)
			}
			err := te.e.Do(func() error {
				for i := lo; i < hi; i++ {
					for q := range progs {
						p := (q + i) % len(progs)
						ns, act, err := te.e.BenchHere(progs[p](te), frames[i-lo], te.e.Front, 1)
						if err != nil {
							return err
						}
						if act != dt.XDPTX {
							return fmt.Errorf("pairs %d, program %d, packet %d: %s", te.pairs, p, i, dt.ActionName(act))
						}
						samples[j][p] = append(samples[j][p], ns)
					}
					if j == 0 {
						ns, _, err := te.e.BenchHere(te.null, frames[i-lo], te.e.Front, 1)
						if err != nil {
							return err
						}
						tn = append(tn, ns)
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	null := benchMedian(tn)
	out := make([][]float64, len(envs))
	for j := range samples {
		for p := range samples[j] {
			out[j] = append(out[j], benchMedian(samples[j][p])-null)
		}
	}
	b.ReportMetric(null, "runner-ns")
	return out
}

// BenchmarkTableSize: XLB's established packet with tableSmall and
// tableLarge live pairs (ratio: large ÷ small); see the comment at the top.
// Building the large table takes a few seconds and about 250 MB of kernel
// memory.
func BenchmarkTableSize(b *testing.B) {
	envs := []*tableEnv{newTableEnv(b, tableSmall), newTableEnv(b, tableLarge)}
	xlb := func(te *tableEnv) *ebpf.Program { return te.e.DP.Program() }
	probe := func(te *tableEnv) *ebpf.Program { return te.probe }
	b.Run("hot", func(b *testing.B) {
		t := tableRun(b, envs, []func(*tableEnv) *ebpf.Program{xlb}, func(te *tableEnv, _ int) []byte { return te.hotFrm })
		b.ReportMetric(t[0][0], "small-ns/pkt")
		b.ReportMetric(t[1][0], "large-ns/pkt")
		b.ReportMetric(t[1][0]/t[0][0], "ratio")
	})
	b.Run("spread", func(b *testing.B) {
		t := tableRun(b, envs, []func(*tableEnv) *ebpf.Program{xlb, probe}, func(te *tableEnv, i int) []byte {
			return te.frame(i * tableStride % te.pairs)
		})
		b.ReportMetric(t[0][0], "small-ns/pkt")
		b.ReportMetric(t[1][0], "large-ns/pkt")
		b.ReportMetric(t[1][0]/t[0][0], "ratio")
		b.ReportMetric(t[0][1], "small-lookup-ns")
		b.ReportMetric(t[1][1], "large-lookup-ns")
		b.ReportMetric((t[1][0]-t[1][1])/(t[0][0]-t[0][1]), "ratio-beyond-lookup")
	})
}
