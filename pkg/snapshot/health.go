package snapshot

import (
	"time"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// BackendHealth is the status API's view of b's active health checks;
// nil without them (health_check not configured, or b not discovered).
func BackendHealth(b backend.Status) *api.BackendHealth {
	h := b.Health
	if h == nil {
		return nil
	}
	out := &api.BackendHealth{Healthy: h.Healthy, ChecksOKTotal: h.OK, ChecksFailedTotal: h.Failed}
	if h.Known {
		out.LastResult = api.HealthCheckFail
		if h.Last.OK {
			out.LastResult = api.HealthCheckOK
		}
		out.LastCheckUnixMs = h.Last.At.UnixMilli()
		out.LastCheckMs = float64(h.Last.Took) / float64(time.Millisecond)
		out.LastError = h.Last.Err
	}
	return out
}
