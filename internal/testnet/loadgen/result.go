package loadgen

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Result is what one Run measured.
type Result struct {
	Config  Config // with defaults filled in
	Start   time.Time
	Elapsed time.Duration // until the last worker finished
	// Completed counts connections that got the whole reply and closed.
	Completed int
	// Windows are the completions in each whole Config.Window since
	// Start: Windows[i] counts [Start+i*Window, Start+(i+1)*Window).
	// Completions after the last whole window within Config.Duration
	// are in Completed only.
	Windows []int
	// Failures counts failed connections by kind.
	Failures [numFailures]int
	// Errors are up to 10 examples of failures, in no particular order.
	Errors []error
	// Connects are the connect times of the connections that were
	// established, RefusedIn those of connects refused with a RST.
	Connects, RefusedIn Latencies
}

func merge(cfg Config, start time.Time, elapsed time.Duration, ws []*worker) *Result {
	r := &Result{Config: cfg, Start: start, Elapsed: elapsed}
	whole := int(cfg.Duration / cfg.Window)
	r.Windows = make([]int, whole)
	var connects, refusals []time.Duration
	for _, w := range ws {
		for i, n := range w.windows {
			r.Completed += n
			if i < whole {
				r.Windows[i] += n
			}
		}
		for k, n := range w.failures {
			r.Failures[k] += n
		}
		if room := maxErrors - len(r.Errors); room > 0 {
			r.Errors = append(r.Errors, w.firstErrs[:min(room, len(w.firstErrs))]...)
		}
		connects = append(connects, w.connects...)
		refusals = append(refusals, w.refusals...)
	}
	r.Connects, r.RefusedIn = newLatencies(connects), newLatencies(refusals)
	return r
}

// Failed is the number of failed connections of every kind.
func (r *Result) Failed() int {
	n := 0
	for _, f := range r.Failures {
		n += f
	}
	return n
}

// Rate is completed connections per second over the whole run.
func (r *Result) Rate() float64 { return float64(r.Completed) / r.Elapsed.Seconds() }

// Offered describes the load offered: "unpaced" or the paced rate.
func (r *Result) Offered() string {
	if r.Config.Rate == 0 {
		return "unpaced"
	}
	return fmt.Sprintf("offered %.0f/s", r.Config.Rate)
}

// WindowRates are Windows as connections per second.
func (r *Result) WindowRates() []float64 {
	out := make([]float64, len(r.Windows))
	for i, n := range r.Windows {
		out[i] = float64(n) / r.Config.Window.Seconds()
	}
	return out
}

// LowestWindow is the index of the window with the fewest completions
// relative to the first, and that ratio (windows[i] / windows[0]); -1 and
// 0 without windows or with an empty first window.
func (r *Result) LowestWindow() (int, float64) {
	if len(r.Windows) == 0 || r.Windows[0] == 0 {
		return -1, 0
	}
	i := 0
	for j, n := range r.Windows {
		if n < r.Windows[i] {
			i = j
		}
	}
	return i, float64(r.Windows[i]) / float64(r.Windows[0])
}

// FailureSummary lists the non-zero failure counts ("refused=3
// connect-timeout=1"), or "none".
func (r *Result) FailureSummary() string {
	var parts []string
	for k, n := range r.Failures {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%v=%d", Failure(k), n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// String is a one-paragraph summary for test logs.
func (r *Result) String() string {
	rates := r.WindowRates()
	ws := make([]string, len(rates))
	for i, x := range rates {
		ws[i] = fmt.Sprintf("%.0f", x)
	}
	from := ""
	if n := len(r.Config.Sources); n > 0 {
		from = fmt.Sprintf(" from %d source addresses", n)
	}
	return fmt.Sprintf("%v to %v%s, %d workers, %s, %v: %d connections (achieved %.0f/s); per %v window /s: [%s]; connect %v; refused connects %v; failures: %s",
		r.Config.Close, r.Config.Target, from, r.Config.Workers, r.Offered(), r.Elapsed.Round(time.Millisecond), r.Completed, r.Rate(),
		r.Config.Window, strings.Join(ws, " "), r.Connects, r.RefusedIn, r.FailureSummary())
}

// Latencies are durations in ascending order.
type Latencies []time.Duration

func newLatencies(ds []time.Duration) Latencies {
	slices.Sort(ds)
	return Latencies(ds)
}

// Max is the longest (0 when empty).
func (l Latencies) Max() time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[len(l)-1]
}

// Quantile is the q-quantile (0 <= q <= 1, nearest rank; 0 when empty).
func (l Latencies) Quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q * float64(len(l)-1))
	return l[max(0, min(i, len(l)-1))]
}

// Over counts the durations longer than d.
func (l Latencies) Over(d time.Duration) int {
	i, _ := slices.BinarySearch(l, d+1)
	return len(l) - i
}

func (l Latencies) String() string {
	if len(l) == 0 {
		return "none"
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return fmt.Sprintf("n=%d p50=%v p99=%v p99.9=%v max=%v", len(l), r(l.Quantile(0.5)), r(l.Quantile(0.99)), r(l.Quantile(0.999)), r(l.Max()))
}
