package dataplane_test

import (
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Shutdown fixtures (seed "XLB shutdown behavior"): with the shutdown flag
// set, every matching non-RST packet — either direction of a known pair, or
// a new SYN to a listen port — is answered with a RST back to its sender
// following RFC 793 "Reset Generation" (seq = SEG.ACK when ACK was set,
// else 0; ack = SEG.SEQ + payload + SYN + FIN), TTL 64, payload and options
// trimmed, checksums valid. An incoming RST is never answered: it is
// forwarded on its pair or passed. The shutdown window creates no state.
var shutdownFixtures = []fixture{
	{Name: "client data on a known pair: RST to the client, seq = its ACK",
		Given: established, Shutdown: shutdownSet,
		In: seg{Flags: dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: inFlight}, Action: dt.XDPTX, Out: out{To: reset, Seq: 5001, Ack: 1001 + 20},
		Counted: counted{ShutdownResets: 1}, Entries: 2, Pair: openPair},
	{Name: "new SYN to a listen port: RST|ACK with ack = seq+1",
		Shutdown: shutdownSet,
		In:       seg{CPort: 33005, Flags: dt.SYN, Seq: 1000, MSS: true}, Action: dt.XDPTX, Out: out{To: reset, Seq: 0, Ack: 1001},
		Counted: counted{ShutdownResets: 1}},
	{Name: "client FIN with payload: ack counts the payload and the FIN",
		Given: established, Shutdown: shutdownSet,
		In: seg{Flags: dt.FIN | dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: inFlight}, Action: dt.XDPTX, Out: out{To: reset, Seq: 5001, Ack: 1001 + 20 + 1},
		Counted: counted{ShutdownResets: 1}, Entries: 2, Pair: openPair},
	{Name: "backend packet on a known pair: RST to the backend's address",
		Given: established, Shutdown: shutdownSet,
		In: seg{From: backend, Flags: dt.ACK, Seq: 5001, Ack: 1001, Data: inFlight}, Action: dt.XDPTX, Out: out{To: reset, Seq: 1001, Ack: 5001 + 20},
		Counted: counted{ShutdownResets: 1}, Entries: 2, Pair: openPair},
	{Name: "client data with IPv4 options on a known pair: RST to the client, without the options",
		Given: established, Shutdown: shutdownSet,
		In: seg{Flags: dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: inFlight, IPOptions: true}, Action: dt.XDPTX, Out: out{To: reset, Seq: 5001, Ack: 1001 + 20},
		Counted: counted{ShutdownResets: 1}, Entries: 2, Pair: openPair},
	{Name: "client RST on a known pair is forwarded, never answered",
		Given: established, Shutdown: shutdownSet,
		In: clientRST, Action: dt.XDPTX, Out: toB1,
		Counted: counted{ClosedClientRST: 1}, Closed: closures{ClientRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstC | closedR, Rev: revEst | freed, Terminal: true}},
	{Name: "backend RST on a known pair is forwarded to the client",
		Given: established, Shutdown: shutdownSet,
		In: backendRST, Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedBackendRST: 1}, Closed: closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstB | initB | closedR, Rev: revEst | freed, Terminal: true}},
	{Name: "RST without a pair passes",
		Shutdown: shutdownSet, In: clientRST, Action: dt.XDPPass},
	{Name: "ACK without a pair passes: nothing is sent for unknown flows",
		Shutdown: shutdownSet, In: seg{Flags: dt.ACK, Seq: 1001, Ack: 5001}, Action: dt.XDPPass},
	{Name: "traffic to other ports still passes",
		Shutdown: shutdownSet, In: seg{LPort: 22, Flags: dt.SYN, Seq: 1000, MSS: true}, Action: dt.XDPPass},

	// Clearing the flag restores normal forwarding (a shutdown abandoned in
	// tests; the daemon never clears it).
	{Name: "shutdown flag cleared: a SYN opens a pair again",
		Shutdown: shutdownCleared,
		In:       syn, Action: dt.XDPTX, Out: toB1,
		Counted: counted{PairsCreated: 1}, Entries: 2, Pair: pair{Is: opened}},
}

// inFlight is a 20-byte payload.
var inFlight = []byte("some bytes in flight")

func TestShutdownFixtures(t *testing.T) { runFixtures(t, shutdownFixtures) }
