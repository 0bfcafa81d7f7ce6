package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client lists and watches the EndpointSlices of one namespace: the two
// calls an informer makes. The typed client of client-go
// (kubernetes.Interface.DiscoveryV1().EndpointSlices(ns)) and its fake
// satisfy it. A client that also has IsWatchListSemanticsUnSupported()
// returning true (client-go's fakes) is never sent watch-list requests.
type Client interface {
	List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewClient returns the Client of namespace for the API server that
// kubeconfig names, or, when kubeconfig is empty, for the cluster this
// process runs in (KUBERNETES_SERVICE_HOST/PORT and the pod's service
// account token and CA, rest.InClusterConfig).
//
// It is client-go's generic typed client over a scheme that holds only
// discovery.k8s.io/v1: client-go's kubernetes.Interface would register
// every API group and add about 19 MB to the binary for one resource.
func NewClient(kubeconfig, namespace string) (Client, error) {
	rc, params, err := newREST(kubeconfig, discoveryv1.SchemeGroupVersion, "/apis", discoveryv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return &restClient{rc: rc, params: params, namespace: namespace}, nil
}

// ServiceClient lists and watches the Services of one namespace, for
// their weight annotation (WeightsAnnotation): the two calls an informer
// makes. client-go's typed client (kubernetes.Interface.CoreV1().
// Services(ns)) and its fake satisfy it.
type ServiceClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewServiceClient returns the ServiceClient of namespace for the API
// server that kubeconfig names (empty: the in-cluster config), as
// NewClient does for EndpointSlices: a REST client over a scheme of the
// core/v1 types alone.
func NewServiceClient(kubeconfig, namespace string) (ServiceClient, error) {
	rc, params, err := newREST(kubeconfig, corev1.SchemeGroupVersion, "/api", corev1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return &restServiceClient{rc: rc, params: params, namespace: namespace}, nil
}

// newREST is the REST client of one API group version (gv under
// apiPath) whose types add registers.
func newREST(kubeconfig string, gv schema.GroupVersion, apiPath string, add func(*runtime.Scheme) error) (*rest.RESTClient, runtime.ParameterCodec, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	scheme := runtime.NewScheme()
	if err := add(scheme); err != nil {
		return nil, nil, fmt.Errorf("kubernetes: scheme: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = "xlb (" + rest.DefaultKubernetesUserAgent() + ")"
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	return rc, runtime.NewParameterCodec(scheme), nil
}

// restClient is the List and Watch of client-go's generated typed
// client (gentype.Client), for EndpointSlices of one namespace.
// client-go's gentype package itself is not used: it carries the fakes,
// which link client-go's testing package and OpenAPI models (about 15 MB).
type restClient struct {
	rc        *rest.RESTClient
	params    runtime.ParameterCodec
	namespace string
}

func (c *restClient) request(opts *metav1.ListOptions) *rest.Request {
	return listRequest(c.rc, c.params, c.namespace, "endpointslices", opts)
}

// listRequest is a list or watch request of resource in namespace.
func listRequest(rc *rest.RESTClient, params runtime.ParameterCodec, namespace, resource string, opts *metav1.ListOptions) *rest.Request {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return rc.Get().Namespace(namespace).Resource(resource).VersionedParams(opts, params).Timeout(timeout)
}

// List implements Client.
func (c *restClient) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	out := &discoveryv1.EndpointSliceList{}
	if err := c.request(&opts).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch implements Client.
func (c *restClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request(&opts).Watch(ctx)
}

// restServiceClient is restClient for the Services of one namespace.
type restServiceClient struct {
	rc        *rest.RESTClient
	params    runtime.ParameterCodec
	namespace string
}

func (c *restServiceClient) request(opts *metav1.ListOptions) *rest.Request {
	return listRequest(c.rc, c.params, c.namespace, "services", opts)
}

// List implements ServiceClient.
func (c *restServiceClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	out := &corev1.ServiceList{}
	if err := c.request(&opts).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch implements ServiceClient.
func (c *restServiceClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request(&opts).Watch(ctx)
}

// restConfig loads the kubeconfig file (its current context), or the
// in-cluster configuration when the path is empty.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("provider.kubernetes: in-cluster config (kubeconfig is empty): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("provider.kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
