package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/xlbproject/xlb/pkg/config"
)

// Hub shares informers between the providers of an instance's services
// (issue 29): one informer per namespace and kubeconfig (or Options.Client),
// listing and watching the EndpointSlices of every Service its providers
// name (kubernetes.io/service-name in (...)), however many services use
// that namespace. It is safe for concurrent use.
type Hub struct {
	mu        sync.Mutex
	informers map[hubKey]*shared
}

// NewHub returns a hub without informers.
func NewHub() *Hub { return &Hub{informers: map[hubKey]*shared{}} }

// hubKey is what makes two providers share an informer.
type hubKey struct {
	kubeconfig, namespace string
	client                Client // Options.Client; nil: the kubeconfig's
}

// shared is one namespace's informer and the Services its providers
// watch. It runs while some provider's Run does.
type shared struct {
	client   Client
	log      logrus.FieldLogger
	resync   time.Duration
	services []string // the label values the selector lists, sorted

	mu      sync.Mutex
	lastErr error
	refs    int
	inf     cache.SharedIndexInformer
	cancel  context.CancelFunc
	stopped chan struct{}

	// svcs is the namespace's Services informer, for the weight
	// annotation; nil while no provider reads weights (Options.Weights).
	svcs *services
}

// join returns the shared informer of cfg's namespace, creating it (and
// its client, unless o.Client is given) the first time, and adds cfg's
// Service to the ones it watches; with o.Weights, to the ones its
// Services informer reads too (a client of its own, unless
// o.ServiceClient is given). A Service cannot be added once the informer
// runs.
func (h *Hub) join(cfg config.KubernetesProvider, o Options) (*shared, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := hubKey{kubeconfig: cfg.Kubeconfig, namespace: cfg.Namespace, client: o.Client}
	if o.Client != nil {
		k.kubeconfig = ""
	}
	sh, ok := h.informers[k]
	if !ok {
		c := o.Client
		if c == nil {
			var err error
			if c, err = NewClient(cfg.Kubeconfig, cfg.Namespace); err != nil {
				return nil, err
			}
		}
		sh = &shared{client: c, log: o.Log.WithField("namespace", cfg.Namespace), resync: o.Resync}
		h.informers[k] = sh
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if o.Weights {
		if err := sh.readWeights(cfg, o); err != nil {
			return nil, err
		}
	}
	if slices.Contains(sh.services, cfg.Service) {
		return sh, nil
	}
	if sh.inf != nil {
		return nil, fmt.Errorf("kubernetes: Service %s/%s joins after the namespace's informer started", cfg.Namespace, cfg.Service)
	}
	sh.services = append(sh.services, cfg.Service)
	sort.Strings(sh.services)
	return sh, nil
}

// readWeights adds cfg's Service to the ones the Services informer
// reads, creating it (not running yet) the first time. The caller holds
// sh.mu.
func (sh *shared) readWeights(cfg config.KubernetesProvider, o Options) error {
	if sh.svcs == nil {
		c := o.ServiceClient
		switch {
		case c != nil:
		case o.Client != nil:
			return errors.New("kubernetes: Options.Client without Options.ServiceClient cannot read the weight annotation")
		default:
			var err error
			if c, err = NewServiceClient(cfg.Kubeconfig, cfg.Namespace); err != nil {
				return err
			}
		}
		sh.svcs = &services{client: c}
	}
	if slices.Contains(sh.svcs.names, cfg.Service) {
		return nil
	}
	if sh.svcs.inf != nil {
		return fmt.Errorf("kubernetes: Service %s/%s reads weights after the namespace's Services informer started", cfg.Namespace, cfg.Service)
	}
	sh.svcs.names = append(sh.svcs.names, cfg.Service)
	sort.Strings(sh.svcs.names)
	return nil
}

// acquire returns the running informer, starting it for the first
// provider; release stops it after the last.
func (sh *shared) acquire() (cache.SharedIndexInformer, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.inf != nil {
		sh.refs++
		return sh.inf, nil
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.New(&logSink{log: sh.log})))
	inf := cache.NewSharedIndexInformerWithOptions(sh.listWatch(ctx), &discoveryv1.EndpointSlice{},
		cache.SharedIndexInformerOptions{ResyncPeriod: sh.resync})
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		sh.observe(ctx, "informer: list and watch", err)
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	sh.inf, sh.cancel, sh.stopped, sh.refs = inf, cancel, make(chan struct{}), 1
	stopped := sh.stopped
	go func() { defer close(stopped); inf.RunWithContext(ctx) }()
	return inf, nil
}

func (sh *shared) release() {
	sh.mu.Lock()
	sh.refs--
	if sh.refs > 0 {
		sh.mu.Unlock()
		return
	}
	cancel, stopped := sh.cancel, sh.stopped
	// An informer does not run twice: the next acquire builds a new one.
	sh.inf, sh.cancel, sh.stopped = nil, nil, nil
	sh.mu.Unlock()
	cancel()
	<-stopped
}

// selector lists the hub's Services: kubernetes.io/service-name=<service>
// for one, kubernetes.io/service-name in (...) for several.
func (sh *shared) selector() string {
	if len(sh.services) == 1 {
		return labels.Set{discoveryv1.LabelServiceName: sh.services[0]}.String()
	}
	r, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, sh.services)
	if err != nil {
		// config validation admits only valid Service names
		panic(err)
	}
	return labels.NewSelector().Add(*r).String()
}

// listWatch is the informer's source: the client's list and watch of the
// Services' slices, each request's outcome recorded for LastError.
func (sh *shared) listWatch(ctx context.Context) cache.ListerWatcher {
	selector := sh.selector()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			l, err := sh.client.List(ctx, o)
			sh.observe(ctx, "list", err)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			w, err := sh.client.Watch(ctx, o)
			sh.observe(ctx, "watch", err)
			return w, err
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, sh.client)
}

// observe records the outcome of a request to the API server: an error
// becomes LastError of every provider of the informer (logged when it
// differs from the previous one), a success clears it. Errors after
// shutdown began are not the API's.
func (sh *shared) observe(ctx context.Context, op string, err error) {
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case err == nil && sh.lastErr != nil:
		sh.log.Info("Kubernetes API reachable again")
		sh.lastErr = nil
	case err != nil:
		err = fmt.Errorf("%s endpointslices: %w", op, err)
		if sh.lastErr == nil || rootCause(sh.lastErr).Error() != rootCause(err).Error() {
			sh.log.WithError(err).Warn("Kubernetes API request failed; keeping the last set of backends while client-go retries")
		}
		sh.lastErr = err
	}
}
