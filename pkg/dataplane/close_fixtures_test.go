package dataplane_test

import (
	"testing"

	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// Close-tracking fixtures (seed "Orderly close and reset"): FIN and RST are
// recorded on the pair's forward entry and always forwarded, the connection
// is counted once, by initiator and reason, when it becomes terminal.
// Removal is the maintenance loop's job (pkg/maintenance): every pair here
// stays in the map. A new SYN on a closed pair: replace_test.go.
var closeFixtures = []fixture{
	// One FIN: recorded, forwarded, not terminal.
	{Name: "client FIN is forwarded and recorded; the pair stays open",
		Given: established, In: clientFIN, Action: dt.XDPTX, Out: toB1,
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC, Rev: revEst}},
	{Name: "backend FIN is forwarded and recorded with the backend as initiator",
		Given: established, In: backendFIN, Action: dt.XDPTX, Out: toCli,
		Entries: 2, Pair: pair{Is: kept, Flags: est | finB | initB, Rev: revEst}},

	// Both FINs: terminal once (CLOSED_FIN), counted by the first FIN's
	// side. The client's FIN first leaves the backend no TIME_WAIT: the
	// second FIN frees the SNAT port.
	{Name: "backend FIN after the client's closes the pair as a client FIN",
		Given: establishedThen(clientFIN), In: backendFIN2, Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedClientFIN: 1}, Closed: closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst | freed, Terminal: true}},
	// A simultaneous close (issue 27 finding 7): the backend's FIN does
	// not acknowledge the client's, because the backend sent it before
	// the client's arrived. The backend then goes through CLOSING to
	// TIME-WAIT (RFC 9293 §3.6) as if it had closed first, so the SNAT port
	// stays taken. Only a backend FIN that acknowledges the client's FIN,
	// data and all, frees it.
	{Name: "simultaneous close: a backend FIN that does not acknowledge the client's FIN keeps the SNAT port",
		Given: establishedThen(clientFIN), In: backendFIN, Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedClientFIN: 1}, Closed: closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst, Terminal: true}},
	{Name: "a backend FIN acknowledging the client's FIN with data frees the SNAT port",
		Given: establishedThen(clientDataFIN), In: seg{From: backend, Flags: dt.FIN | dt.ACK, Seq: 5001, Ack: 1001 + uint32(len(payload)) + 1},
		Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedClientFIN: 1}, Closed: closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst | freed, Terminal: true}},
	{Name: "simultaneous close: a backend FIN acknowledging the client's data but not its FIN keeps the SNAT port",
		Given: establishedThen(clientDataFIN), In: seg{From: backend, Flags: dt.FIN | dt.ACK, Seq: 5001, Ack: 1001 + uint32(len(payload))},
		Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedClientFIN: 1}, Closed: closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst, Terminal: true}},
	{Name: "client FIN after the backend's closes the pair as a backend FIN",
		Given: establishedThen(backendFIN), In: clientFIN2, Action: dt.XDPTX, Out: toB1,
		Counted: counted{ClosedBackendFIN: 1}, Closed: closures{BackendFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finB | initB | finC | closedF, Rev: revEst, Terminal: true}},

	// RST from either side: terminal (CLOSED_RST), counted by its sender,
	// forwarded; the SNAT port is free.
	{Name: "client RST is forwarded to the backend and counted as a client RST",
		Given: established, In: clientRST, Action: dt.XDPTX, Out: toB1,
		Counted: counted{ClosedClientRST: 1}, Closed: closures{ClientRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstC | closedR, Rev: revEst | freed, Terminal: true}},
	{Name: "backend RST is forwarded to the client and counted as a backend RST",
		Given: established, In: backendRST, Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedBackendRST: 1}, Closed: closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstB | initB | closedR, Rev: revEst | freed, Terminal: true}},
	{Name: "backend RST after the client's FIN is counted as a backend RST",
		Given: establishedThen(clientFIN), In: backendRST, Action: dt.XDPTX, Out: toCli,
		Counted: counted{ClosedBackendRST: 1}, Closed: closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | rstB | closedR, Rev: revEst | freed, Terminal: true}},
	// The kind of a terminal pair never changes: a RST after both FINs is
	// recorded and forwarded, but the pair stays in time-wait, uncounted
	// (and a port the backend holds in TIME_WAIT stays taken).
	{Name: "RST after both FINs is forwarded and leaves the pair CLOSED_FIN",
		Given: establishedThen(clientFIN, backendFIN2), In: backendRST2, Action: dt.XDPTX, Out: toCli,
		Closed:  closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF | rstB, Rev: revEst | freed, Terminal: true}},
	{Name: "client RST after both FINs leaves the pair CLOSED_FIN",
		Given: establishedThen(backendFIN, clientFIN2), In: clientRST2, Action: dt.XDPTX, Out: toB1,
		Closed:  closures{BackendFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finB | initB | finC | closedF | rstC, Rev: revEst, Terminal: true}},

	// An incoming RST is never answered with a RST: the output of a RST is
	// the RST itself (flags RST, seq 5001, ack 0), rewritten toward the
	// other side, and no reset is counted as generated.
	{Name: "RST is answered by nothing: XDP_TX of the rewritten RST, not a generated one",
		Given: established, In: backendRST, Action: dt.XDPTX, Out: out{To: toClient, Port: 80},
		Counted: counted{ClosedBackendRST: 1, ShutdownResets: 0}, Closed: closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstB | initB | closedR, Rev: revEst | freed, Terminal: true}},
	{Name: "client RST without a pair passes untouched", In: clientRST, Action: dt.XDPPass},
	{Name: "backend RST to an SNAT port without a pair passes untouched", In: backendRST, Action: dt.XDPPass},
	{Name: "FIN without a pair passes untouched", In: clientFIN, Action: dt.XDPPass},

	// Half-close: the open direction keeps working, byte for byte.
	{Name: "client data after the backend's FIN is rewritten byte-exact",
		Given: establishedThen(backendFIN), In: seg{Flags: dt.ACK | dt.PSH, Seq: 1001, Ack: 5002, Data: payload}, Action: dt.XDPTX, Out: toB1,
		Entries: 2, Pair: pair{Is: kept, Flags: est | finB | initB, Rev: revEst}},
	{Name: "backend data after the client's FIN is rewritten byte-exact",
		Given: establishedThen(clientFIN), In: seg{From: backend, Flags: dt.ACK | dt.PSH, Seq: 5001, Ack: 1002, Data: bulk}, Action: dt.XDPTX, Out: toCli,
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC, Rev: revEst}},

	// A terminal forward entry keeps the moment it became terminal as its
	// last_seen (the time-wait and reset clocks start there); packets
	// through the reverse entry still move the reverse entry's.
	{Name: "final ACK in time-wait is forwarded and keeps the forward entry's terminal last_seen",
		Given: establishedThen(clientFIN, backendFIN2), In: seg{Flags: dt.ACK, Seq: 1002, Ack: 5002}, Action: dt.XDPTX, Out: toB1,
		Closed:  closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst | freed, Terminal: true, Frozen: true}},
	{Name: "backend ACK in time-wait moves only the reverse entry's last_seen",
		Given: establishedThen(clientFIN, backendFIN2), In: seg{From: backend, Flags: dt.ACK, Seq: 5002, Ack: 1002}, Action: dt.XDPTX, Out: toCli,
		Closed:  closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst | freed, Terminal: true, Frozen: true}},
	{Name: "client data after a backend RST keeps the forward entry's terminal last_seen",
		Given: establishedThen(backendRST), In: seg{Flags: dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: payload}, Action: dt.XDPTX, Out: toB1,
		Closed:  closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstB | initB | closedR, Rev: revEst | freed, Terminal: true, Frozen: true}},

	// Retransmissions are recorded once.
	{Name: "retransmitted first FIN changes nothing",
		Given: establishedThen(clientFIN), In: clientFIN, Action: dt.XDPTX, Out: toB1,
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC, Rev: revEst}},
	{Name: "retransmitted FIN after both FINs is forwarded and counted once",
		Given: establishedThen(clientFIN, backendFIN2), In: clientFIN, Action: dt.XDPTX, Out: toB1,
		Closed:  closures{ClientFIN: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | finC | finB | closedF, Rev: revEst | freed, Terminal: true}},
	{Name: "retransmitted RST is forwarded and counted once",
		Given: establishedThen(backendRST), In: backendRST, Action: dt.XDPTX, Out: toCli,
		Closed:  closures{BackendRST: 1},
		Entries: 2, Pair: pair{Is: kept, Flags: est | rstB | initB | closedR, Rev: revEst | freed, Terminal: true}},

	// A FIN or RST whose counterpart is missing (or belongs to another
	// generation) is forwarded with the surviving recipe and counted as an
	// invariant violation, never dropped (with no receiver's window to
	// check, a RST is taken as it comes). A lone forward entry still holds
	// the close state, so a client RST on it is also counted as a closure; a
	// lone reverse entry has nowhere to record anything.
	{Name: "client FIN with the reverse entry missing is forwarded and counted as an invariant violation",
		Given: established, Break: dropReverse, In: clientFIN, Action: dt.XDPTX, Out: toB1,
		Counted: counted{InvariantViolations: 1},
		Entries: 1, Pair: pair{Is: lone, Flags: est | finC}},
	{Name: "backend FIN with the forward entry missing is forwarded and counted as an invariant violation",
		Given: established, Break: dropForward, In: backendFIN, Action: dt.XDPTX, Out: toCli,
		Counted: counted{InvariantViolations: 1},
		Entries: 1, Pair: pair{Is: none}},
	{Name: "client RST with the reverse entry missing is forwarded and counted as an invariant violation",
		Given: established, Break: dropReverse, In: clientRST, Action: dt.XDPTX, Out: toB1,
		Counted: counted{InvariantViolations: 1, ClosedClientRST: 1}, Closed: closures{ClientRST: 1},
		Entries: 1, Pair: pair{Is: lone, Flags: est | rstC | closedR}},
	{Name: "backend RST with the forward entry missing is forwarded and counted as an invariant violation",
		Given: established, Break: dropForward, In: backendRST, Action: dt.XDPTX, Out: toCli,
		Counted: counted{InvariantViolations: 1},
		Entries: 1, Pair: pair{Is: none}},
	{Name: "backend FIN on a reverse entry of another generation is forwarded and not recorded on the forward entry",
		Given: established, Break: otherReverse, In: backendFIN, Action: dt.XDPTX, Out: toCli,
		Counted: counted{InvariantViolations: 1},
		Entries: 2, Pair: pair{Is: lone, Flags: est}},
}

// clientDataFIN is the client's FIN carrying payload: its end, the
// acknowledgement that covers it, is 1001 + len(payload) + 1.
var clientDataFIN = seg{Flags: dt.FIN | dt.ACK | dt.PSH, Seq: 1001, Ack: 5001, Data: payload}

// bulk is a full-sized payload that is not all one byte value.
var bulk = func() []byte {
	b := make([]byte, 1400)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}()

func TestCloseFixtures(t *testing.T) { runFixtures(t, closeFixtures) }
