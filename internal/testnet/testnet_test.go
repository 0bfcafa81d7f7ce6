package testnet

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// Generous bounds: the machine is shared and noisy. Nothing here asserts
// how long anything takes.
const waitLong = 30 * time.Second

func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// checkGone asserts that nothing named with prefix is left.
func checkGone(t *testing.T, prefix string) {
	t.Helper()
	if left, err := Leftovers(prefix); err != nil || len(left) > 0 {
		t.Errorf("left behind: %v, %v", left, err)
	}
}

// pair is a two-host topology for tests: a (192.0.2.20/24, eth0) and b
// (192.0.2.31/24, eth0) joined directly.
type pair struct {
	*Topology
	a, b *Host
}

// newTopology returns an empty topology with a random "xt" prefix; it
// closes it and checks that nothing is left in t.Cleanup.
func newTopology(t *testing.T) *Topology { return NewForTest(t, "xt") }

// newPair builds a pair on newTopology.
func newPair(t *testing.T) pair {
	t.Helper()
	tn := newTopology(t)
	p := pair{Topology: tn}
	err := tn.Build([]Step{
		{Name: "hosts", Run: func() (err error) {
			if p.a, err = tn.AddHost("a"); err == nil {
				p.b, err = tn.AddHost("b")
			}
			return err
		}},
		{Name: "pair", Run: func() error {
			return tn.Pair(p.a, "eth0", netip.PrefixFrom(ClientIP(0), 24), p.b, "eth0", netip.PrefixFrom(OneArmBackendIP(0), 24))
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
