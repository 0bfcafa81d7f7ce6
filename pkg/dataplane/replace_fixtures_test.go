package dataplane_test

import (
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Replacement fixtures (seed "Orderly close and reset"): a new SYN meeting
// a terminal pair replaces it with a fresh pair (round robin: backend 2,
// whose SNAT cursor starts at 40000); one meeting a half-closed pair is a
// retransmission and reuses it. The old reverse entry is removed only if it
// still belongs to the old pair, and only if the old pair left the backend
// no TIME_WAIT: where the backend closed first, it stays as a hold entry
// keeping the SNAT port until the time-wait ends (DESIGN §6b "SNAT reuse").
var replaceFixtures = []fixture{
	{Name: "new SYN on a time-wait pair the client closed first creates a fresh pair with a new generation",
		Given: establishedThen(clientFIN, backendFIN2), In: newSYN, Action: dt.XDPTX, Out: toB2,
		Counted: counted{PairsReplaced: 1, PairsCreated: 1}, Closed: closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: replaced, Backend: 1}},
	{Name: "new SYN on a time-wait pair the backend closed first holds the old reverse entry",
		Given: establishedThen(backendFIN, clientFIN2), In: newSYN, Action: dt.XDPTX, Out: toB2,
		Counted: counted{PairsReplaced: 1, PairsCreated: 1}, Closed: closures{BackendFIN: 1},
		Entries: 3, Pair: pair{Is: replaced, Backend: 1, Held: true}},
	// A simultaneous close leaves the backend in TIME_WAIT as well (issue
	// 27 finding 7: its FIN did not acknowledge the client's).
	{Name: "new SYN on a time-wait pair closed simultaneously holds the old reverse entry",
		Given: establishedThen(clientFIN, backendFIN), In: newSYN, Action: dt.XDPTX, Out: toB2,
		Counted: counted{PairsReplaced: 1, PairsCreated: 1}, Closed: closures{ClientFIN: 1},
		Entries: 3, Pair: pair{Is: replaced, Backend: 1, Held: true}},
	{Name: "new SYN on a client-RST pair creates a fresh pair with a new generation",
		Given: establishedThen(clientRST), In: newSYN, Action: dt.XDPTX, Out: toB2,
		Counted: counted{PairsReplaced: 1, PairsCreated: 1}, Closed: closures{ClientRST: 1},
		Entries: 2, Pair: pair{Is: replaced, Backend: 1}},
	{Name: "new SYN on a backend-RST pair creates a fresh pair with a new generation",
		Given: establishedThen(backendRST), In: newSYN, Action: dt.XDPTX, Out: toB2,
		Counted: counted{PairsReplaced: 1, PairsCreated: 1}, Closed: closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: replaced, Backend: 1}},
	{Name: "SYN on a half-closed pair reuses it",
		Given: establishedThen(clientFIN), In: syn, Action: dt.XDPTX, Out: toB1,
		Counted: counted{SYNReused: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC, Rev: revEst}},
	// The old reverse key was freed and taken by another pair meanwhile:
	// its entry (another generation) is left alone.
	{Name: "SYN replacing a terminal pair keeps a foreign reverse entry",
		Given: establishedThen(clientRST), Break: otherReverse, In: newSYN, Action: dt.XDPTX, Out: toB2,
		Counted: counted{PairsReplaced: 1, PairsCreated: 1}, Closed: closures{ClientRST: 1},
		Entries: 3, Pair: pair{Is: replaced, Backend: 1}},
}

var (
	// newSYN is the client's SYN of a new connection on the same tuple.
	newSYN = seg{Flags: dt.SYN, Seq: 90000, MSS: true}
	// toB2 is the SYN of the fresh pair toward backend 2.
	toB2 = out{To: toBackend, Backend: 1, Port: 8080, SNAT: 40000}
)

func TestReplaceFixtures(t *testing.T) { runFixtures(t, replaceFixtures) }
