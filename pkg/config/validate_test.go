package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// backendsOnly is a provider block for cases that write their own ports;
// it starts on the line after the ports.
const backendsOnly = `provider:
  static:
    backends:
      - ip: 198.51.100.11
`

// ninePorts is a flow sequence of nine mappings on one line.
func ninePorts() string {
	var items []string
	for i := 1; i <= 9; i++ {
		items = append(items, fmt.Sprintf("{local_port: %d}", i))
	}
	return "ports: [" + strings.Join(items, ", ") + "]\n"
}

// TestValidationRules has one case per rule of DESIGN §1 and of this
// package, each asserting the complete error text: the rule yields exactly
// one error, naming file, line and field path.
func TestValidationRules(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		// ports: 1..8 mappings, ports 1..65535, unique local_port.
		{"ports missing", backendsOnly, `t.yaml:1: missing field "ports"`},
		{"ports empty", "ports: []\n" + backendsOnly, `t.yaml:1: ports: at least 1 port mapping is required`},
		{"ports null", "ports:\n" + backendsOnly, `t.yaml:1: missing field "ports"`},
		{"nine ports", ninePorts() + backendsOnly, `t.yaml:1: ports: at most 8 port mappings are supported, got 9`},
		{"local_port 0", "ports:\n  - local_port: 0\n" + backendsOnly, `t.yaml:2: ports[0].local_port: must be between 1 and 65535, got 0`},
		{"local_port 65536", "ports:\n  - local_port: 65536\n" + backendsOnly, `t.yaml:2: ports[0].local_port: must be between 1 and 65535, got 65536`},
		{"local_port negative", "ports:\n  - local_port: -80\n" + backendsOnly, `t.yaml:2: ports[0].local_port: must be between 1 and 65535, got -80`},
		{"local_port missing", "ports:\n  - remote_port: 8080\n" + backendsOnly, `t.yaml:2: ports[0]: missing field "local_port"`},
		{"remote_port 0", "ports:\n  - local_port: 80\n    remote_port: 0\n" + backendsOnly, `t.yaml:3: ports[0].remote_port: must be between 1 and 65535, got 0`},
		{"duplicate local_port", "ports:\n  - local_port: 80\n  - local_port: 443\n  - local_port: 80\n    remote_port: 81\n" + backendsOnly,
			`t.yaml:4: ports[2].local_port: duplicate local_port 80 (also ports[0])`},
		{"ports not a sequence", "ports: 80\n" + backendsOnly, `t.yaml:1: ports: must be a sequence, got integer 80`},
		{"port item not a mapping", "ports:\n  - 80\n" + backendsOnly, `t.yaml:2: ports[0]: must be a mapping, got integer 80`},

		// listen: auto or an IPv4 unicast address.
		{"listen IPv6", minimal + "listen: {ip: \"2001:db8::10\"}\n", `t.yaml:7: listen.ip: 2001:db8::10: IPv6 is not supported yet; use an IPv4 address`},
		{"listen IPv4-mapped", minimal + "listen: {ip: \"::ffff:192.0.2.10\"}\n", `t.yaml:7: listen.ip: ::ffff:192.0.2.10 is an IPv4-mapped IPv6 address; write it as 192.0.2.10`},
		{"listen unspecified", minimal + "listen: {ip: 0.0.0.0}\n", `t.yaml:7: listen.ip: must not be the unspecified address 0.0.0.0`},
		{"listen loopback", minimal + "listen: {ip: 127.0.0.1}\n", `t.yaml:7: listen.ip: must not be a loopback address, got 127.0.0.1`},
		{"listen multicast", minimal + "listen: {ip: 224.0.0.1}\n", `t.yaml:7: listen.ip: must not be a multicast address, got 224.0.0.1`},
		{"listen broadcast", minimal + "listen: {ip: 255.255.255.255}\n", `t.yaml:7: listen.ip: must not be the broadcast address 255.255.255.255`},
		{"listen not an address", minimal + "listen: {ip: lb.example.com}\n", `t.yaml:7: listen.ip: "lb.example.com" is not an IP address`},
		{"listen bare address", minimal + "listen: 192.0.2.10\n", `t.yaml:7: listen: must be "auto" or {ip: ADDRESS}, got string "192.0.2.10"`},
		{"listen without ip", minimal + "listen: {}\n", `t.yaml:7: listen: missing field "ip"`},

		// proto: tcp or udp (issue 31); mode: only nat is implemented.
		{"proto other", minimal + "proto: sctp\n", `t.yaml:7: proto: must be "tcp" or "udp", got "sctp"`},
		{"mode dsr", minimal + "mode: dsr\n", `t.yaml:7: mode: dsr is not implemented yet; only nat is supported`},
		{"mode other", minimal + "mode: tunnel\n", `t.yaml:7: mode: must be "nat", got "tunnel"`},

		// provider: exactly one; static has >= 1 backend, usable unique IPv4s, unique names.
		{"provider missing", "ports:\n  - local_port: 80\n", `t.yaml:1: missing field "provider"`},
		{"provider empty", "ports:\n  - local_port: 80\nprovider: {}\n", `t.yaml:3: provider: must set exactly one of "static" or "kubernetes"`},
		{"provider both", minimal + "  kubernetes: {namespace: default, service: web}\n", `t.yaml:3: provider: must set exactly one of "static" or "kubernetes", not both`},
		{"provider scalar", "ports:\n  - local_port: 80\nprovider: static\n", `t.yaml:3: provider: must be a mapping, got string "static"`},
		{"static without backends", "ports:\n  - local_port: 80\nprovider:\n  static: {}\n", `t.yaml:4: provider.static.backends: at least 1 backend is required`},
		{"static empty backends", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends: []\n", `t.yaml:5: provider.static.backends: at least 1 backend is required`},
		{"backend without ip", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - name: a\n", `t.yaml:6: provider.static.backends[0]: missing field "ip"`},
		{"backend IPv6 (another family than listen auto)", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 2001:db8::11\n",
			`t.yaml:6: provider.static.backends[0].ip: 2001:db8::11 is IPv6 and the listen address (auto) IPv4: a service's backends are of its listen family (no NAT64)`},
		{"backend weight 0", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - {ip: 10.0.0.1, weight: 0}\n",
			`t.yaml:6: provider.static.backends[0].weight: must be between 1 and 256, got 0`},
		{"backend unspecified", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 0.0.0.0\n",
			`t.yaml:6: provider.static.backends[0].ip: must not be the unspecified address 0.0.0.0`},
		{"backend loopback", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 127.0.0.2\n",
			`t.yaml:6: provider.static.backends[0].ip: must not be a loopback address, got 127.0.0.2`},
		{"backend multicast", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 239.1.1.1\n",
			`t.yaml:6: provider.static.backends[0].ip: must not be a multicast address, got 239.1.1.1`},
		{"backend not an address", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: web-1\n",
			`t.yaml:6: provider.static.backends[0].ip: "web-1" is not an IP address`},
		{"backend is listen address", "listen: {ip: 198.51.100.11}\n" + minimal,
			`t.yaml:7: provider.static.backends[0].ip: must not be the listen address 198.51.100.11`},
		{"duplicate backend ip", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - {name: a, ip: 10.0.0.1}\n      - {name: b, ip: 10.0.0.2}\n      - {name: c, ip: 10.0.0.1}\n",
			`t.yaml:8: provider.static.backends[2].ip: duplicate ip 10.0.0.1 (also provider.static.backends[0])`},
		{"duplicate backend name", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - {name: a, ip: 10.0.0.1}\n      - {name: a, ip: 10.0.0.2}\n",
			`t.yaml:7: provider.static.backends[1].name: duplicate name "a" (also provider.static.backends[0])`},
		{"name equals default name", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 10.0.0.1\n      - name: 10.0.0.1\n        ip: 10.0.0.2\n",
			`t.yaml:7: provider.static.backends[1].name: duplicate name "10.0.0.1" (also provider.static.backends[0])`},
		{"backend name empty", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - {name: \"\", ip: 10.0.0.1}\n",
			`t.yaml:6: provider.static.backends[0].name: must not be empty (omit it to use the IP address)`},
		{"backend name control character", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - {name: \"a\\tb\", ip: 10.0.0.1}\n",
			`t.yaml:6: provider.static.backends[0].name: must not contain control characters, got "a\tb"`},

		// kubernetes: namespace and service are Kubernetes names.
		{"kubernetes without namespace", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    service: web\n", `t.yaml:4: provider.kubernetes: missing field "namespace"`},
		{"kubernetes without service", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: default\n", `t.yaml:4: provider.kubernetes: missing field "service"`},
		{"kubernetes empty namespace", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: \"\"\n    service: web\n",
			`t.yaml:5: provider.kubernetes.namespace: must be a DNS-1123 label (1-63 lowercase letters, digits or '-'; first and last a letter or digit), got ""`},
		{"kubernetes bad namespace", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: Prod\n    service: web\n",
			`t.yaml:5: provider.kubernetes.namespace: must be a DNS-1123 label (1-63 lowercase letters, digits or '-'; first and last a letter or digit), got "Prod"`},
		{"kubernetes bad service", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: default\n    service: 1web\n",
			`t.yaml:6: provider.kubernetes.service: must be a DNS-1035 label (1-63 lowercase letters, digits or '-'; first a letter, last a letter or digit), got "1web"`},
		{"kubernetes bad port_name", "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: default, service: web, port_name: HTTP}\n",
			`t.yaml:4: provider.kubernetes.port_name: must be empty (the unnamed port) or a DNS-1123 label (1-63 lowercase letters, digits or '-'; first and last a letter or digit), got "HTTP"`},
		{"kubernetes port_name too long", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: default\n    service: web\n    port_name: " + strings.Repeat("p", 64) + "\n",
			`t.yaml:7: provider.kubernetes.port_name: must be empty (the unnamed port) or a DNS-1123 label (1-63 lowercase letters, digits or '-'; first and last a letter or digit), got "` + strings.Repeat("p", 64) + `"`},
		{"kubernetes port_name not a string", "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: default, service: web, port_name: [http]}\n",
			`t.yaml:4: provider.kubernetes.port_name: must be a string, got a sequence`},
		{"kubernetes unknown field", "ports:\n  - local_port: 80\nprovider:\n  kubernetes:\n    namespace: default\n    service: web\n    portname: http\n",
			`t.yaml:7: provider.kubernetes: unknown field "portname" (did you mean "port_name"?)`},
		{"kubernetes remote_port 0 is still an error", "ports:\n  - {local_port: 80, remote_port: 0}\nprovider:\n  kubernetes: {namespace: default, service: web}\n",
			`t.yaml:2: ports[0].remote_port: must be between 1 and 65535, got 0`},

		// durations.
		{"shutdown_timeout negative", minimal + "shutdown_timeout: -1\n", `t.yaml:7: shutdown_timeout: must be between 0 and 3600 seconds, got -1`},
		{"shutdown_timeout too long", minimal + "shutdown_timeout: 3601\n", `t.yaml:7: shutdown_timeout: must be between 0 and 3600 seconds, got 3601`},
		{"shutdown_timeout float", minimal + "shutdown_timeout: 1.5\n", `t.yaml:7: shutdown_timeout: must be an integer, got number 1.5`},
		{"orphan_ttl_secs too long", minimal + "orphan_ttl_secs: 604801\n", `t.yaml:7: orphan_ttl_secs: must be at most 604800 seconds (seven days), got 604801`},
		{"orphan_ttl_secs beyond int64", minimal + "orphan_ttl_secs: 18446744073709551615\n", `t.yaml:7: orphan_ttl_secs: 18446744073709551615 overflows a 64-bit integer`},
		{"port boolean", minimal + "admin: {port: true}\n", `t.yaml:7: admin.port: must be an integer, got boolean true`},
		{"port sequence", minimal + "admin: {port: [1]}\n", `t.yaml:7: admin.port: must be an integer, got a sequence`},
		{"orphan_ttl_secs overflow", minimal + "orphan_ttl_secs: 99999999999999999999\n", `t.yaml:7: orphan_ttl_secs: 99999999999999999999 overflows a 64-bit integer`},

		// admin and metrics listeners.
		{"admin port 0", minimal + "admin: {port: 0}\n", `t.yaml:7: admin.port: must be between 1 and 65535, got 0`},
		{"metrics port 0", minimal + "metrics: {port: 0}\n", `t.yaml:7: metrics.port: must be between 1 and 65535, got 0`},
		{"admin port not an integer", minimal + "admin:\n  port: eighty\n", `t.yaml:8: admin.port: must be an integer, got string "eighty"`},
		{"admin port quoted", minimal + "admin:\n  port: \"9090\"\n", `t.yaml:8: admin.port: must be an integer, got string "9090"`},
		{"admin address not an address", minimal + "admin: {address: localhost}\n", `t.yaml:7: admin.address: "localhost" is not an IP address`},
		{"admin web config file relative", minimal + "admin:\n  web_config_file: web.yml\n", `t.yaml:8: admin.web_config_file: must be an absolute path, got "web.yml"`},
		{"metrics web config file relative", minimal + "metrics:\n  web_config_file: ./web.yml\n", `t.yaml:8: metrics.web_config_file: must be an absolute path, got "./web.yml"`},
		{"admin and metrics same address and port", minimal + "admin: {address: 10.0.0.5, port: 9000}\nmetrics: {address: 10.0.0.5, port: 9000}\n",
			`t.yaml:8: metrics.port: 10.0.0.5:9000 overlaps admin 10.0.0.5:9000; admin and metrics need different ports`},
		{"metrics unspecified overlaps admin", minimal + "admin: {port: 9642}\n",
			`t.yaml:7: admin.port: 127.0.0.1:9642 overlaps metrics 0.0.0.0:9642; admin and metrics need different ports`},
		{"admin on a local_port of the listen address", minimal + "admin: {address: 0.0.0.0, port: 80}\n",
			`t.yaml:7: admin.port: 80 is also ports[0].local_port on the listen address; XDP would take these packets before the admin listener sees them`},
		{"metrics on a local_port", "ports:\n  - local_port: 9642\n" + backendsOnly,
			`t.yaml:1: metrics.port: 9642 is also ports[0].local_port on the listen address; XDP would take these packets before the metrics listener sees them`},
		{"auth username empty", minimal + "admin:\n  auth: {username: \"\"}\n", `t.yaml:8: admin.auth.username: must not be empty`},
		{"auth username with colon", minimal + "admin:\n  auth: {username: \"ops:1\"}\n", `t.yaml:8: admin.auth.username: must not contain ':', got "ops:1"`},
		{"auth without username", minimal + "admin:\n  auth: {}\n", `t.yaml:8: admin.auth: missing field "username"`},
		{"admin socket relative", minimal + "admin:\n  socket: admin.sock\n", `t.yaml:8: admin.socket: must be an absolute path, got "admin.sock"`},
		{"admin socket not clean", minimal + "admin:\n  socket: /run/xlb/../xlb/admin.sock\n", `t.yaml:8: admin.socket: must be a clean path (/run/xlb/admin.sock), got "/run/xlb/../xlb/admin.sock"`},
		{"admin socket too long", minimal + "admin:\n  socket: /" + strings.Repeat("s", 107) + "\n", `t.yaml:8: admin.socket: must be at most 107 bytes (a unix socket address), got 108`},
		{"allowed host with a port", minimal + "admin:\n  allowed_hosts: [\"lb1:8642\"]\n", `t.yaml:8: admin.allowed_hosts[0]: must be a host name or an IP address without a port, got "lb1:8642"`},
		{"allowed host a URL", minimal + "admin:\n  allowed_hosts:\n    - localhost\n    - http://lb1/\n", `t.yaml:10: admin.allowed_hosts[1]: must be a host name or an IP address without a port, got "http://lb1/"`},
		{"allowed host twice", minimal + "admin:\n  allowed_hosts: [LB1.example.net, lb1.example.net]\n", `t.yaml:8: admin.allowed_hosts[1]: duplicate entry lb1.example.net (also admin.allowed_hosts[0])`},
		{"allowed hosts not a list", minimal + "admin:\n  allowed_hosts: localhost\n", `t.yaml:8: admin.allowed_hosts: must be a sequence, got string "localhost"`},

		// interfaces and xdp_mode.
		{"interface empty name", minimal + "interfaces: [\"\"]\n", `t.yaml:7: interfaces[0]: "" is not a valid Linux interface name (1-15 characters, not "." or "..", no '/', ':' or whitespace)`},
		{"interface name too long", minimal + "interfaces: [abcdefghijklmnop]\n", `t.yaml:7: interfaces[0]: "abcdefghijklmnop" is not a valid Linux interface name (1-15 characters, not "." or "..", no '/', ':' or whitespace)`},
		{"interface name with slash", minimal + "interfaces:\n  - eth0\n  - a/b\n", `t.yaml:9: interfaces[1]: "a/b" is not a valid Linux interface name (1-15 characters, not "." or "..", no '/', ':' or whitespace)`},
		{"interface name with space", minimal + "interfaces: [\"eth 0\"]\n", `t.yaml:7: interfaces[0]: "eth 0" is not a valid Linux interface name (1-15 characters, not "." or "..", no '/', ':' or whitespace)`},
		{"interface name with colon", minimal + "interfaces: [\"eth0:1\"]\n", `t.yaml:7: interfaces[0]: "eth0:1" is not a valid Linux interface name (1-15 characters, not "." or "..", no '/', ':' or whitespace)`},
		{"interface name dot", minimal + "interfaces: [\".\"]\n", `t.yaml:7: interfaces[0]: "." is not a valid Linux interface name (1-15 characters, not "." or "..", no '/', ':' or whitespace)`},
		{"duplicate interface", minimal + "interfaces:\n  - eth0\n  - eth1\n  - eth0\n", `t.yaml:10: interfaces[2]: duplicate interface "eth0" (also interfaces[0])`},
		{"interfaces not a sequence", minimal + "interfaces: eth0\n", `t.yaml:7: interfaces: must be a sequence, got string "eth0"`},
		{"interface not a string", minimal + "interfaces: [[eth0]]\n", `t.yaml:7: interfaces[0]: must be a string, got a sequence`},
		{"xdp_mode unknown", minimal + "xdp_mode: offload\n", `t.yaml:7: xdp_mode: must be one of auto, native, generic; got "offload"`},

		// snat.
		{"snat IPv6", minimal + "snat: {ip: \"2001:db8::1\"}\n", `t.yaml:7: snat.ip: 2001:db8::1: IPv6 is not supported yet; use an IPv4 address`},
		{"snat loopback", minimal + "snat: {ip: 127.0.0.1}\n", `t.yaml:7: snat.ip: must not be a loopback address, got 127.0.0.1`},
		{"snat empty list", minimal + "snat: {ip: []}\n", `t.yaml:7: snat.ip: must list at least 1 address (or be "auto")`},
		{"snat nine addresses", minimal + "snat:\n  ip: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5, 10.0.0.6, 10.0.0.7, 10.0.0.8, 10.0.0.9]\n",
			`t.yaml:8: snat.ip: at most 8 addresses are supported, got 9`},
		{"snat duplicate address", minimal + "snat:\n  ip:\n    - 198.51.100.1\n    - 198.51.100.2\n    - 198.51.100.1\n",
			`t.yaml:11: snat.ip[2]: duplicate address 198.51.100.1 (also snat.ip[0])`},
		{"snat list item multicast", minimal + "snat:\n  ip:\n    - 198.51.100.1\n    - 224.0.0.5\n", `t.yaml:10: snat.ip[1]: must not be a multicast address, got 224.0.0.5`},
		{"snat list item not an address", minimal + "snat:\n  ip: [198.51.100.1, backend-net]\n", `t.yaml:8: snat.ip[1]: "backend-net" is not an IP address`},
		{"snat auto inside a list", minimal + "snat:\n  ip: [auto]\n", `t.yaml:8: snat.ip[0]: "auto" is not an IP address`},
		{"snat list item IPv6", minimal + "snat: {ip: [198.51.100.1, \"2001:db8::1\"]}\n", `t.yaml:7: snat.ip[1]: 2001:db8::1: IPv6 is not supported yet; use an IPv4 address`},
		{"snat ip a mapping", minimal + "snat: {ip: {address: 198.51.100.1}}\n", `t.yaml:7: snat.ip: must be a string, got a mapping`},
		{"snat port_range malformed", minimal + "snat: {port_range: \"40000:59999\"}\n", `t.yaml:7: snat.port_range: must be "LO-HI" with two port numbers, e.g. "40000-59999", got "40000:59999"`},
		{"snat port_range above 65535", minimal + "snat: {port_range: \"40000-70000\"}\n", `t.yaml:7: snat.port_range: must satisfy 1024 <= LO <= HI <= 65535, got "40000-70000"`},
		{"snat port_range single number", minimal + "snat: {port_range: 40000}\n", `t.yaml:7: snat.port_range: must be "LO-HI" with two port numbers, e.g. "40000-59999", got "40000"`},
		{"snat port_range below floor", minimal + "snat: {port_range: \"1000-2000\"}\n", `t.yaml:7: snat.port_range: must satisfy 1024 <= LO <= HI <= 65535, got "1000-2000"`},
		{"snat port_range reversed", minimal + "snat: {port_range: \"50000-40000\"}\n", `t.yaml:7: snat.port_range: must satisfy 1024 <= LO <= HI <= 65535, got "50000-40000"`},
		{"local_port in snat range, both auto", "ports:\n  - local_port: 45000\n" + backendsOnly,
			`t.yaml:2: ports[0].local_port: 45000 is inside snat.port_range 40000-59999 (snat.ip and listen are auto, so they may be the same address); the data path could not tell client packets from backend replies`},
		{"local_port in snat range, snat auto", "ports:\n  - local_port: 45000\n" + backendsOnly + "listen: {ip: 192.0.2.10}\n",
			`t.yaml:2: ports[0].local_port: 45000 is inside snat.port_range 40000-59999 (snat.ip is auto, so it may be the listen address); the data path could not tell client packets from backend replies`},
		{"local_port in snat range, listen auto", "ports:\n  - local_port: 45000\n" + backendsOnly + "snat: {ip: 192.0.2.10}\n",
			`t.yaml:2: ports[0].local_port: 45000 is inside snat.port_range 40000-59999 (listen is auto, so it may be the snat.ip address); the data path could not tell client packets from backend replies`},
		{"local_port in snat range, same address", "ports:\n  - local_port: 80\n  - local_port: 50000\n" + backendsOnly + "listen: {ip: 192.0.2.10}\nsnat: {ip: 192.0.2.10, port_range: 50000-50000}\n",
			`t.yaml:3: ports[1].local_port: 50000 is inside snat.port_range 50000-50000 and snat.ip is the listen address; the data path could not tell client packets from backend replies`},

		{"local_port in snat range, listen address in the list", "ports:\n  - local_port: 50000\n" + backendsOnly + "listen: {ip: 192.0.2.10}\nsnat: {ip: [192.0.2.20, 192.0.2.10], port_range: 50000-50000}\n",
			`t.yaml:2: ports[0].local_port: 50000 is inside snat.port_range 50000-50000 and snat.ip[1] is the listen address; the data path could not tell client packets from backend replies`},

		// flow_table, state_dir, name.
		{"embryonic_ttl_secs 0", minimal + "flow_table: {embryonic_ttl_secs: 0}\n", `t.yaml:7: flow_table.embryonic_ttl_secs: must be between 1 and 604800 seconds (and at most orphan_ttl_secs), got 0`},
		{"embryonic_ttl_secs not an integer", minimal + "flow_table: {embryonic_ttl_secs: 2.5}\n", `t.yaml:7: flow_table.embryonic_ttl_secs: must be an integer, got number 2.5`},
		{"embryonic_ttl_secs above the orphan ttl", minimal + "flow_table:\n  embryonic_ttl_secs: 301\n", `t.yaml:8: flow_table.embryonic_ttl_secs: must be at most orphan_ttl_secs (300), got 301`},
		{"embryonic_ttl_secs above a raised orphan ttl", minimal + "orphan_ttl_secs: 600\nflow_table: {embryonic_ttl_secs: 900}\n", `t.yaml:8: flow_table.embryonic_ttl_secs: must be at most orphan_ttl_secs (600), got 900`},
		{"max_connections 0", minimal + "flow_table: {max_connections: 0}\n", `t.yaml:7: flow_table.max_connections: must be between 1 and 16777216, got 0`},
		{"max_connections above ceiling", minimal + "flow_table: {max_connections: 16777217}\n", `t.yaml:7: flow_table.max_connections: must be between 1 and 16777216, got 16777217`},
		{"state_dir relative", minimal + "state_dir: bpf/xlb\n", `t.yaml:7: state_dir: must be an absolute path, got "bpf/xlb"`},
		{"state_dir empty", minimal + "state_dir: \"\"\n", `t.yaml:7: state_dir: must be an absolute path, got ""`},
		{"state_dir root", minimal + "state_dir: /\n", `t.yaml:7: state_dir: must not be "/"`},
		{"state_dir dot", minimal + "state_dir: /sys/fs/bpf/xlb.old\n", `t.yaml:7: state_dir: "/sys/fs/bpf/xlb.old": its last element must not contain a dot (a BPF filesystem refuses such names)`},
		{"name empty", minimal + "name: \"\"\n", `t.yaml:7: name: must not be empty`},
		{"name too long", minimal + "name: " + strings.Repeat("x", 254) + "\n", `t.yaml:7: name: must be at most 253 bytes, got 254`},
		{"name not a scalar", minimal + "name: {a: b}\n", `t.yaml:7: name: must be a string, got a mapping`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.yaml, tt.want) })
	}
}

// TestValidEdgeCases are configs at the edge of a rule that must pass.
func TestValidEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *Config)
	}{
		{"eight ports", "ports: [{local_port: 1}, {local_port: 2}, {local_port: 3}, {local_port: 4}, {local_port: 5}, {local_port: 6}, {local_port: 7}, {local_port: 8}]\n" + backendsOnly,
			func(t *testing.T, c *Config) {
				if len(c.Ports) != 8 {
					t.Errorf("len(Ports) = %d, want 8", len(c.Ports))
				}
			}},
		{"ports at the limits", "ports:\n  - {local_port: 1, remote_port: 65535}\n  - {local_port: 65535, remote_port: 1}\n" + backendsOnly + "snat: {ip: 192.0.2.20}\nlisten: {ip: 192.0.2.10}\n", nil},
		{"same remote_port twice", "ports:\n  - {local_port: 80, remote_port: 8080}\n  - {local_port: 81, remote_port: 8080}\n" + backendsOnly, nil},
		{"local_port in snat range on another address", "ports:\n  - local_port: 45000\n" + backendsOnly + "listen: {ip: 192.0.2.10}\nsnat: {ip: 192.0.2.20}\n", nil},
		{"local_port just outside snat range", "ports:\n  - local_port: 39999\n  - local_port: 60000\n" + backendsOnly, nil},
		{"shutdown_timeout 0", minimal + "shutdown_timeout: 0\n", func(t *testing.T, c *Config) {
			if c.ShutdownTimeout != 0 {
				t.Errorf("ShutdownTimeout = %v, want 0", c.ShutdownTimeout)
			}
		}},
		{"max_connections at ceiling", minimal + "flow_table: {max_connections: 16777216}\n", nil},
		{"port_range floor", minimal + "snat: {port_range: 1024-1024}\n", nil},
		{"admin and metrics same port on different addresses", minimal + "admin: {address: 10.0.0.5, port: 9000}\nmetrics: {address: 10.0.0.6, port: 9000}\n", nil},
		{"admin IPv6", minimal + "admin: {address: \"::1\"}\n", nil},
		{"allowed hosts normalised", minimal + "admin: {allowed_hosts: [LB1.Example.NET, \"[::1]\", \"::ffff:192.0.2.10\"], socket: /run/xlb-a/admin.sock}\n", func(t *testing.T, c *Config) {
			if want := []string{"lb1.example.net", "::1", "192.0.2.10"}; !slices.Equal(c.Admin.AllowedHosts, want) || c.Admin.Socket != "/run/xlb-a/admin.sock" {
				t.Errorf("allowed_hosts %q socket %q, want %q /run/xlb-a/admin.sock", c.Admin.AllowedHosts, c.Admin.Socket, want)
			}
		}},
		{"allowed hosts empty", minimal + "admin: {allowed_hosts: []}\n", func(t *testing.T, c *Config) {
			if len(c.Admin.AllowedHosts) != 0 {
				t.Errorf("allowed_hosts %q, want none", c.Admin.AllowedHosts)
			}
		}},
		{"admin on a local_port of another address", strings.Replace(minimal, "80", "8080", 1) + "listen: {ip: 192.0.2.10}\nadmin: {address: 192.0.2.11, port: 8080}\n", nil},
		{"interface name of 15 characters", minimal + "interfaces: [abcdefghijklmno, eth0.100, br-lan]\n", nil},
		{"kubernetes without kubeconfig", "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: default, service: web}\n", func(t *testing.T, c *Config) {
			k := c.Provider.Kubernetes
			if k == nil || c.Provider.Static != nil || *k != (KubernetesProvider{Namespace: "default", Service: "web"}) {
				t.Errorf("Provider = %+v", c.Provider)
			}
		}},
		{"kubernetes port_name and remote_port from discovery", "ports:\n  - local_port: 80\n  - {local_port: 443, remote_port: 8443}\nprovider:\n  kubernetes: {namespace: default, service: web, port_name: https-alt, kubeconfig: /etc/xlb/kubeconfig}\n", func(t *testing.T, c *Config) {
			if k := *c.Provider.Kubernetes; k != (KubernetesProvider{Namespace: "default", Service: "web", Kubeconfig: "/etc/xlb/kubeconfig", PortName: "https-alt"}) {
				t.Errorf("Kubernetes = %+v", k)
			}
			if want := []PortMapping{{80, 0}, {443, 8443}}; !slices.Equal(c.Ports, want) {
				t.Errorf("Ports = %v, want %v (0: the endpoint's port)", c.Ports, want)
			}
		}},
		{"kubernetes after ports still leaves remote_port to discovery", "provider:\n  kubernetes: {namespace: default, service: web}\nports:\n  - local_port: 80\n", func(t *testing.T, c *Config) {
			if want := []PortMapping{{80, 0}}; !slices.Equal(c.Ports, want) {
				t.Errorf("Ports = %v, want %v", c.Ports, want)
			}
		}},
		{"static: omitted remote_port is local_port, whatever the order", backendsOnly + "ports:\n  - local_port: 80\n", func(t *testing.T, c *Config) {
			if want := []PortMapping{{80, 80}}; !slices.Equal(c.Ports, want) {
				t.Errorf("Ports = %v, want %v", c.Ports, want)
			}
		}},
		{"kubernetes port_name at 63 characters", "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: default, service: web, port_name: " + strings.Repeat("p", 63) + "}\n", nil},
		{"kubernetes empty port_name", "ports:\n  - local_port: 80\nprovider:\n  kubernetes: {namespace: default, service: web, port_name: \"\"}\n", nil},
		{"backend names differ, default from IP", "ports:\n  - local_port: 80\nprovider:\n  static:\n    backends:\n      - ip: 10.0.0.1\n      - {name: b, ip: 10.0.0.2}\n", func(t *testing.T, c *Config) {
			bs := c.Provider.Static.Backends
			if bs[0].Name != "10.0.0.1" || bs[1].Name != "b" {
				t.Errorf("Backends = %+v", bs)
			}
		}},
		{"null values are omitted", minimal + "name:\nadmin: ~\ninterfaces:\n", func(t *testing.T, c *Config) {
			if c.Name != DefaultName || c.Admin.Port != DefaultAdminPort || c.Interfaces != nil {
				t.Errorf("defaults not kept: %+v", c)
			}
		}},
		{"numeric-looking name is a string", minimal + "name: 2024\n", func(t *testing.T, c *Config) {
			if c.Name != "2024" {
				t.Errorf("Name = %q, want 2024", c.Name)
			}
		}},
		{"aliases are followed", minimal + "admin: {port: &p 9000}\nflow_table: {max_connections: *p}\n", func(t *testing.T, c *Config) {
			if c.FlowTable.MaxConnections != 9000 {
				t.Errorf("MaxConnections = %d, want 9000", c.FlowTable.MaxConnections)
			}
		}},
		{"state_dir is cleaned", minimal + "state_dir: /sys/fs/bpf/xlb/\n", func(t *testing.T, c *Config) {
			if c.StateDir != "/sys/fs/bpf/xlb" {
				t.Errorf("StateDir = %q", c.StateDir)
			}
		}},
		{"orphan_ttl_secs at seven days", minimal + "orphan_ttl_secs: 604800\n", nil},
		{"embryonic_ttl_secs at the floor", minimal + "flow_table: {embryonic_ttl_secs: 1}\n", func(t *testing.T, c *Config) {
			if c.FlowTable.EmbryonicTTL != time.Second {
				t.Errorf("EmbryonicTTL = %v, want 1s", c.FlowTable.EmbryonicTTL)
			}
		}},
		{"embryonic_ttl_secs up to a raised orphan ttl", minimal + "orphan_ttl_secs: 900\nflow_table: {embryonic_ttl_secs: 900}\n", nil},
		{"embryonic_ttl_secs below an orphan ttl raised to its minimum", minimal + "flow_table: {embryonic_ttl_secs: 300}\n", nil},
		{"one snat address is a list of one", minimal + "snat: {ip: 198.51.100.1}\n", func(t *testing.T, c *Config) {
			if c.SNAT.Auto || !slices.Equal(c.SNAT.IPs, []netip.Addr{netip.MustParseAddr("198.51.100.1")}) {
				t.Errorf("SNAT = %+v", c.SNAT)
			}
		}},
		{"eight snat addresses in file order", minimal + "snat:\n  ip: [10.0.0.8, 10.0.0.7, 10.0.0.6, 10.0.0.5, 10.0.0.4, 10.0.0.3, 10.0.0.2, 10.0.0.1]\n", func(t *testing.T, c *Config) {
			if len(c.SNAT.IPs) != 8 || c.SNAT.IPs[0] != netip.MustParseAddr("10.0.0.8") || c.SNAT.IPs[7] != netip.MustParseAddr("10.0.0.1") {
				t.Errorf("SNAT.IPs = %v", c.SNAT.IPs)
			}
		}},
		{"local_port in snat range, listen address not in the list", "ports:\n  - local_port: 45000\n" + backendsOnly + "listen: {ip: 192.0.2.10}\nsnat: {ip: [192.0.2.20, 192.0.2.21]}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml)
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestTooManyInterfaces(t *testing.T) {
	src := minimal + "interfaces: ["
	for i := 0; i <= MaxInterfaces; i++ {
		if i > 0 {
			src += ", "
		}
		src += "e" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	src += "]\n"
	_, _, err := Parse([]byte(src), "t.yaml")
	want := "t.yaml:7: interfaces: at most 64 interfaces are supported, got 65"
	if err == nil || err.Error() != want {
		t.Fatalf("err %v\nwant %s", err, want)
	}
}

// TestWarnings (issue 28): a setting the packaged unit or a fleet would
// trip over is a warning with file, line and field, not an error: an admin
// or metrics port below 1024 (the unit has no CAP_NET_BIND_SERVICE), a BGP
// router id that is a service address the fleet's hosts share (RFC 6286).
func TestWarnings(t *testing.T) {
	const listen = "listen: {ip: 192.0.2.10}\n" // line 7
	const bgp = "bgp:\n  local_asn: 64512\n  announce: [listen, 203.0.113.7/32]\n  peers:\n    - {address: 198.51.100.1, asn: 64513}\n"
	unique := "RFC 6286 wants the router id unique in the AS: use this host's own address, or auto (its address toward the first peer)"
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"ports from 1024", minimal + "admin: {port: 1024}\nmetrics: {port: 9642}\n", nil},
		{"admin port 80", minimal + "admin: {port: 80}\n", []string{
			"t.yaml:7: admin.port: 80 is below 1024: binding it needs CAP_NET_BIND_SERVICE, which the packaged xlb.service does not grant (CapabilityBoundingSet=CAP_BPF CAP_NET_ADMIN), so the start would fail; use a port from 1024, or add the capability in a drop-in (systemctl edit xlb)"}},
		{"metrics port 1023", minimal + "metrics:\n  port: 1023\n", []string{
			"t.yaml:8: metrics.port: 1023 is below 1024: binding it needs CAP_NET_BIND_SERVICE, which the packaged xlb.service does not grant (CapabilityBoundingSet=CAP_BPF CAP_NET_ADMIN), so the start would fail; use a port from 1024, or add the capability in a drop-in (systemctl edit xlb)"}},
		{"router id auto", minimal + listen + bgp, nil},
		{"router id of the host", minimal + listen + bgp + "  router_id: 198.51.100.7\n", nil},
		{"router id is the listen address", minimal + listen + bgp + "  router_id: 192.0.2.10\n", []string{
			"t.yaml:13: bgp.router_id: 192.0.2.10 is the listen address, which every host announcing this service shares; " + unique}},
		{"router id is an announced /32", minimal + listen + bgp + "  router_id: 203.0.113.7\n", []string{
			"t.yaml:13: bgp.router_id: 203.0.113.7 is an announced service address, which every host announcing it shares; " + unique}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, warnings, err := parseT(t, tt.yaml)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if strings.Join(warnings, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("warnings\n%s\nwant\n%s", strings.Join(warnings, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
