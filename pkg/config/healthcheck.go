package config

import (
	"encoding/hex"
	"strings"
	"time"
	"unicode"

	yaml "go.yaml.in/yaml/v3"
)

// HealthCheck is the optional `health_check:` block (DESIGN §6b, issue 14):
// one active check per backend, run by pkg/backend/health from the host
// with the route the data path uses.
type HealthCheck struct {
	// Type is HealthCheckTCP (connect, then close), HealthCheckHTTP
	// (GET Path, expect ExpectStatus) or, for a proto udp service only,
	// HealthCheckUDP (send Payload, expect a reply; issue 31). YAML
	// "type"; required.
	Type string
	// Port is the port checked, 1..65535; 0 (YAML "port" omitted or 0)
	// means the backend's port of the first port mapping: its
	// remote_port, or the backend's own port when remote_port comes from
	// discovery (provider.kubernetes).
	Port uint16
	// Interval is the time between two checks of one backend. YAML
	// "interval_ms"; MinHealthCheckInterval..MaxHealthCheckInterval;
	// default DefaultHealthCheckInterval.
	Interval time.Duration
	// Timeout bounds one check (connect, or the whole HTTP exchange).
	// YAML "timeout_ms"; MinHealthCheckTimeout..Interval; default
	// DefaultHealthCheckTimeout, or Interval when that is shorter.
	Timeout time.Duration
	// Rise is the number of consecutive successes that make an unhealthy
	// backend healthy; Fall the number of consecutive failures that make
	// a healthy one unhealthy. YAML "rise", "fall"; 1..MaxHealthCheckCount;
	// defaults DefaultHealthCheckRise, DefaultHealthCheckFall.
	Rise, Fall int
	// Path is the HTTP request target: it starts with "/" and has no
	// whitespace or control characters. YAML "path"; http only (setting
	// it with tcp is an error); default DefaultHealthCheckPath for http,
	// "" for tcp.
	Path string
	// ExpectStatus is the HTTP status a healthy backend answers. YAML
	// "expect_status"; 100..599; http only; default
	// DefaultHealthCheckExpectStatus for http, 0 for tcp.
	ExpectStatus int
	// Payload is the datagram a HealthCheckUDP check sends; Expect, when
	// set, the bytes its reply must start with (without it any reply
	// passes). Raw bytes (a string keeps HealthCheck comparable). YAML
	// "payload_hex" (required with udp; 1..MaxHealthCheckPayload bytes),
	// "expect_hex" (optional; 1..MaxHealthCheckExpect bytes), hex digits
	// of either case; udp only (issue 31).
	Payload, Expect string
}

// health_check types.
const (
	HealthCheckTCP  = "tcp"
	HealthCheckHTTP = "http"
	HealthCheckUDP  = "udp"
)

// health_check defaults (DESIGN §6b) and limits. The limits are this
// package's: a check more often than every 100 ms per backend is load, not
// detection; a timeout below 10 ms fails on any scheduling hiccup; an
// interval up to an hour and a count up to 100 cover any slow probe.
const (
	DefaultHealthCheckInterval     = 2 * time.Second
	DefaultHealthCheckTimeout      = time.Second
	DefaultHealthCheckRise         = 2
	DefaultHealthCheckFall         = 3
	DefaultHealthCheckPath         = "/"
	DefaultHealthCheckExpectStatus = 200

	MinHealthCheckInterval = 100 * time.Millisecond
	MaxHealthCheckInterval = time.Hour
	MinHealthCheckTimeout  = 10 * time.Millisecond
	MaxHealthCheckCount    = 100
	// MaxHealthCheckPayload bounds a udp check's datagram (a DNS query
	// is tens of bytes; 512 is DNS's classic UDP size); MaxHealthCheckExpect
	// the reply's prefix it must start with.
	MaxHealthCheckPayload = 512
	MaxHealthCheckExpect  = 64
)

// decodeHealthCheck reads the health_check mapping. Ranges of single
// values are checked here; the type, the http-only fields and the timeout's
// ceiling (the interval) are checked by validateHealthCheck. Defaults that
// depend on other fields (the timeout, path and expect_status) are filled
// in here once the whole mapping is read.
func (d *decoder) decodeHealthCheck(n *yaml.Node, path string) *HealthCheck {
	hc := &HealthCheck{
		Interval: DefaultHealthCheckInterval,
		Rise:     DefaultHealthCheckRise,
		Fall:     DefaultHealthCheckFall,
	}
	millis := func(dst *time.Duration, lo, hi time.Duration, unit string) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, lo.Milliseconds(), hi.Milliseconds(), unit); ok {
				*dst = time.Duration(v) * time.Millisecond
			}
		}
	}
	count := func(dst *int, lo, hi int64) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, lo, hi, ""); ok {
				*dst = int(v)
			}
		}
	}
	d.mapping(n, path, []field{
		{"type", d.into(&hc.Type)},
		{"port", func(n *yaml.Node, p string) {
			if v, ok := d.integer(n, p, 0, 65535, ""); ok {
				hc.Port = uint16(v)
			}
		}},
		{"interval_ms", millis(&hc.Interval, MinHealthCheckInterval, MaxHealthCheckInterval, " milliseconds")},
		{"timeout_ms", millis(&hc.Timeout, MinHealthCheckTimeout, MaxHealthCheckInterval, " milliseconds (and at most interval_ms)")},
		{"rise", count(&hc.Rise, 1, MaxHealthCheckCount)},
		{"fall", count(&hc.Fall, 1, MaxHealthCheckCount)},
		{"path", d.into(&hc.Path)},
		{"expect_status", count(&hc.ExpectStatus, 100, 599)},
		{"payload_hex", d.hexBytes(&hc.Payload, MaxHealthCheckPayload)},
		{"expect_hex", d.hexBytes(&hc.Expect, MaxHealthCheckExpect)},
	})
	if !d.set[childPath(path, "timeout_ms")] {
		hc.Timeout = min(DefaultHealthCheckTimeout, hc.Interval)
	}
	if hc.Type == HealthCheckHTTP {
		if !d.set[childPath(path, "path")] {
			hc.Path = DefaultHealthCheckPath
		}
		if !d.set[childPath(path, "expect_status")] {
			hc.ExpectStatus = DefaultHealthCheckExpectStatus
		}
	}
	return hc
}

// hexBytes returns a decode function for a string of hex digits (either
// case, an even number of them) naming 1..most bytes, stored raw in dst.
func (d *decoder) hexBytes(dst *string, most int) func(*yaml.Node, string) {
	return func(n *yaml.Node, p string) {
		s, ok := d.str(n, p)
		if !ok {
			return
		}
		b, err := hex.DecodeString(s)
		switch {
		case err != nil:
			d.fail(n.Line, p, "must be an even number of hex digits (0-9, a-f), got %q", s)
		case len(b) == 0 || len(b) > most:
			d.fail(n.Line, p, "must name 1 to %d bytes (2 to %d hex digits), got %d", most, 2*most, len(b))
		default:
			*dst = string(b)
		}
	}
}

// healthCheck: a known type, udp only for a proto udp service; path and
// expect_status only with http, payload_hex (required) and expect_hex
// only with udp; a path that can be sent as an HTTP request target; the
// timeout at most the interval (one check in flight per backend, DESIGN
// §6b). proto is the service's.
func (v *validator) healthCheck(path string, hc *HealthCheck, proto string) {
	if hc == nil || v.failed(path) {
		return
	}
	only := func(typ string, fields ...string) {
		for _, f := range fields {
			if p := childPath(path, f); v.set[p] && !v.failed(p) {
				v.errorf(p, "only type %s has %s (type is %s)", typ, f, hc.Type)
			}
		}
	}
	tp := childPath(path, "type")
	if v.required(tp) {
		switch hc.Type {
		case HealthCheckTCP:
			only(HealthCheckHTTP, "path", "expect_status")
			only(HealthCheckUDP, "payload_hex", "expect_hex")
		case HealthCheckHTTP:
			only(HealthCheckUDP, "payload_hex", "expect_hex")
			p := childPath(path, "path")
			if !v.failed(p) && (!strings.HasPrefix(hc.Path, "/") || strings.ContainsFunc(hc.Path, badPathRune)) {
				v.errorf(p, `must start with "/" and contain no whitespace or control characters, got %q`, hc.Path)
			}
		case HealthCheckUDP:
			if proto != ProtoUDP {
				v.errorf(tp, "type udp is for proto udp services; use tcp or http")
				break
			}
			only(HealthCheckHTTP, "path", "expect_status")
			v.required(childPath(path, "payload_hex"))
		default:
			v.errorf(tp, "must be %q, %q or %q, got %q", HealthCheckTCP, HealthCheckHTTP, HealthCheckUDP, hc.Type)
		}
	}
	ip, tp2 := childPath(path, "interval_ms"), childPath(path, "timeout_ms")
	if !v.failed(ip) && !v.failed(tp2) && v.set[tp2] && hc.Timeout > hc.Interval {
		v.errorf(tp2, "must be at most interval_ms (%d), got %d", hc.Interval.Milliseconds(), hc.Timeout.Milliseconds())
	}
}

func badPathRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r)
}

// healthCheckEqual compares two health_check blocks; nil is "no checks".
func healthCheckEqual(a, b *HealthCheck) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// healthCheck renders the block with every field, path and expect_status
// only for http, payload_hex and expect_hex (when set) only for udp
// (where they apply), hex in lower case.
func (m *marshaler) healthCheck(path string, hc *HealthCheck) *yaml.Node {
	n := mapNode(
		"type", str(hc.Type),
		"port", integer(hc.Port),
		"interval_ms", m.millis(childPath(path, "interval_ms"), hc.Interval),
		"timeout_ms", m.millis(childPath(path, "timeout_ms"), hc.Timeout),
		"rise", integer(int64(hc.Rise)),
		"fall", integer(int64(hc.Fall)))
	if hc.Type == HealthCheckHTTP {
		n.Content = append(n.Content,
			str("path"), str(hc.Path),
			str("expect_status"), integer(int64(hc.ExpectStatus)))
	}
	if hc.Type == HealthCheckUDP {
		n.Content = append(n.Content, str("payload_hex"), quoted(hex.EncodeToString([]byte(hc.Payload))))
		if hc.Expect != "" {
			n.Content = append(n.Content, str("expect_hex"), quoted(hex.EncodeToString([]byte(hc.Expect))))
		}
	}
	return n
}

func (m *marshaler) millis(path string, d time.Duration) *yaml.Node {
	if d%time.Millisecond != 0 {
		m.fail("%s: %v is not a whole number of milliseconds", path, d)
	}
	return integer(d.Milliseconds())
}
