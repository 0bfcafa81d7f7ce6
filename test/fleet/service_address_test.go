package fleet

import (
	"context"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/pkg/config"
)

// metricsFrom sends one HTTP/1.0 GET /metrics from the client to addr's
// metrics port and returns the answer's first line ("" when the
// connection was reset or closed without an answer).
func (f *fleet) metricsFrom(t *testing.T, addr netip.Addr) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := f.l.Client.Dial(ctx, netip.AddrPortFrom(addr, config.DefaultMetricsPort).String())
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.0\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	first, _, _ := strings.Cut(string(b), "\r\n")
	return first, err
}

// serviceAddressClosed: the VIP is on every host's lo, so a client of
// the service reaches the metrics listener (bound to 0.0.0.0) through
// it; each xlb resets such connections, while the host's own address
// still serves the scrape.
func (f *fleet) serviceAddressClosed(t *testing.T) {
	for i := 0; i < 3; i++ {
		if first, err := f.metricsFrom(t, VIP); first != "" {
			t.Errorf("GET %s:%d/metrics from the client answered %q (%v), want a reset", VIP, config.DefaultMetricsPort, first, err)
		}
	}
	for _, h := range f.l.Hosts {
		if first, err := f.metricsFrom(t, h.Addr); !strings.Contains(first, " 200 ") {
			t.Errorf("%s: GET %s:%d/metrics from the client: %q %v, want 200", h.Inventory, h.Addr, config.DefaultMetricsPort, first, err)
		}
	}
}
