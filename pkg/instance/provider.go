package instance

import (
	"context"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/backend"
	k8sprovider "github.com/xlbproject/xlb/pkg/backend/kubernetes"
	"github.com/xlbproject/xlb/pkg/config"
)

// ProviderSyncWait bounds how long a start waits for the provider's first
// set beyond the health checks' first answers. A provider that has not
// synced by then (the Kubernetes API unreachable) does not hold the start:
// the instance runs with the routable set it adopted (empty when fresh),
// and the provider's set is published as soon as it comes. Meanwhile an
// adopted set that is not empty (a hand-off, a restart after a crash)
// counts as synced: readiness stays ready and the provider is stale in
// status and metrics (issue 28); without one readiness says
// backend_provider_unhealthy.
const ProviderSyncWait = 10 * time.Second

// newProvider builds a service's backend provider (DESIGN §1 "provider",
// §9): the services whose Services share a namespace share hub's
// informer.
func newProvider(s config.Service, hub *k8sprovider.Hub, log logrus.FieldLogger) (backend.Provider, error) {
	if k := s.Provider.Kubernetes; k != nil {
		fixed := !slices.ContainsFunc(s.Ports, func(p config.PortMapping) bool { return p.RemotePort == 0 })
		// Only a table scheduler reads the Service's weight annotation
		// (round_robin needs no access to Services).
		weights := s.Scheduler == config.SchedulerWeightedRoundRobin || s.Scheduler == config.SchedulerMaglev
		p, err := k8sprovider.New(*k, k8sprovider.Options{Log: log.WithField("component", "kubernetes"), PortsFixed: fixed, Hub: hub, Weights: weights,
			Proto: s.Proto})
		if err != nil {
			return nil, err // it names the field (provider.kubernetes.kubeconfig)
		}
		return p, nil
	}
	return backend.NewStatic(s.Provider.Static.Backends), nil
}

// awaitFirstSync waits for every service's first set, at most
// ProviderSyncWait plus the longest health check timeout.
func (in *Instance) awaitFirstSync(ctx context.Context) error {
	wait := ProviderSyncWait
	var hcWait time.Duration
	svcs := in.Services()
	for _, s := range svcs {
		if s.Config != nil && s.Config.HealthCheck != nil {
			hcWait = max(hcWait, s.Config.HealthCheck.Timeout+time.Second)
		}
	}
	wait += hcWait
	t := time.NewTimer(wait)
	defer t.Stop()
	for _, s := range svcs {
		select {
		case <-s.Backends.Synced():
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		// Out of time: say so for each service not synced yet.
		for _, s := range svcs {
			m := s.Backends
			if m.EverSynced() {
				continue
			}
			log := in.log.WithFields(logrus.Fields{"service": s.Name, "provider": m.ProviderName(), "waited": wait})
			if err := m.ProviderError(); err != nil {
				log = log.WithError(err)
			}
			if m.Stale() {
				log.Warn("backend provider has not synced; serving the routable set handed over or adopted from the previous xlb, provider stale until it syncs (readiness stays ready)")
			} else {
				log.Warn("backend provider has not synced; running with the routable set the data path has (none when fresh); readiness says backend_provider_unhealthy until it syncs")
			}
		}
		return nil
	}
	return nil
}
