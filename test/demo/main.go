// Command demo is `make demo`: it builds a one-arm lab (DESIGN §7), runs the
// real xlb daemon in it, sends a few hundred TCP connections through the
// listen address, prints which backend served how many, and removes
// everything again.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/test/lab"
	"github.com/xlbproject/xlb/test/xlbproc"
)

//go:embed demo.yaml
var demoConfig string

// service is where demo.yaml makes xlb listen: XLB's address in the lab.
var service = netip.AddrPortFrom(testnet.XLBFrontIP, 80)

// demoBackends is the number of backends in the lab and in demo.yaml.
const demoBackends = 3

func main() {
	binary := flag.String("xlb", "bin/xlb", "path of the xlb binary")
	ctl := flag.String("xlbctl", "bin/xlbctl", "path of the xlbctl binary")
	conns := flag.Int("connections", 300, "client connections to open")
	parallel := flag.Int("parallel", 8, "connections in flight at once")
	verbose := flag.Bool("v", false, "show the daemon's log as it runs")
	flag.Parse()
	if err := run(*binary, *ctl, *conns, *parallel, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

func run(binary, ctl string, n, parallel int, verbose bool) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root: the demo creates network namespaces and loads XDP programs")
	}
	last := testnet.OneArmBackendIP(demoBackends - 1).As4()
	fmt.Printf("== building the one-arm lab: client %s, xlb %s, backends %s-%d\n",
		testnet.ClientIP(0), testnet.XLBFrontIP, testnet.OneArmBackendIP(0), last[3])
	l, err := lab.Start(lab.Options{Topology: lab.OneArm, Backends: demoBackends})
	if err != nil {
		return err
	}
	var proc *xlbproc.Proc
	stop := l.CloseOnSignal(func() {
		if proc != nil {
			proc.Kill()
		}
	})
	defer stop()
	defer l.Close()
	dir, err := os.MkdirTemp("", "xlb-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Printf("== starting %s in namespace %s\n", binary, l.XLB.NS)
	var tee *os.File
	if verbose {
		tee = os.Stderr
	}
	proc, err = xlbproc.Start(l.XLB, binary, dir, demoConfig, xlbproc.Options{Tee: tee})
	if err != nil {
		return err
	}
	defer proc.Kill()
	if err := proc.WaitLog("xlb running", 30*time.Second); err != nil {
		return err
	}
	fmt.Print(indent(grep(proc.Log(), "XDP program attached", "routable backend set published")))

	fmt.Printf("== opening %d connections to %s, %d at a time, each echoing 4 KiB\n", n, service, parallel)
	var failed atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := echoOnce(l.Client()); err != nil {
				if failed.Add(1) == 1 {
					fmt.Fprintf(os.Stderr, "   first failure: %v\n", err)
				}
			}
		}()
	}
	wg.Wait()
	// the servers finish their side of each connection just after the client
	waitServers(l, 10*time.Second)

	fmt.Println("== backends as they saw it")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tCONNECTIONS\tBYTES ECHOED\tSOURCE ADDRESSES SEEN")
	for _, b := range l.Backends {
		st := b.Stats()
		var srcs []string
		for a := range st.Remotes {
			srcs = append(srcs, a.String())
		}
		sort.Strings(srcs)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", b.IP(), st.Accepted, st.BytesOut, srcs)
	}
	tw.Flush()
	fmt.Printf("   %d of %d connections failed\n", failed.Load(), n)

	// let one maintenance cycle see the closed connections, then ask xlb
	time.Sleep(1500 * time.Millisecond)
	for _, cmd := range [][]string{{"status"}, {"backends"}, {"flows"}} {
		fmt.Printf("== xlbctl %s (inside %s, admin API on 127.0.0.1:8642)\n", cmd[0], l.XLB.NS)
		out, err := l.XLB.Command(context.Background(), ctl, cmd...).CombinedOutput()
		fmt.Print(indent(string(out)))
		if err != nil {
			return fmt.Errorf("xlbctl %s: %v", cmd[0], err)
		}
	}

	fmt.Println("== stopping xlb (SIGTERM)")
	code, err := proc.Stop(30 * time.Second)
	if err != nil {
		return err
	}
	fmt.Print(indent(grep(proc.Log(), "xlb stopped")))
	if code != 0 {
		return fmt.Errorf("xlb exited with status %d:\n%s", code, proc.Log())
	}
	if failed.Load() > 0 {
		return fmt.Errorf("%d connections failed", failed.Load())
	}
	fmt.Println("== removing the lab")
	return nil
}

// waitServers polls until every accepted connection has completed on its backend.
func waitServers(l *lab.Lab, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		busy := false
		for _, b := range l.Backends {
			if st := b.Stats(); st.Completed < st.Accepted {
				busy = true
			}
		}
		if !busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// echoOnce sends 4 KiB of random bytes through XLB and checks the echo.
func echoOnce(client *testnet.Host) error {
	msg := make([]byte, 4096)
	rand.Read(msg)
	return client.EchoCheck(service.String(), msg, 10*time.Second)
}

func grep(log string, subs ...string) string {
	var out bytes.Buffer
	for _, line := range bytes.Split([]byte(log), []byte("\n")) {
		for _, s := range subs {
			if bytes.Contains(line, []byte(s)) {
				out.Write(line)
				out.WriteByte('\n')
				break
			}
		}
	}
	return out.String()
}

func indent(s string) string {
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimRight([]byte(s), "\n"), []byte("\n")) {
		if len(line) > 0 {
			out.WriteString("   ")
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.String()
}
