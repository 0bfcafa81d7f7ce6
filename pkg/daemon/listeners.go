package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/xlbproject/xlb/pkg/metrics"
	"github.com/xlbproject/xlb/pkg/status"
)

// listeners are the admin (status) and metrics HTTP servers. They start
// before anything touches the network, so /healthz answers during startup
// and /readyz reports shutting_down through the whole shutdown window, and
// they stop last.
type listeners struct {
	admin   *status.Server
	metrics *metrics.Server
	wg      sync.WaitGroup
}

// startListeners binds both listeners (a bind failure fails startup) and
// serves them in the background. Both read only d.store.
func (d *runner) startListeners() (*listeners, error) {
	c := d.cfg
	var user, pw string
	if c.Admin.Auth != nil {
		user = c.Admin.Auth.Username
		var err error
		if pw, err = status.PasswordFromEnv(user); err != nil {
			return nil, err
		}
	}
	for _, w := range status.ListenerWarnings(c.Admin.Address, user != "") {
		d.log.Warn(w)
	}
	l := &listeners{}
	var err error
	l.admin, err = status.New(status.Options{Address: c.Admin.Address, Port: c.Admin.Port, Store: d.store,
		Username: user, Password: pw, Log: d.log.WithField("component", "status")})
	if err != nil {
		return nil, err
	}
	adminLn, err := l.admin.Listen()
	if err != nil {
		return nil, err
	}
	l.metrics, err = metrics.New(metrics.Options{Store: d.store, Log: d.log.WithField("component", "metrics")})
	if err != nil {
		adminLn.Close()
		return nil, err
	}
	metricsAddr := net.JoinHostPort(addrOrAny(c.Metrics.Address), strconv.Itoa(int(c.Metrics.Port)))
	metricsLn, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		adminLn.Close()
		return nil, fmt.Errorf("metrics listener %s: %w", metricsAddr, err)
	}
	d.log.WithFields(map[string]any{"admin": adminLn.Addr().String(), "metrics": metricsLn.Addr().String()}).Info("listeners bound")
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		if err := l.admin.Serve(adminLn); err != nil {
			d.log.WithError(err).Error("admin listener stopped")
		}
	}()
	go func() {
		defer l.wg.Done()
		if err := l.metrics.Serve(metricsLn); err != nil {
			d.log.WithError(err).Error("metrics listener stopped")
		}
	}()
	return l, nil
}

func addrOrAny(a netip.Addr) string {
	if !a.IsValid() {
		return "0.0.0.0"
	}
	return a.String()
}

// stop shuts both servers down, giving requests in flight up to 5 s.
func (l *listeners) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := errors.Join(l.admin.Shutdown(ctx), l.metrics.Shutdown(ctx))
	l.wg.Wait()
	return err
}
