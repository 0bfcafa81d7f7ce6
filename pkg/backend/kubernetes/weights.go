package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/xlbproject/xlb/pkg/backend"
)

// WeightsAnnotation is the Service annotation that sets the weights of a
// weighted_round_robin or maglev service's endpoints (issue 30):
// comma-separated ADDRESS=WEIGHT entries, spaces allowed, weights 0..256,
// e.g. "10.0.0.5=3, 10.0.0.6=0". An endpoint without an entry has weight
// 1; weight 0 takes no new connections (the backend is listed draining,
// reason "weight 0"). Only services with a table scheduler read it
// (Options.Weights), so round_robin needs no access to Services.
const WeightsAnnotation = "xlbproject.github.io/weights"

// maxWeight is the largest weight an annotation entry may give.
const maxWeight = 256

// Weights is a parsed WeightsAnnotation value.
type Weights struct {
	// ByAddr are the weights of the well-formed entries.
	ByAddr map[netip.Addr]uint16
	// Problems describe the bad entries, one each: an address that does
	// not parse, a weight that is not a number within 0..256, an address
	// given twice. An endpoint a bad entry names keeps weight 1.
	Problems []string
}

// ParseWeights parses a WeightsAnnotation value. Empty entries (a
// trailing comma) are ignored; a bad entry is left out of ByAddr and
// described in Problems, and an address given twice is left out
// altogether.
func ParseWeights(value string) Weights {
	w := Weights{ByAddr: map[netip.Addr]uint16{}}
	entries := map[netip.Addr]int{} // entries per address
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		addrText, weightText, ok := strings.Cut(entry, "=")
		if !ok {
			w.Problems = append(w.Problems, fmt.Sprintf("%q: want ADDRESS=WEIGHT", entry))
			continue
		}
		addrText, weightText = strings.TrimSpace(addrText), strings.TrimSpace(weightText)
		addr, err := netip.ParseAddr(addrText)
		if err != nil {
			w.Problems = append(w.Problems, fmt.Sprintf("%q: address %q does not parse", entry, addrText))
			continue
		}
		entries[addr]++
		if entries[addr] == 2 {
			w.Problems = append(w.Problems, fmt.Sprintf("%s is given more than once", addr))
			delete(w.ByAddr, addr)
		}
		if entries[addr] > 1 {
			continue
		}
		n, err := strconv.ParseUint(weightText, 10, 16)
		if err != nil || n > maxWeight {
			w.Problems = append(w.Problems, fmt.Sprintf("%q: weight %q is not a number within 0..%d", entry, weightText, maxWeight))
			continue
		}
		w.ByAddr[addr] = uint16(n)
	}
	return w
}

// weigh sets the weights the Service's annotation gives the eligible set
// (Eligible gives each endpoint 1). svc is the Service as the informer
// holds it (nil: unknown, or no such Service: every weight stays 1). A bad
// entry is warned about once per annotation value; addresses that match
// no eligible endpoint are ignored at debug level.
func (p *Provider) weigh(set []backend.Backend, svc *corev1.Service) {
	if svc == nil {
		return
	}
	value, ok := svc.Annotations[WeightsAnnotation]
	if !ok {
		return
	}
	w := ParseWeights(value)
	if len(w.Problems) > 0 && !p.toldWeights[value] {
		p.toldWeights[value] = true
		p.opts.Log.WithField("annotation", WeightsAnnotation).Warn("Service weight annotation: bad entries ignored, their endpoints keep weight 1: " + strings.Join(w.Problems, "; "))
	}
	used := map[netip.Addr]bool{}
	for i := range set {
		if n, ok := w.ByAddr[set[i].IP]; ok {
			set[i].Weight, used[set[i].IP] = n, true
		}
	}
	if len(used) < len(w.ByAddr) {
		var unknown []string
		for a := range w.ByAddr {
			if !used[a] {
				unknown = append(unknown, a.String())
			}
		}
		sort.Strings(unknown)
		p.opts.Log.WithField("addresses", unknown).Debug("Service weight annotation names addresses of no eligible endpoint; ignored")
	}
}

// service is the provider's Service in the Services informer's cache;
// nil without one.
func (p *Provider) service(s cache.Store) *corev1.Service {
	obj, ok, err := s.GetByKey(p.cfg.Namespace + "/" + p.cfg.Service)
	if err != nil || !ok {
		return nil
	}
	svc, _ := obj.(*corev1.Service)
	return svc
}

// services is a namespace's Services informer (Hub): it runs while a
// provider that reads weights runs, and holds the Services those
// providers name. Its errors never reach LastError (readiness does not
// depend on weights): a failure is warned about once, and until the
// informer has synced every endpoint keeps weight 1.
type services struct {
	client ServiceClient
	names  []string // the Services read, sorted

	// guarded by shared.mu
	lastErr error
	failed  chan struct{} // closed at the first error of the current informer
	refs    int
	inf     cache.SharedIndexInformer
	cancel  context.CancelFunc
	stopped chan struct{}
}

// acquireServices returns the running Services informer and a channel
// closed once a request of it failed, starting it for the first provider
// that reads weights; releaseServices stops it after the last.
func (sh *shared) acquireServices() (cache.SharedIndexInformer, <-chan struct{}, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sv := sh.svcs
	if sv == nil {
		return nil, nil, errors.New("kubernetes: no Services informer: the provider was created without Options.Weights")
	}
	if sv.inf != nil {
		sv.refs++
		return sv.inf, sv.failed, nil
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.New(&logSink{log: sh.log})))
	inf := cache.NewSharedIndexInformerWithOptions(sh.servicesListWatch(), &corev1.Service{},
		cache.SharedIndexInformerOptions{ResyncPeriod: sh.resync})
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		sh.observeServices(ctx, "informer: list and watch", err)
	}); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("kubernetes: %w", err)
	}
	sv.inf, sv.cancel, sv.stopped, sv.failed, sv.refs = inf, cancel, make(chan struct{}), make(chan struct{}), 1
	stopped := sv.stopped
	go func() { defer close(stopped); inf.RunWithContext(ctx) }()
	return inf, sv.failed, nil
}

func (sh *shared) releaseServices() {
	sh.mu.Lock()
	sv := sh.svcs
	sv.refs--
	if sv.refs > 0 {
		sh.mu.Unlock()
		return
	}
	cancel, stopped := sv.cancel, sv.stopped
	sv.inf, sv.cancel, sv.stopped, sv.lastErr = nil, nil, nil, nil
	sh.mu.Unlock()
	cancel()
	<-stopped
}

// servicesListWatch lists and watches the Services the providers name:
// metadata.name=<service> for one, the namespace's Services for several
// (a field selector has no "in"); each provider picks its own.
func (sh *shared) servicesListWatch() cache.ListerWatcher {
	selector := ""
	if len(sh.svcs.names) == 1 {
		selector = fields.OneTermEqualSelector("metadata.name", sh.svcs.names[0]).String()
	}
	c := sh.svcs.client
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			l, err := c.List(ctx, o)
			sh.observeServices(ctx, "list", err)
			if err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := c.Watch(ctx, o)
			sh.observeServices(ctx, "watch", err)
			return w, err
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c)
}

// observeServices records the outcome of a Services request: the first
// error, and each whose cause differs from the previous one, is warned
// about (a forbidden list, retried by client-go, is one warning); a
// success after an error is logged. Errors after shutdown began are not
// the API's.
func (sh *shared) observeServices(ctx context.Context, op string, err error) {
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sv := sh.svcs
	switch {
	case err == nil && sv.lastErr != nil:
		sh.log.Info("Kubernetes API answers the Services requests again: weight annotations apply")
		sv.lastErr = nil
	case err != nil:
		err = fmt.Errorf("%s services: %w", op, err)
		if sv.lastErr == nil || rootCause(sv.lastErr).Error() != rootCause(err).Error() {
			sh.log.WithError(err).Warnf("cannot read the Services' %s annotation (a weighted scheduler needs get, list and watch of services: packaging/kubernetes/rbac.yaml); endpoints keep weight 1, or the weights last read, while client-go retries", WeightsAnnotation)
		}
		sv.lastErr = err
		if sv.failed != nil {
			select {
			case <-sv.failed:
			default:
				close(sv.failed)
			}
		}
	}
}
