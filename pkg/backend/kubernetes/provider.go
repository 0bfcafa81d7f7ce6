package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

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
}

// Provider discovers backends from the EndpointSlices of one Service
// (provider.kubernetes, issue 14): an informer on discovery.k8s.io/v1
// EndpointSlices in the Service's namespace labelled
// kubernetes.io/service-name=<service>. It implements backend.Provider and
// backend.Reporter.
type Provider struct {
	cfg  config.KubernetesProvider
	opts Options

	mu      sync.Mutex
	lastErr error
	// told are the Unusable problems already logged: each once.
	told map[string]bool
}

// New returns the provider of cfg. Without Options.Client it loads the
// kubeconfig file, or the in-cluster config when cfg.Kubeconfig is empty,
// and fails when that fails; it contacts no server (Run does).
func New(cfg config.KubernetesProvider, o Options) (*Provider, error) {
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	if o.Debounce == 0 {
		o.Debounce = DefaultDebounce
	}
	if o.Client == nil {
		c, err := NewClient(cfg.Kubeconfig, cfg.Namespace)
		if err != nil {
			return nil, err
		}
		o.Client = c
	}
	o.Log = o.Log.WithFields(logrus.Fields{"namespace": cfg.Namespace, "service": cfg.Service})
	return &Provider{cfg: cfg, opts: o, told: map[string]bool{}}, nil
}

// Name implements backend.Provider.
func (p *Provider) Name() string { return "kubernetes" }

// LastError implements backend.Reporter: the last error of a list or
// watch request, or of a watch stream; nil once a later list or watch
// request succeeded. Meanwhile the provider keeps its last set.
func (p *Provider) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Run implements backend.Provider. Once the informer has its first
// complete list it sends the eligible set (Eligible), even an empty one,
// then the complete set again whenever it changes, at most once per
// Options.Debounce. While the API server is unreachable client-go retries
// with backoff and the set stays as it was; after it comes back, a relist
// applies whatever changed meanwhile. It returns ctx.Err() when ctx ends.
func (p *Provider) Run(ctx context.Context, updates chan<- []backend.Backend) error {
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, logr.New(&logSink{log: p.opts.Log})))
	inf := cache.NewSharedIndexInformerWithOptions(p.listWatch(ctx), &discoveryv1.EndpointSlice{},
		cache.SharedIndexInformerOptions{ResyncPeriod: p.opts.Resync})
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		p.observe(ctx, "informer: list and watch", err)
	}); err != nil {
		cancel()
		return fmt.Errorf("kubernetes: %w", err)
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(_, _ any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	if err != nil {
		cancel()
		return fmt.Errorf("kubernetes: %w", err)
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-stopped }()

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-reg.HasSyncedChecker().Done():
	}
	var last []backend.Backend
	var lastSent time.Time
	for first := true; ; first = false {
		if !first {
			if err := p.awaitChange(ctx, changed, lastSent); err != nil {
				return err
			}
		}
		set, unusable := Eligible(p.serviceSlices(inf.GetStore()), PortRule{Name: p.cfg.PortName, Fixed: p.opts.PortsFixed})
		p.tell(unusable)
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

// listWatch is the informer's source: the client's list and watch of the
// Service's slices, each request's outcome recorded for LastError.
func (p *Provider) listWatch(ctx context.Context) cache.ListerWatcher {
	selector := labels.Set{discoveryv1.LabelServiceName: p.cfg.Service}.String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			l, err := p.opts.Client.List(ctx, o)
			p.observe(ctx, "list", err)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			w, err := p.opts.Client.Watch(ctx, o)
			p.observe(ctx, "watch", err)
			return w, err
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, p.opts.Client)
}

// observe records the outcome of a request to the API server: an error
// becomes LastError (logged when it differs from the previous one), a
// success clears it. Errors after shutdown began are not the API's.
func (p *Provider) observe(ctx context.Context, op string, err error) {
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil && p.lastErr != nil:
		p.opts.Log.Info("Kubernetes API reachable again")
		p.lastErr = nil
	case err != nil:
		err = fmt.Errorf("%s endpointslices: %w", op, err)
		if p.lastErr == nil || rootCause(p.lastErr).Error() != rootCause(err).Error() {
			p.opts.Log.WithError(err).Warn("Kubernetes API request failed; keeping the last set of backends while client-go retries")
		}
		p.lastErr = err
	}
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

// serviceSlices returns the informer's cached slices of the Service. The
// label is checked again here: the server filters by it, but client-go's
// fake watch does not.
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
