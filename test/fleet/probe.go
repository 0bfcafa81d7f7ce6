package fleet

import (
	"context"
	"sync"
	"time"
)

// Probe is one new connection of a Prober: connect and read the banner.
type Probe struct {
	Start, End time.Time
	Err        error
}

// Prober opens a new connection through the service every period, each
// bounded by timeout (without a retransmitted SYN when timeout is at most
// the 1 s initial retransmission timeout): a finer record of when new
// connections fail than the client's own short connections, which wait
// 5 s.
type Prober struct {
	l      *Lab
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	probes []Probe
}

// StartProber starts probing.
func (l *Lab) StartProber(period, timeout time.Duration) *Prober {
	p := &Prober{l: l, stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			p.wg.Add(1)
			go p.probe(timeout)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *Prober) probe(timeout time.Duration) {
	defer p.wg.Done()
	pr := Probe{Start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := p.l.dialService(ctx)
	if err == nil {
		c.c.Close()
	}
	pr.End, pr.Err = time.Now(), err
	p.mu.Lock()
	p.probes = append(p.probes, pr)
	p.mu.Unlock()
}

// Stop stops probing, waits for the probes under way and returns every
// probe, in the order they ended.
func (p *Prober) Stop() []Probe {
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Probe(nil), p.probes...)
}

// Outage summarizes probes: how many failed, the first failed probe's
// start, and when new connections succeeded again: the start of the
// first successful probe after the last failed one (zero when none
// failed, or none succeeded after).
func Outage(probes []Probe) (failed int, first, recovered time.Time) {
	var last time.Time
	for _, p := range probes {
		if p.Err == nil {
			continue
		}
		failed++
		if first.IsZero() || p.Start.Before(first) {
			first = p.Start
		}
		if p.Start.After(last) {
			last = p.Start
		}
	}
	if failed == 0 {
		return 0, first, recovered
	}
	for _, p := range probes {
		if p.Err == nil && p.Start.After(last) && (recovered.IsZero() || p.Start.Before(recovered)) {
			recovered = p.Start
		}
	}
	return failed, first, recovered
}
