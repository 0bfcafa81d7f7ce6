package pins

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xlbproject/xlb/pkg/limits"
)

// A layout 3 routable set naming an id beyond the data path's is refused,
// never truncated into another backend's id.
func TestLayout3SetWithABadID(t *testing.T) {
	s := BackendSet3{Count: 1}
	s.Entries[0] = BackendRef3{IpBe: be32(netip.MustParseAddr("192.0.2.33")), Id: limits.MaxBackends + 3}
	if _, err := backendSetFrom3(nil, ToBytes(&s)); err == nil || !strings.Contains(err.Error(), "backend id 1027") {
		t.Fatalf("got %v", err)
	}
}
