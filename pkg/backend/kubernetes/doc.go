// Package kubernetes is the Kubernetes EndpointSlice backend provider
// (provider.kubernetes in xlb.yaml; DESIGN §1, §6b; issue 14).
//
// The Provider reads a client-go informer on the discovery.k8s.io/v1
// EndpointSlices of one namespace labelled kubernetes.io/service-name=<the
// Service>, and sends the backend manager the complete set of backends
// eligible for new connections (Eligible) on every change. The services of
// an instance that name Services of one namespace share one informer
// through a Hub (issue 29): kubernetes.io/service-name in (<each Service>). A backend that
// leaves the set is departed in the manager: its existing connections stay
// pinned to it (seed "Backend changes"), it is shown draining while pairs
// reference it and forgotten when the last is gone.
//
// A provider of a weighted_round_robin or maglev service (Options.Weights)
// also reads its Service's WeightsAnnotation through a Services informer
// of the namespace, which the Hub starts only for such providers (issue
// 30): each endpoint's weight is 1 unless the annotation says otherwise.
//
// The API server is reached with a kubeconfig file or, when
// provider.kubernetes.kubeconfig is empty, the in-cluster config. Only
// list and watch of EndpointSlices in that namespace are needed, and of
// its Services for the weighted schedulers
// (packaging/kubernetes/rbac.yaml). While the server is unreachable the
// informer retries with backoff and the provider keeps its last set;
// LastError says why (status, readiness). The client is client-go's REST
// client over a scheme of discovery.k8s.io/v1 alone, which keeps the
// binary about 19 MB smaller than client-go's full clientset would
// (NewClient).
package kubernetes
