package dataplane_test

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/dataplane"
	dt "github.com/xlbproject/xlb/pkg/dataplane/dptest"
)

// An interface whose slot of xlb_if_mac_slots another interface holds
// (their ifindexes collide modulo the slots) has its address read from
// xlb_if_macs: frames to it are balanced, frames to another MAC (the slot
// holder's among them) pass untouched (bpf/ours.h).
func TestOursThroughTheHash(t *testing.T) {
	e := dt.NewEnv(t, dt.Options{})
	k := dial(t, e, 33000, synOptions(7))
	k.handshake(synAckOptions(7), 502)
	other := [6]byte(otherHostMAC)
	if err := e.DP.FixtureGiveIfMACSlot(e.Front.Index, e.Front.Index+dataplane.MaxInterfaces, other); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 100)
	k.forward("client data", k.client(dt.ACK|dt.PSH, isnC+1, isnB+1, 502, data), counted{})
	s := k.client(dt.ACK|dt.PSH, isnC+101, isnB+1, 502, data)
	s.DstMAC = otherHostMAC
	step(t, e, "client data to the slot holder's MAC", s.Frame(), e.Front, dt.XDPPass, nil, notOurs)
}
