package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/hostnet"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// upgradeResult is how a hot upgrade ended, written by the process that
// received SIGUSR2 for `xlb reload` (the unit's ExecReload=), which waits
// for it so that `systemctl reload xlb` fails visibly when the hand-off
// fails.
type upgradeResult struct {
	PID    int    `json:"pid"`               // the process that received SIGUSR2
	Result string `json:"result"`            // api.UpgradeOK or api.UpgradeFailed
	NewPID int    `json:"new_pid,omitempty"` // the successor that took over
	Error  string `json:"error,omitempty"`   // why it failed
}

// upgradeResultPath is where the process pid writes its hand-off's result:
// the runtime directory, which the unit keeps across restarts.
func upgradeResultPath(pid int) string {
	return filepath.Join(hostnet.DefaultJournalDir, fmt.Sprintf("hot-upgrade-%d.json", pid))
}

// staleResultAge is when a result nobody read (SIGUSR2 sent without
// `xlb reload`) is removed, once its process is gone.
const staleResultAge = 10 * time.Minute

// writeUpgradeResult writes r for `xlb reload` (atomically: a temporary
// file renamed into place), and removes the results of gone processes
// older than staleResultAge.
func writeUpgradeResult(r upgradeResult, log logrus.FieldLogger) {
	removeStaleResults()
	path := upgradeResultPath(r.PID)
	b, err := json.Marshal(r)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		err = os.WriteFile(path+".tmp", b, 0o600)
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		log.WithError(err).Warn("write the hot upgrade result for `xlb reload`")
	}
}

// Reload asks the xlb with the given pid for a hot upgrade (SIGUSR2) and
// waits up to timeout for its outcome: the successor's pid, or an error
// saying why the hand-off failed (the running process then keeps serving)
// or that no outcome came in time. It is what `xlb reload` (the unit's
// ExecReload=) runs. A non-nil env is the environment the successor is to
// get (`xlb reload --pass-environment`: the unit's current one,
// reload_env.go); it is left for the process only for the time of the
// hand-off. note, when not empty, says that the running version cannot
// take env (the successor then keeps the old environment).
func Reload(pid int, timeout time.Duration, env []string) (newPID int, note string, err error) {
	if pid <= 1 {
		return 0, "", fmt.Errorf("no xlb process to reload (pid %d)", pid)
	}
	caps, err := handOverCapabilities(pid)
	if err != nil {
		return 0, "", err
	}
	if env != nil {
		if !slices.Contains(caps, capReloadEnvironment) {
			note = fmt.Sprintf("the running xlb (pid %d, a version before %s) starts the new process with its own environment: a changed XLB_ADMIN_PASSWORD, BGP password or ARGS takes effect at the next reload", pid, capReloadEnvironment)
		} else {
			if err := writeReloadEnv(pid, env); err != nil {
				return 0, "", fmt.Errorf("hand the environment to xlb (pid %d): %w", pid, err)
			}
			// Read and removed by the process when it starts its
			// successor; removed here too when it never did.
			defer os.Remove(reloadEnvPath(pid))
		}
	}
	newPID, err = signalAndWait(pid, timeout)
	return newPID, note, err
}

// signalAndWait sends SIGUSR2 to pid and waits up to timeout for the
// result it writes (Reload).
func signalAndWait(pid int, timeout time.Duration) (newPID int, err error) {
	path := upgradeResultPath(pid)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		return 0, fmt.Errorf("signal xlb (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			os.Remove(path)
			var r upgradeResult
			if err := json.Unmarshal(b, &r); err != nil {
				return 0, fmt.Errorf("hot upgrade result %s: %w", path, err)
			}
			if r.Result != api.UpgradeOK {
				return 0, fmt.Errorf("hot upgrade failed, xlb (pid %d) keeps serving: %s", pid, r.Error)
			}
			// Done when the old process is gone too (it answers the
			// requests it accepted first, listeners.release): a stop
			// right after the reload then meets one process only.
			for !gone(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			return r.NewPID, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
		if gone(pid) {
			return 0, fmt.Errorf("xlb (pid %d) exited during the hot upgrade without a result (see its log)", pid)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no hot upgrade result from xlb (pid %d) within %v (see its log; does this version support SIGUSR2?)", pid, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// handOverCapabilities asks the binary the process runs (/proc/PID/exe,
// the old binary even when a package replaced the file) for its
// capabilities, and fails unless it can hand over: a version before the
// hand-off ignores SIGUSR2, and waiting for it would only end in a
// timeout. It runs nothing but a binary named xlb.
func handOverCapabilities(pid int) ([]string, error) {
	if gone(pid) {
		return nil, fmt.Errorf("no xlb process with pid %d", pid)
	}
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	target, err := os.Readlink(exe)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	if name := filepath.Base(strings.TrimSuffix(target, " (deleted)")); name != "xlb" {
		return nil, fmt.Errorf("pid %d runs %s, not xlb", pid, target)
	}
	out, err := exec.Command(exe, "capabilities").Output()
	caps := strings.Fields(string(out))
	if err != nil || !slices.Contains(caps, capHotUpgrade) {
		return nil, fmt.Errorf("the running xlb (pid %d) cannot hand over (a version before hot upgrades): use `systemctl restart xlb`, which resets its connections", pid)
	}
	return caps, nil
}

// gone reports whether the process pid has exited: it no longer exists,
// or it is a zombie its parent has not reaped yet.
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}

// removeStaleResults removes hot upgrade results that nobody read: their
// process is gone and they are older than staleResultAge; and the
// environments `xlb reload` left for processes that are gone (passwords:
// at once).
func removeStaleResults() {
	envs, _ := filepath.Glob(filepath.Join(hostnet.DefaultJournalDir, "hot-upgrade-env-*.json"))
	for _, p := range envs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(p), "hot-upgrade-env-%d.json", &pid); err == nil && gone(pid) {
			os.Remove(p)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(hostnet.DefaultJournalDir, "hot-upgrade-*.json"))
	for _, p := range paths {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(p), "hot-upgrade-%d.json", &pid); err != nil || !gone(pid) {
			continue
		}
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > staleResultAge {
			os.Remove(p)
		}
	}
}
