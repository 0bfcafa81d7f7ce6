package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"
	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
)

// Options configure a Speaker.
type Options struct {
	// Config is the validated bgp block (pkg/config): ASNs, peers, hold
	// and restart times. Its announce entries are resolved into Prefixes
	// by the caller.
	Config config.BGP
	// RouterID is the BGP identifier (RFC 6286: unique within the AS):
	// Config.RouterID, an IPv4 address other than 0.0.0.0. The zero Addr
	// is auto: Start takes this host's own address toward the first peer
	// (NextHop of Config.Peers[0]), which differs from host to host, unlike
	// the shared listen address (issue 28).
	RouterID netip.Addr
	// Prefixes are the IPv4 prefixes this speaker may announce, each while
	// the verdict (SetAnnounced) names it: every service's address /32
	// when Config.AnnounceListen, then Config.Announce (DESIGN §9). At
	// least one, each once.
	Prefixes []netip.Prefix
	// NextHop returns this host's own IPv4 address toward peer (never
	// the shared listen address). Each session is opened from that
	// address, and it is the next hop of every route the peer learns.
	// Called once per peer by Start; nil is HostAddress(peer, Prefixes)
	// in the calling thread's network namespace. An address inside one
	// of Prefixes is refused: a session from the VIP would be answered
	// through the VIP's own route, to any host of the fleet.
	NextHop func(peer netip.Addr) (netip.Addr, error)
	// Log receives the speaker's and GoBGP's records; nil is logrus's
	// standard logger.
	Log logrus.FieldLogger
	// Password returns the value of an environment variable (a peer's
	// password_env); nil is os.Getenv.
	Password func(env string) string
}

// Speaker is the embedded BGP speaker of one XLB instance. Its methods are
// safe for concurrent use. Life cycle: New, Start, then any number of
// SetAnnounced (the daemon's verdict), Withdraw first thing in shutdown,
// and Stop once.
type Speaker struct {
	o         Options
	log       logrus.FieldLogger
	passwords map[netip.Addr]string

	mu  sync.Mutex
	srv *server.BgpServer
	// stopped is set by Stop; a stopped speaker refuses everything but
	// Status and Stop.
	stopped bool
	// locals holds each peer's local address (Options.NextHop), resolved
	// by Start.
	locals map[netip.Addr]netip.Addr
	// routerID is Options.RouterID, or the auto one Start resolved.
	routerID netip.Addr
	// verdict is the last SetAnnounced, in Options.Prefixes' order;
	// decided says SetAnnounced was called at all; withdrawn is set by
	// Withdraw and never cleared.
	verdict            []netip.Prefix
	decided, withdrawn bool
	// announced are the prefixes whose paths are in GoBGP's table, in
	// Options.Prefixes' order; sessions says the peers were added (at the
	// first verdict).
	announced []netip.Prefix
	sessions  bool
	// withdrawnAt is when the last announced path left GoBGP's table
	// (zero: never announced, or some announced now).
	withdrawnAt time.Time
}

// MaxPasswordLen is the longest TCP MD5 key Linux accepts
// (TCP_MD5SIG_MAXKEYLEN).
const MaxPasswordLen = 80

// New checks o and reads the peers' passwords from the environment. It
// fails when a peer names a password_env whose variable is empty or
// longer than MaxPasswordLen (issue 15: startup fails), when RouterID is
// set and not a usable IPv4 address, when there is no prefix or a prefix is not
// IPv4 or given twice, or when there is no peer.
func New(o Options) (*Speaker, error) {
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Password == nil {
		o.Password = os.Getenv
	}
	if o.NextHop == nil {
		prefixes := slices.Clone(o.Prefixes)
		o.NextHop = func(peer netip.Addr) (netip.Addr, error) { return HostAddress(peer, prefixes) }
	}
	c := o.Config
	switch {
	case o.RouterID.IsValid() && (!o.RouterID.Is4() || o.RouterID.IsUnspecified()):
		return nil, fmt.Errorf("bgp: router id %v: want an IPv4 address other than 0.0.0.0", o.RouterID)
	case len(o.Prefixes) == 0:
		return nil, errors.New("bgp: no prefix to announce")
	case len(c.Peers) == 0:
		return nil, errors.New("bgp: no peer")
	}
	for i, p := range o.Prefixes {
		if !p.IsValid() || !p.Addr().Is4() {
			return nil, fmt.Errorf("bgp: prefix %v: want an IPv4 prefix", p)
		}
		if slices.Contains(o.Prefixes[:i], p) {
			return nil, fmt.Errorf("bgp: prefix %v given twice", p)
		}
	}
	passwords := map[netip.Addr]string{}
	for i, p := range c.Peers {
		if p.PasswordEnv == "" {
			continue
		}
		pw := o.Password(p.PasswordEnv)
		switch {
		case pw == "":
			return nil, fmt.Errorf("bgp: bgp.peers[%d] (%s): password_env %s: the environment variable is empty or unset", i, p.Address, p.PasswordEnv)
		case len(pw) > MaxPasswordLen:
			return nil, fmt.Errorf("bgp: bgp.peers[%d] (%s): password_env %s: the password is %d bytes, TCP MD5 takes at most %d", i, p.Address, p.PasswordEnv, len(pw), MaxPasswordLen)
		}
		passwords[p.Address] = pw
	}
	return &Speaker{o: o, log: o.Log, passwords: passwords}, nil
}

// Start starts GoBGP (no BGP or gRPC listener, nothing imported from
// peers) and resolves each peer's local address with Options.NextHop, the
// first peer's being the router id when Options.RouterID is auto. It
// opens no session and announces nothing: the sessions open at the first
// SetAnnounced, so that the first End-of-RIB a peer receives already
// carries the verdict (a peer drops a predecessor's stale routes at
// End-of-RIB, RFC 4724; an early, empty one would take the VIP off the
// router during a hot upgrade). ctx bounds the start only. Start fails
// when called twice, when NextHop fails or returns an unusable address,
// or when GoBGP refuses the configuration; nothing keeps running then.
func (s *Speaker) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil || s.stopped {
		return errors.New("bgp: Start called twice")
	}
	locals, err := s.localAddresses()
	if err != nil {
		return err
	}
	id := s.o.RouterID
	if !id.IsValid() {
		id = locals[s.o.Config.Peers[0].Address]
	}
	lvl := &slog.LevelVar{}
	lvl.Set(gobgpLogLevel)
	srv := server.NewBgpServer(server.LoggerOption(newSlogLogger(s.log), lvl))
	go srv.Serve()
	err = srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:        s.o.Config.LocalASN,
		RouterId:   id.String(),
		ListenPort: -1, // no listener: sessions are opened from here
	}})
	if err == nil {
		err = setImportPolicy(ctx, srv)
	}
	if err != nil {
		srv.Stop()
		return fmt.Errorf("bgp: start: %w", err)
	}
	s.srv, s.locals, s.routerID = srv, locals, id
	s.log.WithFields(logrus.Fields{"asn": s.o.Config.LocalASN, "router_id": id, "router_id_auto": !s.o.RouterID.IsValid(), "peers": len(s.o.Config.Peers)}).
		Info("bgp speaker started")
	return nil
}

// RouterID is the BGP identifier the speaker uses: Options.RouterID, or
// the auto one Start resolved (the zero Addr before Start).
func (s *Speaker) RouterID() netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.routerID
}

// localAddresses calls NextHop for every peer.
func (s *Speaker) localAddresses() (map[netip.Addr]netip.Addr, error) {
	locals := make(map[netip.Addr]netip.Addr, len(s.o.Config.Peers))
	for _, p := range s.o.Config.Peers {
		a, err := s.o.NextHop(p.Address)
		if err != nil {
			return nil, fmt.Errorf("bgp: this host's address toward peer %s: %w", p.Address, err)
		}
		if !a.Is4() || a.IsUnspecified() {
			return nil, fmt.Errorf("bgp: this host's address toward peer %s is %v: want an IPv4 address", p.Address, a)
		}
		for _, pfx := range s.o.Prefixes {
			if pfx.Contains(a) {
				return nil, fmt.Errorf("bgp: this host's address toward peer %s is %s, inside the announced %s: it must be the host's own address, not the VIP", p.Address, a, pfx)
			}
		}
		locals[p.Address] = a
	}
	return locals, nil
}

// SetAnnounced sets the daemon's verdict, Announce(...): the prefixes,
// of Options.Prefixes, to announce now. Each one in the set is announced
// to every established peer (and to each peer once its session is
// established); each one not in it is withdrawn, the others untouched
// (DESIGN §9: a service that loses its last backend withdraws only its
// own address). An empty set withdraws everything. The first call opens
// the sessions. After Withdraw nothing is announced whatever the verdict.
// It fails before Start, after Stop, for a prefix not in Options.Prefixes,
// or when GoBGP refuses the paths.
func (s *Speaker) SetAnnounced(prefixes []netip.Prefix) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.running(); err != nil {
		return err
	}
	for _, p := range prefixes {
		if !slices.Contains(s.o.Prefixes, p) {
			return fmt.Errorf("bgp: %s is not one of the speaker's prefixes %v", p, s.o.Prefixes)
		}
	}
	s.verdict, s.decided = s.ordered(prefixes), true
	return s.apply()
}

// ordered returns the prefixes of Options.Prefixes that are in set, in
// Options.Prefixes' order.
func (s *Speaker) ordered(set []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.o.Prefixes {
		if slices.Contains(set, p) {
			out = append(out, p)
		}
	}
	return out
}

// Withdraw withdraws the prefixes from every peer for good: the first
// step of a shutdown, before its RST window (DESIGN §6a). The sessions
// stay up until Stop. It fails before Start or after Stop.
func (s *Speaker) Withdraw() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.running(); err != nil {
		return err
	}
	s.withdrawn = true
	return s.apply()
}

// WithdrawnAt is when the last announced prefix left the peers' view:
// the UPDATE withdrawing it was handed to every established session at
// that time. Zero while some prefix is announced or when none ever was; a
// stop waits bgp.withdraw_delay_secs from it before its RST window.
func (s *Speaker) WithdrawnAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.withdrawnAt
}

func (s *Speaker) running() error {
	switch {
	case s.stopped:
		return errors.New("bgp: speaker stopped")
	case s.srv == nil:
		return errors.New("bgp: speaker not started")
	}
	return nil
}

// apply brings GoBGP's table in line with verdict and withdrawn,
// withdrawing before announcing, then opens the sessions once a verdict
// exists.
func (s *Speaker) apply() error {
	var want []netip.Prefix
	if !s.withdrawn {
		want = s.verdict
	}
	var add, del []netip.Prefix
	for _, p := range s.o.Prefixes {
		switch w, a := slices.Contains(want, p), slices.Contains(s.announced, p); {
		case w && !a:
			add = append(add, p)
		case !w && a:
			del = append(del, p)
		}
	}
	if len(del) > 0 {
		if err := s.deletePaths(del); err != nil {
			return err
		}
		s.announced = slices.DeleteFunc(s.announced, func(p netip.Prefix) bool { return slices.Contains(del, p) })
		if len(s.announced) == 0 {
			s.withdrawnAt = time.Now()
		}
		s.log.WithFields(logrus.Fields{"prefixes": del, "announced": s.announced}).Info("bgp routes withdrawn")
	}
	if len(add) > 0 {
		if err := s.addPaths(add); err != nil {
			return err
		}
		s.announced, s.withdrawnAt = s.ordered(append(slices.Clone(s.announced), add...)), time.Time{}
		s.log.WithFields(logrus.Fields{"prefixes": add, "announced": s.announced}).Info("bgp routes announced")
	}
	if s.decided && !s.sessions {
		if err := s.addPeers(); err != nil {
			return err
		}
		s.sessions = true
	}
	return nil
}

// Stop stops the speaker. planned (a hot upgrade or a restart) closes
// every session without a NOTIFICATION where graceful restart was
// negotiated, so the peers keep the routes as stale for the restart time
// until a successor's End-of-RIB replaces them; nothing is withdrawn.
// !planned withdraws the prefixes, then closes every session with a Cease
// NOTIFICATION, so the peers drop the routes at once. Stop before Start
// and a second Stop do nothing.
func (s *Speaker) Stop(planned bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.srv == nil {
		s.stopped = true
		return nil
	}
	var errs []error
	if !planned {
		s.withdrawn = true
		errs = append(errs, s.apply())
	}
	// StopBgp with AllowGracefulRestart sends no NOTIFICATION to peers
	// that negotiated graceful restart. GoBGP's own Stop would send every
	// peer a Cease "peer de-configured"; it is not called, and GoBGP's
	// idle BFD goroutine is left to the process's exit.
	err := s.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: planned})
	errs = append(errs, err)
	s.stopped = true
	s.log.WithField("planned", planned).Info("bgp speaker stopped")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bgp: stop: %w", err)
	}
	return nil
}
