package config

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Marshal renders the effective config as YAML in the schema of DESIGN §1,
// in the file's form (the top-level form, or DESIGN §9's services:),
// every field present with its value or default, keys in DESIGN order; it
// is what `xlb check --config F` prints (DESIGN §2). Parsing the output of
// a Config that Parse returned yields an equal Config. A backend's weight
// is written only when it is not the default 1, so that the output (and
// the config digest in the pins) of a file without weights is unchanged;
// a UDP service's udp_unreplied_max only when the file sets it (the
// default follows flow_table.max_connections).
// It fails only for a Config that cannot be written in the schema (an
// address left invalid, a duration that is not whole seconds), which
// Parse never returns.
func (c *Config) Marshal() ([]byte, error) {
	m := &marshaler{}
	root := m.config(c)
	if m.err != nil {
		return nil, m.err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return buf.Bytes(), nil
}

// marshaler builds the node tree, keeping the first error.
type marshaler struct{ err error }

func (m *marshaler) fail(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf("config: marshal: "+format, args...)
	}
}

func (m *marshaler) config(c *Config) *yaml.Node {
	var root *yaml.Node
	if c.Form == FormServices {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range c.Services {
			seq.Content = append(seq.Content, m.service(indexPath("services", i), &c.Services[i]))
		}
		root = mapNode("name", str(c.Name), "services", seq, "mode", str(c.Mode))
	} else {
		root = mapNode(
			"name", str(c.Name),
			"listen", m.listen("", c.Listen),
			"proto", str(c.Proto),
			"mode", str(c.Mode),
			"ports", m.ports(c.Ports),
			"provider", m.provider("", c.Provider))
		if c.HealthCheck != nil {
			root.Content = append(root.Content, str("health_check"), m.healthCheck("health_check", c.HealthCheck))
		}
		if len(c.Services) == 1 && c.Services[0].UDPUnrepliedMax != 0 {
			root.Content = append(root.Content, str("udp_unreplied_max"), integer(c.Services[0].UDPUnrepliedMax))
		}
	}
	root.Content = append(root.Content, mapNode(
		"orphan_ttl_secs", m.seconds("orphan_ttl_secs", c.OrphanTTL),
		"shutdown_timeout", m.seconds("shutdown_timeout", c.ShutdownTimeout),
		"admin", m.admin(c.Admin),
		"metrics", withMetricsSeries(withWebConfig(mapNode(
			"address", m.addr("metrics.address", c.Metrics.Address),
			"port", integer(c.Metrics.Port)), c.Metrics.WebConfigFile), c.Metrics.PerBackend),
		"interfaces", strList(c.Interfaces),
		"xdp_mode", str(c.XDPMode),
		"snat", mapNode(
			"ip", m.snatIPs(c.SNAT),
			"port_range", quoted(fmt.Sprintf("%d-%d", c.SNAT.PortLo, c.SNAT.PortHi))),
		"flow_table", mapNode(
			"max_connections", integer(c.FlowTable.MaxConnections),
			"embryonic_ttl_secs", m.seconds("flow_table.embryonic_ttl_secs", c.FlowTable.EmbryonicTTL),
			"udp_timeout_secs", m.seconds("flow_table.udp_timeout_secs", c.FlowTable.UDPTimeout),
			"udp_stream_timeout_secs", m.seconds("flow_table.udp_stream_timeout_secs", c.FlowTable.UDPStreamTimeout)),
		"state_dir", str(c.StateDir),
	).Content...)
	if c.BGP != nil {
		root.Content = append(root.Content, str("bgp"), m.bgp(c.BGP))
	}
	return root
}

// service renders one service of the services form (DESIGN §9), keys in
// serviceKeys' order; path names it in errors.
func (m *marshaler) service(path string, s *Service) *yaml.Node {
	n := mapNode(
		"name", str(s.Name),
		"listen", m.listen(path, s.Listen),
		"proto", str(s.Proto),
		"ports", m.ports(s.Ports),
		"scheduler", str(s.Scheduler))
	if g := s.Maglev; g != nil {
		mg := mapNode("hash", str(g.Hash))
		if g.TableSize != 0 { // 0: chosen from the backends, written by omitting it
			mg.Content = append(mg.Content, str("table_size"), integer(g.TableSize))
		}
		n.Content = append(n.Content, str("maglev"), mg)
	}
	n.Content = append(n.Content, str("provider"), m.provider(path, s.Provider))
	if s.HealthCheck != nil {
		n.Content = append(n.Content, str("health_check"), m.healthCheck(childPath(path, "health_check"), s.HealthCheck))
	}
	if s.UDPUnrepliedMax != 0 { // 0: the default, written by omitting it
		n.Content = append(n.Content, str("udp_unreplied_max"), integer(s.UDPUnrepliedMax))
	}
	return n
}

// listen renders the listen field of the service at prefix ("" for the
// top-level form).
func (m *marshaler) listen(prefix string, l Listen) *yaml.Node {
	if l.Auto {
		return str("auto")
	}
	return mapNode("ip", m.addr(childPath(prefix, "listen.ip"), l.IP))
}

func (m *marshaler) ports(ps []PortMapping) *yaml.Node {
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, p := range ps {
		n := mapNode("local_port", integer(p.LocalPort))
		if p.RemotePort != 0 { // 0: from discovery, written by omitting it
			n.Content = append(n.Content, str("remote_port"), integer(p.RemotePort))
		}
		seq.Content = append(seq.Content, n)
	}
	return seq
}

func (m *marshaler) provider(prefix string, p Provider) *yaml.Node {
	n := mapNode()
	if s := p.Static; s != nil {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for i, b := range s.Backends {
			bn := mapNode(
				"name", str(b.Name),
				"ip", m.addr(childPath(prefix, fmt.Sprintf("provider.static.backends[%d].ip", i)), b.IP))
			if b.Weight > DefaultWeight { // 0 (a Config built by hand) and 1 are the default
				bn.Content = append(bn.Content, str("weight"), integer(b.Weight))
			}
			seq.Content = append(seq.Content, bn)
		}
		n.Content = append(n.Content, str("static"), mapNode("backends", seq))
	}
	if k := p.Kubernetes; k != nil {
		kn := mapNode("namespace", str(k.Namespace), "service", str(k.Service),
			"kubeconfig", str(k.Kubeconfig), "port_name", str(k.PortName))
		n.Content = append(n.Content, str("kubernetes"), kn)
	}
	return n
}

func (m *marshaler) admin(a Admin) *yaml.Node {
	n := withWebConfig(mapNode(
		"address", m.addr("admin.address", a.Address),
		"port", integer(a.Port)), a.WebConfigFile)
	if a.Auth != nil {
		n.Content = append(n.Content, str("auth"), mapNode("username", str(a.Auth.Username)))
	}
	hosts := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, h := range a.AllowedHosts {
		hosts.Content = append(hosts.Content, str(h))
	}
	n.Content = append(n.Content, str("socket"), str(a.Socket), str("allowed_hosts"), hosts)
	return n
}

// withWebConfig adds a listener's web_config_file to n when it is set.
func withWebConfig(n *yaml.Node, file string) *yaml.Node {
	if file != "" {
		n.Content = append(n.Content, str("web_config_file"), str(file))
	}
	return n
}

// withMetricsSeries adds the metrics section's choice of series.
func withMetricsSeries(n *yaml.Node, perBackend bool) *yaml.Node {
	n.Content = append(n.Content, str("per_backend"), boolean(perBackend))
	return n
}

func (m *marshaler) seconds(path string, d time.Duration) *yaml.Node {
	if d%time.Second != 0 {
		m.fail("%s: %v is not a whole number of seconds", path, d)
	}
	return integer(int64(d / time.Second))
}

func (m *marshaler) addr(path string, a netip.Addr) *yaml.Node {
	if !a.IsValid() {
		m.fail("%s: no address", path)
	}
	return str(a.String())
}

// snatIPs writes snat.ip as the file would: auto, one address, or a flow
// list of several.
func (m *marshaler) snatIPs(s SNAT) *yaml.Node {
	switch {
	case s.Auto:
		return str("auto")
	case len(s.IPs) == 1:
		return m.addr("snat.ip", s.IPs[0])
	case len(s.IPs) == 0:
		m.fail("snat.ip: no address")
	}
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for i, a := range s.IPs {
		n.Content = append(n.Content, m.addr(indexPath("snat.ip", i), a))
	}
	return n
}

// mapNode builds a block mapping from alternating keys and value nodes.
func mapNode(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}

// str is a string scalar; the encoder quotes it when it would otherwise
// read back as another type.
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func quoted(s string) *yaml.Node {
	n := str(s)
	n.Style = yaml.DoubleQuotedStyle
	return n
}

func integer[T ~uint16 | ~uint32 | ~int64](v T) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(v), 10)}
}

func boolean(v bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
}

func strList(ss []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range ss {
		n.Content = append(n.Content, str(s))
	}
	return n
}
