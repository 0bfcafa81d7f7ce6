package daemon

import (
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// Reload (the unit's ExecReload=) signals the process and returns the
// outcome the process writes: the successor's pid, or the failure, so that
// `systemctl reload` fails visibly. Here the test process plays the
// running xlb.
func TestReloadWaitsForTheOutcome(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	me := os.Getpid()
	defer os.Remove(upgradeResultPath(me))
	for _, c := range []struct {
		r       upgradeResult
		wantPID int
		wantErr string
	}{
		{upgradeResult{PID: me, Result: api.UpgradeOK, NewPID: 4242}, 4242, ""},
		{upgradeResult{PID: me, Result: api.UpgradeFailed, Error: "config: xlb.yaml:3: ports: bad"}, 0, "keeps serving: config: xlb.yaml:3: ports: bad"},
	} {
		go func() {
			<-sigs
			writeUpgradeResult(c.r, logrus.StandardLogger())
		}()
		// The test process plays an old xlb that never exits: a success
		// then waits out the (short) time for it to go.
		pid, err := signalAndWait(me, 2*time.Second)
		if c.wantErr == "" && (err != nil || pid != c.wantPID) {
			t.Errorf("Reload = %d, %v; want %d", pid, err, c.wantPID)
		}
		if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("Reload error %v, want it to contain %q", err, c.wantErr)
		}
		if _, err := os.Stat(upgradeResultPath(me)); !os.IsNotExist(err) {
			t.Errorf("the result file is left behind: %v", err)
		}
	}
}

// A process that never answers makes Reload fail when its time is up; a
// process that is not xlb (here sleep(1)) fails at once without running
// anything, and so does a pid that is not running. (A version of xlb
// before hot upgrades: test/hostlab's upgrade from the previous version.)
func TestReloadWithoutAnAnswer(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	if _, err := signalAndWait(os.Getpid(), 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no hot upgrade result") {
		t.Errorf("Reload of a silent process: %v", err)
	}
	old := exec.Command("sleep", "60")
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { old.Process.Kill(); old.Wait() }()
	if _, _, err := Reload(old.Process.Pid, time.Minute, nil); err == nil || !strings.Contains(err.Error(), "not xlb") {
		t.Errorf("Reload of a process that is not xlb: %v", err)
	}
	if _, _, err := Reload(1<<22+1, time.Second, nil); err == nil || !strings.Contains(err.Error(), "no xlb process") {
		t.Errorf("Reload of a pid that does not run: %v", err)
	}
}

// A hot-upgrade successor keeps a listener its predecessor handed over
// when the config still names its address; wildcard addresses compare
// equal however Go spells them.
func TestSameAddr(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:9090", "127.0.0.1:9090", true},
		{"[::]:9642", "0.0.0.0:9642", true},
		{"0.0.0.0:9642", "0.0.0.0:9643", false},
		{"127.0.0.1:9090", "127.0.0.2:9090", false},
	} {
		if got := sameAddr(c.a, c.b); got != c.want {
			t.Errorf("sameAddr(%s, %s) = %v", c.a, c.b, got)
		}
	}
}
