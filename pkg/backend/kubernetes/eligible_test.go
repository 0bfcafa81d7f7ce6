package kubernetes

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/xlbproject/xlb/internal/kubefake"
	"github.com/xlbproject/xlb/pkg/backend"
)

const (
	ns  = "shop"
	svc = "web"
)

// be is a backend of the expected sets.
func be(name, ip string, port uint16) backend.Backend {
	return backend.Backend{Name: name, IP: netip.MustParseAddr(ip), Port: port, Weight: 1}
}

// cond builds conditions; nil is the API's null.
func cond(ready, serving, terminating *bool) kubefake.Conditions {
	return kubefake.Conditions{Ready: ready, Serving: serving, Terminating: terminating}
}

var (
	yes = ptr.To(true)
	no  = ptr.To(false)
	// http is the slice port the tests' config names.
	http8080 = kubefake.Ports(kubefake.TCPPort("http", 8080))
)

func v6(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	s.AddressType = discoveryv1.AddressTypeIPv6
	return s
}

// TestEligible has one case per rule of Eligible (issue 14; the API's
// EndpointConditions and EndpointSlice docs).
func TestEligible(t *testing.T) {
	ep := kubefake.Endpoint
	slice := func(name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return kubefake.Slice(ns, svc, name, ports, eps...)
	}
	udp := discoveryv1.EndpointPort{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(8080))}
	noProtocol := discoveryv1.EndpointPort{Name: ptr.To("http"), Port: ptr.To(int32(8081))}
	noNumber := discoveryv1.EndpointPort{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP)}
	tests := []struct {
		name     string
		portName string
		slices   []*discoveryv1.EndpointSlice
		want     []backend.Backend
	}{
		{"ready, serving, not terminating", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", kubefake.Ready))},
			[]backend.Backend{be("web-1", "10.1.0.1", 8080)}},
		{"terminating (ready false, serving true)", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", kubefake.Terminating))}, nil},
		{"terminating while ready (not eligible)", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(yes, yes, yes)))}, nil},
		{"serving false", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(yes, no, no)))}, nil},
		{"not ready", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(no, yes, no)))}, nil},
		{"all conditions null: ready", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(nil, nil, nil)))},
			[]backend.Backend{be("web-1", "10.1.0.1", 8080)}},
		{"ready false, serving null takes ready's value", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(no, nil, nil)))}, nil},
		{"ready null, serving false", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(nil, no, nil)))}, nil},
		{"ready null, terminating true", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", cond(nil, nil, yes)))}, nil},
		{"port name mismatch", "metrics", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", kubefake.Ready))}, nil},
		{"unnamed port with port_name empty", "", []*discoveryv1.EndpointSlice{slice("a", kubefake.Ports(kubefake.TCPPort("", 8443)), ep("10.1.0.1", "web-1", kubefake.Ready))},
			[]backend.Backend{be("web-1", "10.1.0.1", 8443)}},
		{"named port with port_name empty: the only TCP port", "", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "web-1", kubefake.Ready))},
			[]backend.Backend{be("web-1", "10.1.0.1", 8080)}},
		{"the named port among several", "http", []*discoveryv1.EndpointSlice{slice("a", kubefake.Ports(kubefake.TCPPort("metrics", 9090), kubefake.TCPPort("http", 8080)), ep("10.1.0.1", "web-1", kubefake.Ready))},
			[]backend.Backend{be("web-1", "10.1.0.1", 8080)}},
		{"UDP port of that name", "http", []*discoveryv1.EndpointSlice{slice("a", kubefake.Ports(udp), ep("10.1.0.1", "web-1", kubefake.Ready))}, nil},
		{"protocol null is TCP", "http", []*discoveryv1.EndpointSlice{slice("a", kubefake.Ports(noProtocol), ep("10.1.0.1", "web-1", kubefake.Ready))},
			[]backend.Backend{be("web-1", "10.1.0.1", 8081)}},
		{"port without a number", "http", []*discoveryv1.EndpointSlice{slice("a", kubefake.Ports(noNumber), ep("10.1.0.1", "web-1", kubefake.Ready))}, nil},
		{"IPv6 slice ignored", "http", []*discoveryv1.EndpointSlice{
			v6(slice("a6", http8080, ep("2001:db8::1", "web-1", kubefake.Ready))),
			slice("a4", http8080, ep("10.1.0.1", "web-1", kubefake.Ready)),
		}, []backend.Backend{be("web-1", "10.1.0.1", 8080)}},
		{"FQDN slice ignored", "http", []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
			s := slice("f", http8080, ep("10.1.0.1", "web-1", kubefake.Ready))
			s.AddressType = discoveryv1.AddressTypeFQDN
			return s
		}()}, nil},
		{"unusable addresses skipped", "http", []*discoveryv1.EndpointSlice{slice("a", http8080,
			ep("2001:db8::1", "v6-in-v4-slice", kubefake.Ready), ep("::ffff:10.1.0.9", "mapped", kubefake.Ready),
			ep("127.0.0.1", "loopback", kubefake.Ready), ep("0.0.0.0", "unspecified", kubefake.Ready),
			ep("224.0.0.1", "multicast", kubefake.Ready), ep("255.255.255.255", "broadcast", kubefake.Ready),
			ep("web-1.example", "not-an-address", kubefake.Ready), discoveryv1.Endpoint{Conditions: kubefake.Ready},
			ep("10.1.0.2", "web-2", kubefake.Ready))},
			[]backend.Backend{be("web-2", "10.1.0.2", 8080)}},
		{"only the first address counts", "http", []*discoveryv1.EndpointSlice{slice("a", http8080,
			discoveryv1.Endpoint{Addresses: []string{"10.1.0.1", "10.1.0.2"}, Conditions: kubefake.Ready})},
			[]backend.Backend{be("10.1.0.1", "10.1.0.1", 8080)}},
		{"no targetRef: named by address", "http", []*discoveryv1.EndpointSlice{slice("a", http8080, ep("10.1.0.1", "", kubefake.Ready))},
			[]backend.Backend{be("10.1.0.1", "10.1.0.1", 8080)}},
		{"two slices: union, ordered by address", "http", []*discoveryv1.EndpointSlice{
			slice("b", http8080, ep("10.1.0.3", "web-3", kubefake.Ready), ep("10.1.0.1", "web-1", kubefake.Ready)),
			slice("a", http8080, ep("10.1.0.2", "web-2", kubefake.Ready)),
		}, []backend.Backend{be("web-1", "10.1.0.1", 8080), be("web-2", "10.1.0.2", 8080), be("web-3", "10.1.0.3", 8080)}},
		{"same address twice: eligible if any entry is", "http", []*discoveryv1.EndpointSlice{
			slice("a", http8080, ep("10.1.0.1", "web-1-old", kubefake.Terminating)),
			slice("b", http8080, ep("10.1.0.1", "web-1", kubefake.Ready)),
		}, []backend.Backend{be("web-1", "10.1.0.1", 8080)}},
		{"same address twice, both eligible: the first slice by name wins", "http", []*discoveryv1.EndpointSlice{
			slice("b", kubefake.Ports(kubefake.TCPPort("http", 8081)), ep("10.1.0.1", "web-1b", kubefake.Ready)),
			slice("a", http8080, ep("10.1.0.1", "web-1a", kubefake.Ready)),
		}, []backend.Backend{be("web-1a", "10.1.0.1", 8080)}},
		{"slices with different ports", "http", []*discoveryv1.EndpointSlice{
			slice("a", http8080, ep("10.1.0.1", "web-1", kubefake.Ready)),
			slice("b", kubefake.Ports(kubefake.TCPPort("http", 9000)), ep("10.1.0.2", "web-2", kubefake.Ready)),
		}, []backend.Backend{be("web-1", "10.1.0.1", 8080), be("web-2", "10.1.0.2", 9000)}},
		{"no slices", "http", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := Eligible(tt.slices, PortRule{Name: tt.portName})
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Eligible =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

// TestEligiblePorts (issue 28): which port of a slice the backends are
// reached on without port_name (the unnamed port, else the only TCP
// port, else none with remote_port in every mapping), and what a slice
// that supplies no backend for want of a port says about its ports; for
// a UDP service (issue 31) the same rules over the slice's UDP ports.
func TestEligiblePorts(t *testing.T) {
	ep := kubefake.Endpoint
	slice := func(ports []discoveryv1.EndpointPort) []*discoveryv1.EndpointSlice {
		return []*discoveryv1.EndpointSlice{kubefake.Slice(ns, svc, "a", ports, ep("10.1.0.1", "web-1", kubefake.Ready))}
	}
	udp := discoveryv1.EndpointPort{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(53))}
	two := kubefake.Ports(kubefake.TCPPort("http", 8080), kubefake.TCPPort("metrics", 9090))
	const twoPorts = `"http" 8080/TCP, "metrics" 9090/TCP`
	udp5353 := discoveryv1.EndpointPort{Name: ptr.To("mdns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(5353))}
	kubeDNS := append(kubefake.Ports(udp), kubefake.TCPPort("dns-tcp", 53), kubefake.TCPPort("metrics", 9153))
	const kubeDNSPorts = `"dns" 53/UDP, "dns-tcp" 53/TCP, "metrics" 9153/TCP`
	for _, tt := range []struct {
		name    string
		rule    PortRule
		slices  []*discoveryv1.EndpointSlice
		want    []backend.Backend
		problem string
	}{
		{"one named TCP port", PortRule{}, slice(http8080), []backend.Backend{be("web-1", "10.1.0.1", 8080)}, ""},
		{"one named TCP port beside a UDP one", PortRule{}, slice(append(kubefake.Ports(udp), kubefake.TCPPort("http", 8080))), []backend.Backend{be("web-1", "10.1.0.1", 8080)}, ""},
		{"the unnamed port among several", PortRule{}, slice(kubefake.Ports(kubefake.TCPPort("metrics", 9090), kubefake.TCPPort("", 8443))), []backend.Backend{be("web-1", "10.1.0.1", 8443)}, ""},
		{"two named ports", PortRule{}, slice(two), nil,
			`provider.kubernetes.port_name is not set and its ports (` + twoPorts + `) hold neither an unnamed TCP port nor exactly one TCP port: set port_name to one of them, or remote_port in every port mapping`},
		{"two named ports, remote_port everywhere", PortRule{Fixed: true}, slice(two), []backend.Backend{be("web-1", "10.1.0.1", 0)}, ""},
		{"no ports", PortRule{}, slice(nil), nil,
			`provider.kubernetes.port_name is not set and its ports (no ports) hold neither an unnamed TCP port nor exactly one TCP port: set port_name to one of them, or remote_port in every port mapping`},
		{"no ports, remote_port everywhere", PortRule{Fixed: true}, slice(nil), []backend.Backend{be("web-1", "10.1.0.1", 0)}, ""},
		{"port_name not among them", PortRule{Name: "grpc"}, slice(two), nil,
			`no TCP port named "grpc" with a number among its ports (` + twoPorts + `): set provider.kubernetes.port_name to one of them`},
		{"port_name not among them, remote_port everywhere", PortRule{Name: "grpc", Fixed: true}, slice(two), nil,
			`no TCP port named "grpc" with a number among its ports (` + twoPorts + `): set provider.kubernetes.port_name to one of them`},
		{"port_name names a UDP port", PortRule{Name: "dns"}, slice(kubefake.Ports(udp)), nil,
			`no TCP port named "dns" with a number among its ports ("dns" 53/UDP): set provider.kubernetes.port_name to one of them`},
		// UDP services (issue 31): only the slice's UDP ports count, as
		// kube-dns's "dns" beside "dns-tcp" and "metrics".
		{"udp: the only UDP port", PortRule{Proto: "udp"}, slice(kubeDNS), []backend.Backend{be("web-1", "10.1.0.1", 53)}, ""},
		{"udp: port_name dns", PortRule{Proto: "udp", Name: "dns"}, slice(kubeDNS), []backend.Backend{be("web-1", "10.1.0.1", 53)}, ""},
		{"udp: port_name names a TCP port", PortRule{Proto: "udp", Name: "dns-tcp"}, slice(kubeDNS), nil,
			`no UDP port named "dns-tcp" with a number among its ports (` + kubeDNSPorts + `): set provider.kubernetes.port_name to one of them`},
		{"udp: no UDP port", PortRule{Proto: "udp"}, slice(two), nil,
			`provider.kubernetes.port_name is not set and its ports (` + twoPorts + `) hold neither an unnamed UDP port nor exactly one UDP port: set port_name to one of them, or remote_port in every port mapping`},
		{"udp: two UDP ports, remote_port everywhere", PortRule{Proto: "udp", Fixed: true}, slice(append(kubefake.Ports(udp), udp5353)), []backend.Backend{be("web-1", "10.1.0.1", 0)}, ""},
		{"tcp: port_name dns-tcp", PortRule{Proto: "tcp", Name: "dns-tcp"}, slice(kubeDNS), []backend.Backend{be("web-1", "10.1.0.1", 53)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, unusable := Eligible(tt.slices, tt.rule)
			if !(len(got) == 0 && len(tt.want) == 0) && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Eligible =\n%v\nwant\n%v", got, tt.want)
			}
			var problem string
			if len(unusable) > 0 {
				problem = unusable[0].Problem()
				if len(unusable) != 1 || unusable[0].Slice != "a" {
					t.Errorf("unusable = %+v, want slice a only", unusable)
				}
			}
			if problem != tt.problem {
				t.Errorf("problem\n%s\nwant\n%s", problem, tt.problem)
			}
		})
	}
}
