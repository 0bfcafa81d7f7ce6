package instance

import (
	"testing"

	"github.com/xlbproject/xlb/pkg/config"
)

// TestUDPSettings: what the data path gets of the UDP services (issue
// 31): each one's udp_unreplied_max, resolved (a quarter of the flow
// table, at least 1, unless the file sets it; 0 for TCP), and whether the
// SNAT bitmaps need their UDP half.
func TestUDPSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxc   uint32
		svc    config.Service
		want   uint32
		hasUDP bool
	}{
		{"tcp", 1_000_000, config.Service{Proto: "tcp"}, 0, false},
		{"tcp with a stray cap", 1_000_000, config.Service{Proto: "tcp", UDPUnrepliedMax: 7}, 0, false},
		{"udp default: a quarter", 1_000_000, config.Service{Proto: "udp"}, 250_000, true},
		{"udp default rounds down", 1_003, config.Service{Proto: "udp"}, 250, true},
		{"udp default of a tiny table: 1", 3, config.Service{Proto: "udp"}, 1, true},
		{"udp set", 1_000_000, config.Service{Proto: "udp", UDPUnrepliedMax: 50}, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &config.Config{FlowTable: config.FlowTable{MaxConnections: tc.maxc}}
			if got := udpUnrepliedMax(c, tc.svc); got != tc.want {
				t.Errorf("udpUnrepliedMax = %d, want %d", got, tc.want)
			}
			tcp := config.Service{Proto: "tcp"}
			if got := hasUDP([]config.Service{tcp, tc.svc}); got != tc.hasUDP {
				t.Errorf("hasUDP = %v, want %v", got, tc.hasUDP)
			}
		})
	}
	if hasUDP(nil) {
		t.Error("hasUDP(nil)")
	}
}
