package weblisten

import (
	"net/netip"
	"strings"
	"testing"
)

func TestWarnings(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.0.0.53", "::1", "::ffff:127.0.0.1"} {
		for _, auth := range []bool{false, true} {
			if w := Warnings(Exposure{Name: "metrics", Address: netip.MustParseAddr(a), Auth: auth}); len(w) != 0 {
				t.Errorf("%s auth=%v: warnings %q, want none", a, auth, w)
			}
		}
	}
	if w := Warnings(Exposure{Name: "admin"}); len(w) != 0 {
		t.Errorf("invalid address: %q", w)
	}
	for _, a := range []string{"0.0.0.0", "192.0.2.10", "::"} {
		addr := netip.MustParseAddr(a)
		w := Warnings(Exposure{Name: "metrics", Address: addr, Shows: "reads backend names"})
		if len(w) != 1 || !strings.Contains(w[0], "without authentication") || !strings.Contains(w[0], "reads backend names") ||
			!strings.Contains(w[0], "metrics.web_config_file") || !strings.Contains(w[0], "metrics.address") || !strings.Contains(w[0], a) {
			t.Errorf("%s without auth: %q", a, w)
		}
		w = Warnings(Exposure{Name: "admin", Address: addr, Auth: true})
		if len(w) != 1 || !strings.Contains(w[0], "cleartext") || !strings.Contains(w[0], "admin.web_config_file") || !strings.Contains(w[0], a) {
			t.Errorf("%s with auth, no TLS: %q", a, w)
		}
		if w = Warnings(Exposure{Name: "admin", Address: addr, Auth: true, TLS: true}); len(w) != 0 {
			t.Errorf("%s with auth and TLS: %q", a, w)
		}
	}
}
