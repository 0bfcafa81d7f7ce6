package instance

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/status/api"
	"github.com/xlbproject/xlb/test/lab"
)

// pinnedConfig is labConfig with state_dir on a private bpffs.
func pinnedConfig(t *testing.T, l *lab.Lab) *config.Config {
	c := labConfig(l)
	c.StateDir = testnet.StateDir(t)
	return c
}

func startPinned(l *lab.Lab, c *config.Config, dir string) (*Instance, error) {
	var in *Instance
	err := l.XLB.Do(func() error {
		var err error
		in, err = Start(context.Background(), c, Options{Log: quietLog(), JournalDir: dir})
		return err
	})
	return in, err
}

// echoLine writes a line on c and reads it back from the echo backend.
func echoLine(t *testing.T, r *bufio.Reader, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := fmt.Fprintln(c, msg); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	got, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(got) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

// crashWithConnection opens a connection to the lab's VIP through in and
// echoes a line, then ends in as a crash does (Abandon: nothing undone, as
// after SIGKILL) and checks that the connection still echoes with no xlb
// running and that the program is still attached. It returns the
// connection, closed when the test ends, and its reader.
func crashWithConnection(t *testing.T, l *lab.Lab, in *Instance) (net.Conn, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := l.Client().Dial(ctx, net.JoinHostPort(l.XLB.IP().String(), "80"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	echoLine(t, r, conn, "before the crash")
	if err := l.XLB.Do(in.Abandon); err != nil { // the crash
		t.Fatal(err)
	}
	echoLine(t, r, conn, "while no xlb runs")
	if !readHost(t, l).attached {
		t.Fatal("the program was detached when its process ended")
	}
	return conn, r
}

// A crash (the process ends without undoing anything, as after SIGKILL)
// leaves the program attached through its pinned link and the maps
// pinned: an established connection keeps working with no process at
// all, the next Start adopts the pairs (DESIGN §6), and its Stop detaches
// and removes the pins.
func TestStartAdoptsPinnedStateAfterACrash(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.OneArm})
	c := pinnedConfig(t, l)
	dir := t.TempDir()
	before := readHost(t, l)

	first, err := startPinned(l, c, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.DP.Adoption().Start; got != api.StartFresh {
		t.Fatalf("first start: %s, want %s", got, api.StartFresh)
	}
	conn, r := crashWithConnection(t, l, first)

	second, err := startPinned(l, c, dir)
	if err != nil {
		t.Fatalf("start after the crash: %v", err)
	}
	ad := second.DP.Adoption()
	if ad.Start != api.StartAdopted || ad.Pairs < 1 {
		t.Fatalf("start after the crash: %s with %d pairs, want %s with the open connection's pair", ad.Start, ad.Pairs, api.StartAdopted)
	}
	for _, a := range second.DP.Attachments() {
		if !a.Adopted {
			t.Errorf("%s: the program was attached anew, want it replaced in place", a.Interface)
		}
	}
	echoLine(t, r, conn, "after the adoption")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fresh, err := l.Client().Dial(ctx, net.JoinHostPort(l.XLB.IP().String(), "80"))
	if err != nil {
		t.Fatalf("a new connection after the adoption: %v", err)
	}
	echoLine(t, bufio.NewReader(fresh), fresh, "new")
	fresh.Close()

	if err := l.XLB.Do(second.Stop); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.StateDir); !os.IsNotExist(err) {
		t.Errorf("state_dir after Stop: %v, want it removed", err)
	}
	if after := readHost(t, l); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after Stop the host is %+v, want %+v", after, before)
	}
}
