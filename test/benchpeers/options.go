package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// options are the run's settings (doc.go lists the flags).
type options struct {
	Reps, LongReps  int
	Duration, Long  time.Duration
	Window, Trickle time.Duration
	Workers         int
	Streams         int
	IdlePairs       int
	Peers, Loads    []string
	Out, Doc        string
	Quick           bool
	// Baseline is an earlier xlb binary, run as the peer xlb-baseline
	// (native mode): the "before" of a change measured in the same run.
	Baseline string `json:",omitempty"`
	// From lists results files of earlier runs to report on (merged, in
	// order) instead of measuring.
	From []string
}

// Full-run defaults (issue 17) and the quick run's replacements.
var (
	fullDefaults = options{
		Reps: 3, LongReps: 1, Duration: 10 * time.Second, Long: 120 * time.Second,
		Window: 10 * time.Second, Trickle: 30 * time.Second, Workers: 16, Streams: 4, IdlePairs: 100000,
	}
	quickDefaults = options{Reps: 1, LongReps: 1, Duration: 3 * time.Second, Long: 20 * time.Second, IdlePairs: 10000}
)

// parseOptions reads args (without the program name) and the
// BENCH_PEERS_* environment through env. A flag on the command line wins
// over the environment, which wins over -quick, which wins over the
// full-run defaults.
func parseOptions(args []string, env func(string) string) (options, error) {
	o := fullDefaults
	fs := flag.NewFlagSet("benchpeers", flag.ContinueOnError)
	var peers, loads string
	fs.IntVar(&o.Reps, "reps", o.Reps, "repetitions")
	fs.IntVar(&o.LongReps, "long-reps", o.LongReps, "repetitions of the long loads")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "each short load")
	fs.DurationVar(&o.Long, "long", o.Long, "the windowed new-connection loads")
	fs.DurationVar(&o.Window, "window", o.Window, "window of the long loads")
	fs.DurationVar(&o.Trickle, "trickle", o.Trickle, "write period of each idle pair")
	fs.IntVar(&o.Workers, "workers", o.Workers, "connection loops of the connection and keepalive loads")
	fs.IntVar(&o.Streams, "streams", o.Streams, "connections of the bulk loads")
	fs.IntVar(&o.IdlePairs, "idle-pairs", o.IdlePairs, "idle connections of the idle load")
	fs.StringVar(&peers, "peers", "", "peers, comma-separated (default: all; xlb-baseline with -baseline)")
	fs.StringVar(&loads, "loads", strings.Join(loadNames(), ","), "loads, comma-separated")
	fs.StringVar(&o.Out, "out", "", "results directory (default: a new one under $TMPDIR)")
	fs.StringVar(&o.Doc, "doc", "", "also write the report to this file and the plot beside it")
	fs.BoolVar(&o.Quick, "quick", false, "development run (1 repetition, short loads)")
	fs.StringVar(&o.Baseline, "baseline", "", "an earlier xlb binary, also run as the peer xlb-baseline (native)")
	var from string
	fs.StringVar(&from, "from", "", "report on these results files (comma-separated, merged) instead of measuring")

	// Environment first, as if given before the command line's flags.
	var envArgs []string
	fs.VisitAll(func(f *flag.Flag) {
		name := "BENCH_PEERS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" {
			envArgs = append(envArgs, "-"+f.Name+"="+v)
		}
	})
	if err := fs.Parse(envArgs); err != nil {
		return o, fmt.Errorf("environment: %w", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.Quick {
		q := quickDefaults
		if !set["reps"] {
			o.Reps = q.Reps
		}
		if !set["long-reps"] {
			o.LongReps = q.LongReps
		}
		if !set["duration"] {
			o.Duration = q.Duration
		}
		if !set["long"] {
			o.Long = q.Long
		}
		if !set["idle-pairs"] {
			o.IdlePairs = q.IdlePairs
		}
	}
	o.Peers, o.Loads, o.From = splitList(peers), splitList(loads), splitList(from)
	if !set["peers"] {
		o.Peers = defaultPeers(o.Baseline != "")
	}
	return o, o.check()
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// check validates o.
func (o options) check() error {
	if o.Reps < 1 {
		return fmt.Errorf("-reps %d: want at least 1", o.Reps)
	}
	if o.LongReps < 1 {
		return fmt.Errorf("-long-reps %d: want at least 1", o.LongReps)
	}
	if o.Duration < time.Second || o.Long < time.Second || o.Window < time.Second || o.Window > o.Long {
		return fmt.Errorf("-duration %v, -long %v, -window %v: want at least 1s each, window within long", o.Duration, o.Long, o.Window)
	}
	if o.Workers < 1 || o.Streams < 1 || o.IdlePairs < 1 || o.Trickle < time.Second {
		return fmt.Errorf("-workers %d, -streams %d, -idle-pairs %d, -trickle %v: want positive (trickle at least 1s)", o.Workers, o.Streams, o.IdlePairs, o.Trickle)
	}
	if len(o.Peers) == 0 || len(o.Loads) == 0 {
		return fmt.Errorf("no peers or no loads")
	}
	for _, p := range o.Peers {
		if !slices.Contains(peerNames(), p) {
			return fmt.Errorf("unknown peer %q (have %s)", p, strings.Join(peerNames(), ", "))
		}
	}
	if len(o.From) == 0 {
		if slices.Contains(o.Peers, baselinePeer) && o.Baseline == "" {
			return fmt.Errorf("peer %s needs -baseline (an earlier xlb binary)", baselinePeer)
		}
		if o.Baseline != "" {
			if fi, err := os.Stat(o.Baseline); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return fmt.Errorf("-baseline %s: not an executable file (%v)", o.Baseline, err)
			}
		}
	}
	for _, l := range o.Loads {
		if !slices.Contains(loadNames(), l) {
			return fmt.Errorf("unknown load %q (have %s)", l, strings.Join(loadNames(), ", "))
		}
	}
	return nil
}

// environ is os.Getenv, for parseOptions.
func environ(name string) string { return os.Getenv(name) }
