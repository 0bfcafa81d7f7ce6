package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/test/xlbproc"
)

// Files of the results directory.
const (
	reportFile  = "results.md"
	resultsFile = "results.json"
	plotFile    = "peers.png"
)

// openFiles is the descriptor limit the run needs: the idle load's pairs
// are two sockets each in this process (client and backend ends), and the
// proxies, which inherit it, hold two per pair too.
const openFiles = 1 << 20

func main() {
	if helper, err := runHelper(os.Args[1:]); helper {
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers helper:", err)
			os.Exit(1)
		}
		return
	}
	if err := benchPeers(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: the flag package printed the usage
		}
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
}

func benchPeers(args []string) error {
	o, err := parseOptions(args, environ)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, XDP, iptables)")
	}
	if len(o.From) > 0 {
		return reportOn(o)
	}
	if err := checkNeeds(o.Peers); err != nil {
		return err
	}
	if err := raiseOpenFiles(); err != nil {
		return err
	}
	// The daemons and proxies are this process's children; a daemon's
	// successor after a hand-off would be too (there are none here).
	if err := xlbproc.SetChildSubreaper(); err != nil {
		return err
	}
	if o.Out == "" {
		o.Out = filepath.Join(os.TempDir(), "xlb-bench-peers-"+time.Now().UTC().Format("20060102-150405"))
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	e, err := newEnv(o)
	if err != nil {
		return err
	}
	defer e.close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		if left := xlbproc.ReapOrphans(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "benchpeers: killed processes left running: %v\n", left)
		}
	}()
	if c := enableXDPStats(); c != nil {
		defer c.Close()
	}
	r := &run{Command: commandLine(args), Options: o, Machine: readMachine(), Started: time.Now().UTC()}
	r.Machine.XLB = firstLine(e.xlbBinary, "--version")
	if o.Baseline != "" {
		r.Machine.Baseline = firstLine(o.Baseline, "--version")
	}
	fmt.Fprintf(os.Stderr, "benchpeers: results in %s\n", o.Out)
	schedule(ctx, e, func(res result) {
		r.Results = append(r.Results, res)
		logResult(res)
		if err := r.save(filepath.Join(o.Out, resultsFile)); err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers:", err)
		}
	})
	r.Finished = time.Now().UTC()
	if err := r.save(filepath.Join(o.Out, resultsFile)); err != nil {
		return err
	}
	return errors.Join(writeAll(r, o), ctx.Err())
}

// reportOn writes the report of earlier runs' results files (-from).
func reportOn(o options) error {
	r, err := loadRuns(o.From)
	if err != nil {
		return err
	}
	if o.Out == "" && o.Doc == "" {
		return errors.New("-from needs -out or -doc")
	}
	if o.Out != "" {
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return err
		}
		if err := r.save(filepath.Join(o.Out, resultsFile)); err != nil {
			return err
		}
	}
	return writeAll(r, o)
}

// writeAll writes the report and plot into -out and, with -doc, to that
// file with the plot beside it.
func writeAll(r *run, o options) error {
	if o.Out != "" {
		if err := writeOutputs(r, o.Out, reportFile, plotFile); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "benchpeers: report %s\n", filepath.Join(o.Out, reportFile))
	}
	if o.Doc != "" {
		base := filepath.Base(o.Doc)
		plot := strings.TrimSuffix(base, filepath.Ext(base)) + "-peers.png"
		if err := writeOutputs(r, filepath.Dir(o.Doc), base, plot); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "benchpeers: report also in %s\n", o.Doc)
	}
	return nil
}

// raiseOpenFiles raises the descriptor limit to openFiles, or, without
// CAP_SYS_RESOURCE, to the hard limit.
func raiseOpenFiles() error {
	if unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: openFiles, Max: openFiles}) == nil {
		return nil
	}
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	l.Cur = l.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("open files limit: %w", err)
	}
	fmt.Fprintf(os.Stderr, "benchpeers: open files limited to %d (no CAP_SYS_RESOURCE to raise the hard limit)\n", l.Max)
	return nil
}

// writeOutputs writes the plot and the report (which shows it) into dir.
func writeOutputs(r *run, dir, report, plot string) error {
	drawn, err := writePlot(r, filepath.Join(dir, plot))
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if !drawn {
		plot = ""
	}
	var b bytes.Buffer
	writeReport(&b, r, plot)
	return os.WriteFile(filepath.Join(dir, report), b.Bytes(), 0o644)
}

func logResult(r result) {
	switch {
	case r.Skipped != "":
		fmt.Fprintf(os.Stderr, "  skipped: %s\n", r.Skipped)
	case r.Error != "":
		fmt.Fprintf(os.Stderr, "  FAILED: %s\n", r.Error)
	default:
		fmt.Fprintf(os.Stderr, "  %s %s, p50 %v p99 %v, CPU %.0f%%, %v/%s, failed %d %s\n",
			number(r.Value), r.Unit, r.P50, r.P99, 100*r.CPUBusy, r.CPUPerOp, r.Op, r.Failed, r.Note)
	}
}

// commandLine is how this run was started, for the report: the
// BENCH_PEERS_* environment, then the program and its arguments.
func commandLine(args []string) string {
	var parts []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "BENCH_PEERS_") {
			parts = append(parts, kv)
		}
	}
	return strings.Join(append(append(parts, "go run ./test/benchpeers"), args...), " ")
}
