// Package health runs the active health checks of health_check in xlb.yaml
// (DESIGN §6b, issue 14): one Checker per discovered backend, which the
// backend manager runs and asks for the verdict. It knows nothing of the
// manager.
//
// Checks:
//   - tcp: a connection to ip:port completes within timeout_ms; it is
//     closed at once.
//   - http: GET path with Host: ip:port and Connection: close; the status
//     line and headers arrive within timeout_ms of the connect's start and
//     the status is expect_status. The body is not read.
//   - udp (UDP services; issue 31): a connected UDP socket sends
//     payload_hex and one datagram comes back within timeout_ms, starting
//     with expect_hex when that is set. A port unreachable fails the check
//     at once ("read: connection refused").
//
// Every check leaves the host as the data path's packets do: from
// Target.Source (the first SNAT address) out of Target.Interface (the
// backend route's egress interface, SO_BINDTODEVICE).
//
// Timing: the first check runs after a uniform delay in
// [0, min(interval × Jitter, FirstDelayMax)) (at most 100 ms); then checks
// start interval × (1 − Jitter … 1) apart (80 … 100 % of interval_ms,
// uniform, drawn per wait), start to start. interval_ms is thus the
// longest gap between two checks: a backend that stops answering is
// unhealthy at most fall × interval_ms after it stopped, plus the last
// check's own time (up to timeout_ms). Checks run one after another on
// Run's goroutine, so at most one is in flight per backend; one that takes
// longer than its interval is followed at once by the next.
//
// Verdict: unknown until the first result, which decides it (pass:
// healthy, fail: unhealthy); then fall consecutive failures make a healthy
// backend unhealthy and rise consecutive successes make an unhealthy one
// healthy. Only these transitions are logged (backend name, ip, and for
// unhealthy the reason: the last check's error).
package health
