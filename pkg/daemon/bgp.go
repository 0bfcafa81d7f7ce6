package daemon

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/bgp"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/snapshot"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// bgpVerdictPeriod is how often the speaker's verdict is re-evaluated
// from the latest snapshot (readiness can change with any sample); a
// drain re-evaluates at once.
const bgpVerdictPeriod = 200 * time.Millisecond

// bgpStatusPeriod is how often the speaker's sessions are read into the
// snapshot (a GoBGP round trip each).
const bgpStatusPeriod = time.Second

// announcer runs the embedded BGP speaker for the daemon (DESIGN §6a,
// §9): the speaker announces each service's address while a service on
// it is ready, and nothing while the instance is drained or shutting down
// (bgp.Announce on the latest snapshot), withdraws first thing in a
// shutdown, and stops without a NOTIFICATION after a hand-off so the
// peers keep the routes for the successor (graceful restart). Without a
// bgp section every method does nothing.
type announcer struct {
	speaker *bgp.Speaker
	// prefixes are the speaker's (bgp.Options.Prefixes); services is the
	// announce rule's per-service input.
	prefixes []netip.Prefix
	services bgpServiceInput
	log      logrus.FieldLogger
	kick     chan struct{}
	cancel   context.CancelFunc
	done     sync.WaitGroup

	// mu orders the verdicts against Withdraw and Stop: after either,
	// no verdict reaches the speaker.
	mu     sync.Mutex
	closed bool
	// publishMu makes each read of the speaker's status and its
	// publication one step, so a later publication never carries an
	// earlier read.
	publishMu sync.Mutex
}

// startBGP creates and starts the speaker when the config has a bgp
// section: the prefixes are every service's address /32 (announce:
// [listen]) and the configured ones (bgpPrefixes), the router id the
// configured one or, auto,
// this host's own address toward the first peer (bgp.Options.RouterID;
// the listen address, shared by the fleet, would break RFC 6286's
// uniqueness). No session opens until the first verdict (runBGP). An error
// (an empty password variable, no route toward a peer) fails the start:
// an instance configured to announce itself and unable to is not silently
// left out of the fleet.
func (d *runner) startBGP(ctx context.Context) error {
	c := d.cfg.BGP
	if c == nil {
		return nil
	}
	addrs, services := d.bgpServiceSources()
	prefixes := bgpPrefixes(c, addrs)
	s, err := bgp.New(bgp.Options{Config: *c, RouterID: c.RouterID, Prefixes: prefixes, Log: d.log.WithField("component", "bgp")})
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	d.bgp.Store(&announcer{speaker: s, prefixes: prefixes, services: services, log: d.log, kick: make(chan struct{}, 1)})
	d.publishBGP(s.Status())
	return nil
}

// runBGP gives the speaker its first verdict (which opens the sessions)
// and keeps it current: every bgpVerdictPeriod, and at once after a
// drain or undrain (reevaluateBGP). It reads the sessions into the
// snapshot after each change of the verdict and every bgpStatusPeriod.
func (d *runner) runBGP() {
	a := d.bgp.Load()
	if a == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.done.Add(2)
	go func() {
		defer a.done.Done()
		verdict := time.NewTicker(bgpVerdictPeriod)
		defer verdict.Stop()
		var last []netip.Prefix
		decided := false
		for {
			want := bgpVerdict(d.store.Load(), time.Now(), a.prefixes, a.services)
			if !decided || !slices.Equal(want, last) {
				if a.setAnnounce(want) {
					last, decided = want, true
					// status shows the change at once, not at the next
					// status period
					d.publishSpeaker(a)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-verdict.C:
			case <-a.kick:
			}
		}
	}()
	go func() {
		defer a.done.Done()
		t := time.NewTicker(bgpStatusPeriod)
		defer t.Stop()
		for {
			d.publishSpeaker(a)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// bgpServiceInput is the announce rule's per-service input (DESIGN §9,
// issue 29 item 5): each serving service's listen address and whether
// that service is ready on the snapshot s at now (its own readiness,
// instance-wide reasons included). A service on the address of another
// keeps it announced while either is ready (bgp.Announce).
type bgpServiceInput func(s *snapshot.Snapshot, now time.Time) []bgp.ServiceReadiness

// bgpServiceSources returns the services' addresses the speaker may
// announce (fixed for this process: a reload is a new process) and the
// per-service input of its verdict: every serving service's resolved
// listen address (bgpPrefixes drops repeats), and each serving service's
// own readiness (snapshot.ServiceReady, the instance-wide reasons
// included). A draining service is no input: its address is withdrawn
// unless a serving service shares it.
func (d *runner) bgpServiceSources() ([]netip.Addr, bgpServiceInput) {
	var addrs []netip.Addr
	for _, r := range d.inst.Resolved.Services {
		addrs = append(addrs, r.Listen)
	}
	return addrs, func(s *snapshot.Snapshot, now time.Time) []bgp.ServiceReadiness {
		var out []bgp.ServiceReadiness
		for _, svc := range s.ServiceList() {
			if svc.State == snapshot.ServiceServing {
				out = append(out, bgp.ServiceReadiness{Name: svc.Name, Address: svc.Listen, Ready: s.ServiceReady(svc.Name, now)})
			}
		}
		return out
	}
}

// bgpPrefixes are the speaker's prefixes (bgp.Options.Prefixes): each
// service address once, as a /32 (a /128 for IPv6), when announce lists
// "listen", then the configured prefixes (config validation keeps them
// apart from the service addresses).
func bgpPrefixes(c *config.BGP, addrs []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	if c.AnnounceListen {
		for _, a := range addrs {
			if p := netip.PrefixFrom(a, a.BitLen()); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	for _, p := range c.Announce {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// bgpVerdict is the announce verdict on the snapshot s at now: the
// prefixes to announce (bgp.Announce), nothing while drained or shutting
// down.
func bgpVerdict(s *snapshot.Snapshot, now time.Time, prefixes []netip.Prefix, services bgpServiceInput) []netip.Prefix {
	return bgp.Announce(s.Drained, s.Lifecycle == api.ShuttingDown, prefixes, services(s, now))
}

// reevaluateBGP re-evaluates the verdict now (after a drain or undrain).
func (d *runner) reevaluateBGP() {
	a := d.bgp.Load()
	if a == nil {
		return
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// setAnnounce hands a verdict, the prefixes to announce, to the speaker
// unless it is withdrawn or stopped; it reports whether the speaker took
// it (a failure is logged and retried with the next evaluation).
func (a *announcer) setAnnounce(prefixes []netip.Prefix) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return true
	}
	if err := a.speaker.SetAnnounced(prefixes); err != nil {
		a.log.WithError(err).Warn("bgp: set the announce verdict")
		return false
	}
	return true
}

// withdrawBGP withdraws every prefix for good: the first step of the
// shutdown, before its RST window (DESIGN §6a). It returns when the
// prefixes left the peers' view (bgp.Speaker.WithdrawnAt): now, earlier
// (a drain before the stop), or zero when they were not announced.
func (d *runner) withdrawBGP() time.Time {
	a := d.bgp.Load()
	if a == nil {
		return time.Time{}
	}
	a.mu.Lock()
	a.closed = true
	err := a.speaker.Withdraw()
	a.mu.Unlock()
	if err != nil {
		d.log.WithError(err).Error("bgp: withdraw the routes")
	}
	return a.speaker.WithdrawnAt()
}

// withdrawWait is how much longer a stop forwards normally after the
// withdrawal at withdrawnAt (bgp.withdraw_delay_secs, issue 28): what is
// left of delay from withdrawnAt at now, so a drain some time before the
// stop counts; nothing when no route was withdrawn (withdrawnAt zero).
func withdrawWait(withdrawnAt time.Time, delay time.Duration, now time.Time) time.Duration {
	if withdrawnAt.IsZero() {
		return 0
	}
	return max(0, withdrawnAt.Add(delay).Sub(now))
}

// stopBGP ends the verdict and status loops and stops the speaker:
// planned after a hand-off (no NOTIFICATION; the peers keep the routes as
// stale until the successor's End-of-RIB, RFC 4724), !planned at the end
// of a shutdown (withdraw, then Cease).
func (d *runner) stopBGP(planned bool) {
	a := d.bgp.Load()
	if a == nil {
		return
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.done.Wait()
	a.mu.Lock()
	a.closed = true
	err := a.speaker.Stop(planned)
	a.mu.Unlock()
	if err != nil {
		d.log.WithError(err).Warn("bgp: stop the speaker")
	}
	d.publishSpeaker(a)
}

// publishSpeaker reads the speaker's status and publishes it.
func (d *runner) publishSpeaker(a *announcer) {
	a.publishMu.Lock()
	defer a.publishMu.Unlock()
	d.publishBGP(a.speaker.Status())
}

// publishBGP publishes the speaker's sessions and announced prefixes.
func (d *runner) publishBGP(st bgp.Status) {
	now := time.Now()
	b := &snapshot.BGP{Announced: st.Announced}
	for _, p := range st.Peers {
		e := snapshot.BGPPeer{Address: p.Address, ASN: p.ASN, State: p.State}
		if p.State == bgp.Established {
			e.Since = now.Add(-p.Uptime)
		}
		b.Peers = append(b.Peers, e)
	}
	d.update(func(s *snapshot.Snapshot) { s.BGP = b })
}
