package e2e

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xlbproject/xlb/test/lab"
)

const listenAddr = "192.0.2.10:80"

// echoThrough sends size random bytes through XLB to an echo backend and
// checks that every byte comes back in order.
func echoThrough(client *lab.Host, rng *rand.Rand, size int) error {
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(rng.Uint32())
	}
	return client.EchoCheck(listenAddr, msg, 30*time.Second)
}

func TestBalance(t *testing.T) {
	for _, topo := range []lab.Topology{lab.OneArm, lab.TwoArm} {
		t.Run(topo.String(), func(t *testing.T) {
			l := lab.New(t, lab.Options{Topology: topo})
			p := startXLB(t, l, labConfig(l, ""))
			snat := lab.XLBFrontIP
			if topo == lab.TwoArm {
				snat = lab.XLBBackIP
			}
			rng := rand.New(rand.NewPCG(7, uint64(topo)))

			// 1,000 sequential connections: strict round robin.
			for i := 0; i < 1000; i++ {
				if err := echoThrough(l.Client(), rng, 1+rng.IntN(16<<10)); err != nil {
					t.Fatalf("sequential connection %d: %v", i, err)
				}
			}
			waitCompleted(t, l, 1000)
			counts := []int{}
			for _, b := range l.Backends {
				counts = append(counts, b.Stats().Accepted)
			}
			if mx, mn := maxOf(counts), minOf(counts); mx-mn > 1 || sum(counts) != 1000 {
				t.Fatalf("sequential per-backend connections %v: want 1000 in total, differing by at most one", counts)
			}
			checkSources(t, l, snat)
			l.ResetStats()

			// 200 concurrent connections.
			var wg sync.WaitGroup
			errs := make(chan error, 200)
			for i := 0; i < 200; i++ {
				wg.Add(1)
				seed := uint64(i)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, 99))
					if err := echoThrough(l.Client(), r, 1+r.IntN(64<<10)); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("concurrent connection: %v", err)
			}
			waitCompleted(t, l, 200)
			checkSources(t, l, snat)
			stopXLB(t, l, p)
		})
	}
}

// waitCompleted polls until the backends have completed n connections in total.
func waitCompleted(t *testing.T, l *lab.Lab, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := 0
		for _, b := range l.Backends {
			done += b.Stats().Completed
		}
		if done >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends completed %d of %d connections", done, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkSources asserts every backend saw only the SNAT address as source.
func checkSources(t *testing.T, l *lab.Lab, snat netip.Addr) {
	t.Helper()
	for _, b := range l.Backends {
		for addr := range b.Stats().Remotes {
			if addr != snat {
				t.Fatalf("backend %s saw source %s, want only the XLB address %s", b.IP(), addr, snat)
			}
		}
	}
}

func sum(xs []int) (s int) {
	for _, x := range xs {
		s += x
	}
	return s
}

func maxOf(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func minOf(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}
