package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/metrics"
	"github.com/xlbproject/xlb/pkg/status"
	"github.com/xlbproject/xlb/pkg/weblisten"
)

// listeners are the admin (status) and metrics HTTP servers. They start
// before anything touches the network, so /healthz answers during startup
// and /readyz reports shutting_down through the whole shutdown window, and
// they stop last.
type listeners struct {
	admin     *status.Server
	metrics   *metrics.Server
	adminLn   net.Listener // handed to a hot-upgrade successor
	metricsLn net.Listener
	// sockLn is the admin unix socket (config admin.socket, issue 28),
	// handed to a successor too; sockPath its path, removed by stop
	// when this process created the socket or served it (ownSocket):
	// never by a successor that failed before taking over on its
	// predecessor's socket, nor after a hand-off (release).
	sockLn    *net.UnixListener
	sockPath  string
	ownSocket atomic.Bool
	// movedFrom is the predecessor's socket when the config moved it:
	// removed once this process serves (the predecessor serves it until
	// then, and keeps doing so if this process fails).
	movedFrom string
	wg        sync.WaitGroup
	released  atomic.Bool // stopAccepting closed the listeners: Serve's error is expected
	stopOnce  sync.Once
	stopErr   error
	// serviceAddrs are the services' listen addresses held on lo
	// (shared service addresses): a listener bound to the unspecified
	// address resets connections to them (weblisten.RefuseTo).
	serviceAddrs []netip.Addr
	adminAny     bool // the admin listener is bound to the unspecified address
	metricsAny   bool
}

// startListeners binds both listeners (a bind failure fails startup, and
// so does an invalid web config file) and serves them in the background.
// Both read only d.store. A listener inherited from a hot-upgrade
// predecessor is a plain TCP socket: this process applies its own web
// config file to it (TLS included).
func (d *runner) startListeners() (*listeners, error) {
	c := d.cfg
	web, warnings, err := weblisten.OpenListeners(c, d.log)
	if err != nil {
		return nil, err
	}
	var user, pw string
	if c.Admin.Auth != nil {
		user = c.Admin.Auth.Username
		var err error
		if pw, err = status.PasswordFromEnv(user); err != nil {
			return nil, err
		}
	}
	for _, w := range warnings {
		d.log.Warn(w)
	}
	l := &listeners{}
	l.admin, err = status.New(status.Options{Address: c.Admin.Address, Port: c.Admin.Port, Store: d.store,
		Username: user, Password: pw, WebConfig: web.Admin, Log: d.log.WithField("component", "status"), Drain: d.drain,
		Socket: c.Admin.Socket, AllowedHosts: c.Admin.AllowedHosts})
	if err != nil {
		return nil, err
	}
	var inheritedAdmin, inheritedMetrics net.Listener
	var inheritedSock *net.UnixListener
	if d.succ != nil {
		inheritedAdmin, inheritedMetrics, inheritedSock = d.succ.admin, d.succ.metrics, d.succ.socket
	}
	sockLn, created, movedFrom, err := d.inheritSocket(inheritedSock, c.Admin.Socket)
	if err != nil {
		return nil, err
	}
	l.sockLn, l.sockPath = sockLn, c.Admin.Socket
	l.ownSocket.Store(created)
	l.movedFrom = movedFrom
	adminLn, err := d.inherit(inheritedAdmin, l.admin.Addr(), l.admin.Listen)
	if err != nil {
		l.closeSocket()
		return nil, err
	}
	l.metrics, err = metrics.New(metrics.Options{Store: d.store, WebConfig: web.Metrics, OmitPerBackend: !d.cfg.Metrics.PerBackend, Log: d.log.WithField("component", "metrics")})
	if err != nil {
		adminLn.Close()
		l.closeSocket()
		return nil, err
	}
	metricsAddr := net.JoinHostPort(addrOrAny(c.Metrics.Address), strconv.Itoa(int(c.Metrics.Port)))
	metricsLn, err := d.inherit(inheritedMetrics, metricsAddr, func() (net.Listener, error) {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics listener %s: %w", metricsAddr, err)
		}
		return ln, nil
	})
	if err != nil {
		adminLn.Close()
		l.closeSocket()
		return nil, err
	}
	l.adminLn, l.metricsLn = adminLn, metricsLn
	l.adminAny, l.metricsAny = unspecified(c.Admin.Address), unspecified(c.Metrics.Address)
	for _, svc := range c.ServiceList() {
		ip := svc.Listen.IP
		if !ip.IsValid() || !(l.adminAny || l.metricsAny) || slices.Contains(l.serviceAddrs, ip) {
			continue
		}
		if ifname, err := hostnet.InterfaceOf(ip); err == nil && ifname == "lo" {
			l.serviceAddrs = append(l.serviceAddrs, ip)
			d.log.WithFields(map[string]any{"listen": ip.String(), "service": svc.Name}).Info("the listen address is a service address on lo: " +
				"the admin and metrics listeners bound to every address reset connections to it")
		}
	}
	d.log.WithFields(map[string]any{"admin": adminLn.Addr().String(), "metrics": metricsLn.Addr().String(),
		"admin_tls": web.Admin.TLS(), "metrics_tls": web.Metrics.TLS(), "admin_socket": l.sockPath}).Info("listeners bound")
	return l, nil
}

// inheritSocket returns the admin socket a hot-upgrade predecessor handed
// over when it is at path; otherwise (a first start, a predecessor
// without one, or a config that moved it: movedFrom is the old path) it
// closes this process's copy of the inherited one and creates the socket
// at path (status.ListenSocket); created says so.
func (d *runner) inheritSocket(inherited *net.UnixListener, path string) (ln *net.UnixListener, created bool, movedFrom string, err error) {
	if inherited != nil {
		old := inherited.Addr().String()
		if old == path {
			return inherited, false, "", nil
		}
		d.log.WithFields(map[string]any{"was": old, "now": path}).Info("the config moved the admin socket: creating the new one")
		inherited.Close()
		movedFrom = old
	}
	ln, err = status.ListenSocket(path)
	return ln, err == nil, movedFrom, err
}

// closeSocket closes the admin socket of a start that failed before
// serving, removing its file when this process created it.
func (l *listeners) closeSocket() {
	l.sockLn.Close()
	if l.ownSocket.Load() {
		status.RemoveSocket(l.sockPath)
	}
}

// serve serves both listeners in the background. A first start serves at
// once; a hot-upgrade successor only once it took over, since until then
// its predecessor answers on the same sockets (and is ready, while the
// successor would still say starting).
func (l *listeners) serve(log logrus.FieldLogger) {
	l.ownSocket.Store(true)
	if l.movedFrom != "" {
		if err := status.RemoveSocket(l.movedFrom); err != nil {
			log.WithError(err).Warn("remove the previous admin socket")
		}
	}
	l.wg.Add(3)
	go func() {
		defer l.wg.Done()
		if err := l.admin.ServeSocket(l.sockLn); err != nil && !l.released.Load() {
			log.WithError(err).Error("admin socket stopped")
		}
	}()
	go func() {
		defer l.wg.Done()
		if err := l.admin.Serve(l.refuseService(l.adminLn, l.adminAny)); err != nil && !l.released.Load() {
			log.WithError(err).Error("admin listener stopped")
		}
	}()
	go func() {
		defer l.wg.Done()
		if err := l.metrics.Serve(l.refuseService(l.metricsLn, l.metricsAny)); err != nil && !l.released.Load() {
			log.WithError(err).Error("metrics listener stopped")
		}
	}()
}

// inherit returns the listener a hot-upgrade predecessor handed over when
// it is bound to addr (host:port), so that no connection attempt meets a
// closed port during the hand-off; otherwise (first start, or the config
// moved the listener) it closes the inherited one and binds with listen.
func (d *runner) inherit(inherited net.Listener, addr string, listen func() (net.Listener, error)) (net.Listener, error) {
	if inherited != nil {
		if sameAddr(inherited.Addr().String(), addr) {
			return inherited, nil
		}
		d.log.WithFields(map[string]any{"was": inherited.Addr().String(), "now": addr}).Info("the config moved a listener: binding the new address")
		inherited.Close()
	}
	return listen()
}

// sameAddr compares two host:port addresses, taking every unspecified
// address (0.0.0.0, ::) as the same: Go reports a wildcard IPv4 listener
// as [::] on dual-stack hosts.
func sameAddr(a, b string) bool {
	pa, errA := netip.ParseAddrPort(a)
	pb, errB := netip.ParseAddrPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if pa.Port() != pb.Port() {
		return false
	}
	ia, ib := pa.Addr().Unmap(), pb.Addr().Unmap()
	return ia == ib || (ia.IsUnspecified() && ib.IsUnspecified())
}

// refuseService wraps a listener bound to the unspecified address so
// that it resets connections to the service addresses (serviceAddrs).
func (l *listeners) refuseService(ln net.Listener, wildcard bool) net.Listener {
	if !wildcard {
		return ln
	}
	return weblisten.RefuseTo(ln, l.serviceAddrs...)
}

// unspecified reports whether a listener's configured address binds
// every address (unset, 0.0.0.0 or ::).
func unspecified(a netip.Addr) bool { return !a.IsValid() || a.IsUnspecified() }

func addrOrAny(a netip.Addr) string {
	if !a.IsValid() {
		return "0.0.0.0"
	}
	return a.String()
}

// stop shuts both servers down, giving requests in flight up to 5 s, and
// returns after at most twice that whatever happens: the process is
// ending, and a listener that cannot close must not keep it.
func (l *listeners) stop() error {
	return within(10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := errors.Join(l.admin.Shutdown(ctx), l.metrics.Shutdown(ctx))
		l.wg.Wait()
		// Shutdown closes only what Serve saw: the socket of a start
		// that never served is closed here.
		l.sockLn.Close()
		if l.ownSocket.Load() {
			err = errors.Join(err, status.RemoveSocket(l.sockPath))
		}
		return err
	})
}

// releaseGrace is how long a process that handed over keeps serving the
// connections it accepted before it shuts its servers down: long enough
// for their first request to arrive.
const releaseGrace = 500 * time.Millisecond

// stopAccepting closes this process's descriptors of the listening
// sockets once its hot-upgrade successor serves on them: Serve returns
// and nothing more is accepted here, so every new connection (a status
// query right after `xlb reload` returned included) reaches the
// successor, which shares the sockets. Requests in flight are answered
// with "Connection: close" and idle keep-alive connections closed, so a
// client's next request reconnects to the successor too (Go's client
// retries a GET that meets a closed idle connection). It runs once.
func (l *listeners) stopAccepting() error {
	l.stopOnce.Do(func() {
		l.released.Store(true)
		l.stopErr = errors.Join(l.adminLn.Close(), l.metricsLn.Close(), l.sockLn.Close())
		l.wg.Wait()
		l.admin.EndKeepAlives()
		l.metrics.EndKeepAlives()
	})
	return l.stopErr
}

// release ends this process's part in the listening sockets after a
// hand-off, answering every connection it accepted: it stops accepting
// (stopAccepting), gives the connections already accepted releaseGrace
// to send their requests and get their answers, and only then shuts the
// servers down. net/http's Shutdown closes a connection whose request
// arrives after it began without an answer (the client reads EOF), so it
// must not start while one may still come.
func (l *listeners) release() error {
	return within(10*time.Second, func() error {
		err := l.stopAccepting()
		time.Sleep(releaseGrace)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return errors.Join(err, l.admin.Shutdown(ctx), l.metrics.Shutdown(ctx))
	})
}

// within runs f and returns its error, or an error once d has passed.
func within(d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("the listeners did not close within %v", d)
	}
}
