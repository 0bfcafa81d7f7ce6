package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
)

// DefaultDebounce is the default Options.Debounce: at most one set per
// 50 ms. A rolling update changes many endpoints within a few
// milliseconds; one set carries them all, while a lone change is still
// sent at once.
const DefaultDebounce = 50 * time.Millisecond

// Options tunes a Provider. The zero value is the daemon's.
type Options struct {
	// Log receives the provider's warnings (API errors, logged when the
	// error changes) and, at debug level, client-go's own messages.
	// Default logrus.StandardLogger().
	Log logrus.FieldLogger
	// Client lists and watches the namespace's EndpointSlices; nil
	// builds one from the config (NewClient). Tests pass client-go's fake
	// or a client of internal/kubefake.
	Client Client
	// Resync is the informer's resync period (a resend of every cached
	// slice, for nothing but a recomputed set); 0: none.
	Resync time.Duration
	// Debounce is the shortest time between two sets sent: a change is
	// sent at once when the last set is older, otherwise the changes that
	// arrive meanwhile are sent together when it has passed. 0:
	// DefaultDebounce; negative: no coalescing.
	Debounce time.Duration
	// PortsFixed: every port mapping sets remote_port, so a slice need
	// not say which of its ports the backends serve on (PortRule.Fixed).
	PortsFixed bool
	// Proto is the service's proto, "tcp" ("" means it) or "udp": the
	// protocol of the slice ports the backends are reached on
	// (PortRule.Proto; issue 31).
	Proto string
	// Hub shares one informer between the providers of every service
	// that watches the same namespace through the same kubeconfig (or
	// Client); nil: a hub of this provider's own.
	Hub *Hub
	// Weights reads the Service's WeightsAnnotation: the service's
	// scheduler is weighted_round_robin or maglev. It needs get, list and
	// watch of Services; without it every endpoint has weight 1 and
	// Services are never read.
	Weights bool
	// ServiceClient lists and watches the namespace's Services when
	// Weights is set; nil builds one from the config (NewServiceClient).
	// Required with Client.
	ServiceClient ServiceClient
}

// Provider discovers backends from the EndpointSlices of one Service
// (provider.kubernetes, issue 14): the EndpointSlices labelled
// kubernetes.io/service-name=<service> that the informer of its
// namespace (shared through a Hub with the other services watching that
// namespace, issue 29) holds. It implements backend.Provider and
// backend.Reporter.
type Provider struct {
	cfg  config.KubernetesProvider
	opts Options
	sh   *shared

	// told are the Unusable problems already logged: each once.
	told map[string]bool
	// toldWeights are the weight annotation values whose bad entries
	// were warned about: each once.
	toldWeights map[string]bool
}

// New returns the provider of cfg. Without Options.Client, and unless its
// hub already has a client for the namespace and kubeconfig, it loads the
// kubeconfig file, or the in-cluster config when cfg.Kubeconfig is empty,
// and fails when that fails; it contacts no server (Run does). Every
// provider of a hub is created before the first one runs: the shared
// informer's selector lists their Services.
func New(cfg config.KubernetesProvider, o Options) (*Provider, error) {
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Debounce == 0 {
		o.Debounce = DefaultDebounce
	}
	if o.Hub == nil {
		o.Hub = NewHub()
	}
	sh, err := o.Hub.join(cfg, o)
	if err != nil {
		return nil, err
	}
	o.Log = o.Log.WithFields(logrus.Fields{"namespace": cfg.Namespace, "service": cfg.Service})
	return &Provider{cfg: cfg, opts: o, sh: sh, told: map[string]bool{}, toldWeights: map[string]bool{}}, nil
}

// Name implements backend.Provider.
func (p *Provider) Name() string { return "kubernetes" }

// LastError implements backend.Reporter: the last error of a list or
// watch request, or of a watch stream; nil once a later list or watch
// request succeeded. Meanwhile the provider keeps its last set.
func (p *Provider) LastError() error {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	return p.sh.lastErr
}

// Run implements backend.Provider. Once the informer has its first
// complete list it sends the eligible set (Eligible), even an empty one,
// then the complete set again whenever it changes, at most once per
// Options.Debounce. While the API server is unreachable client-go retries
// with backoff and the set stays as it was; after it comes back, a relist
// applies whatever changed meanwhile. It returns ctx.Err() when ctx ends.
//
// With Options.Weights the set carries the weights of the Service's
// annotation (Provider.weigh): the first set also waits for the Services
// informer's first list, unless a request of it fails first (forbidden:
// every weight 1, one warning), and a change of the annotation sends the
// set again.
func (p *Provider) Run(ctx context.Context, updates chan<- []backend.Backend) error {
	inf, err := p.sh.acquire()
	if err != nil {
		return err
	}
	defer p.sh.release()
	changed := make(chan struct{}, 1)
	wake := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	poke := func(obj any) {
		if p.concerns(obj) {
			wake()
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(old, cur any) { poke(old); poke(cur) },
		DeleteFunc: poke,
	})
	if err != nil {
		return fmt.Errorf("kubernetes: %w", err)
	}
	defer inf.RemoveEventHandler(reg)
	var svcStore cache.Store
	var svcSynced, svcFailed <-chan struct{}
	if p.opts.Weights {
		sinf, failed, err := p.sh.acquireServices()
		if err != nil {
			return err
		}
		defer p.sh.releaseServices()
		pokeService := func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*corev1.Service); !ok || s.Name == p.cfg.Service {
				wake()
			}
		}
		sreg, err := sinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    pokeService,
			UpdateFunc: func(_, cur any) { pokeService(cur) },
			DeleteFunc: pokeService,
		})
		if err != nil {
			return fmt.Errorf("kubernetes: %w", err)
		}
		defer sinf.RemoveEventHandler(sreg)
		svcStore, svcSynced, svcFailed = sinf.GetStore(), sreg.HasSyncedChecker().Done(), failed
	}

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-reg.HasSyncedChecker().Done():
	}
	if svcSynced != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-svcSynced:
		case <-svcFailed:
		}
	}
	var last []backend.Backend
	var lastSent time.Time
	for first := true; ; first = false {
		if !first {
			if err := p.awaitChange(ctx, changed, lastSent); err != nil {
				return err
			}
		}
		set, unusable := Eligible(p.serviceSlices(inf.GetStore()), PortRule{Name: p.cfg.PortName, Fixed: p.opts.PortsFixed, Proto: p.opts.Proto})
		p.tell(unusable)
		if svcStore != nil {
			p.weigh(set, p.service(svcStore))
		}
		if !first && slices.Equal(set, last) {
			continue
		}
		select {
		case updates <- set:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.opts.Log.WithField("eligible", len(set)).Debug("EndpointSlices changed; eligible set sent")
		last, lastSent = set, time.Now()
	}
}

// tell logs each slice that supplies no backend for want of a port, once
// per problem (the ports and the rule; a Service's slices share them), so
// a Service whose port the config does not match is not silently empty.
func (p *Provider) tell(unusable []Unusable) {
	for _, u := range unusable {
		problem := u.Problem()
		if p.told[problem] {
			continue
		}
		p.told[problem] = true
		p.opts.Log.WithField("slice", u.Slice).Warn("EndpointSlice supplies no backend: " + problem)
	}
}

// awaitChange waits for a change, then until Debounce after the last
// send, and consumes the changes that arrived meanwhile (the store has
// them all).
func (p *Provider) awaitChange(ctx context.Context, changed <-chan struct{}, lastSent time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	}
	if wait := p.opts.Debounce - time.Since(lastSent); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	select {
	case <-changed:
	default:
	}
	return nil
}

// rootCause is the innermost error err wraps: a request's error and the
// informer's report of it ("failed to list ...: ...") share it, so a
// repeated failure is logged once.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// concerns reports whether an informer event's object is a slice of the
// provider's Service (the shared informer holds other Services' too).
func (p *Provider) concerns(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	es, ok := obj.(*discoveryv1.EndpointSlice)
	return !ok || es.Labels[discoveryv1.LabelServiceName] == p.cfg.Service
}

// serviceSlices returns the informer's cached slices of the Service: the
// shared informer holds those of every Service of its hub, and the label
// is checked here anyway (client-go's fake watch does not filter).
func (p *Provider) serviceSlices(s cache.Store) []*discoveryv1.EndpointSlice {
	items := s.List()
	out := make([]*discoveryv1.EndpointSlice, 0, len(items))
	for _, it := range items {
		if es, ok := it.(*discoveryv1.EndpointSlice); ok && es.Labels[discoveryv1.LabelServiceName] == p.cfg.Service {
			out = append(out, es)
		}
	}
	return out
}
