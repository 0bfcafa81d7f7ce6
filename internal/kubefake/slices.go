package kubefake

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Builders of the EndpointSlices a test serves, written as the
// EndpointSlice controller writes them.

// Slice returns EndpointSlice name of Service service in namespace, of
// address type IPv4, with the given ports and endpoints.
func Slice(namespace, service, name string, ports []discoveryv1.EndpointPort, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		TypeMeta: sliceType,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints,
		Ports:       ports,
	}
}

// TCPPort is a slice port of protocol TCP; name "" is the unnamed port of
// a one-port Service.
func TCPPort(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}
}

// Ports is a list of ports.
func Ports(ps ...discoveryv1.EndpointPort) []discoveryv1.EndpointPort { return ps }

// Conditions are an endpoint's conditions; a nil field is the API's null.
type Conditions = discoveryv1.EndpointConditions

// Ready is the conditions of a running, ready pod.
var Ready = Conditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}

// Terminating is the conditions of a pod that is shutting down but still
// serving.
var Terminating = Conditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}

// Endpoint is an endpoint of address ip for pod (its targetRef; none when
// pod is "") with conditions c.
func Endpoint(ip, pod string, c Conditions) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: c}
	if pod != "" {
		ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
	}
	return ep
}
