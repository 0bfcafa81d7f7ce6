package daemon

import (
	"fmt"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier speaks the sd_notify protocol to the service manager through
// NOTIFY_SOCKET (go-systemd). Without NOTIFY_SOCKET every call is a no-op.
// STATUS= lines are sent only when their text changes.
type Notifier struct {
	mu         sync.Mutex
	lastStatus string
	send       func(state string) error
}

// NewNotifier returns a notifier for the service manager of this process.
func NewNotifier() *Notifier {
	return &Notifier{send: func(state string) error {
		_, err := daemon.SdNotify(false, state)
		return err
	}}
}

// Ready sends READY=1 with a status line (systemd Type=notify).
func (n *Notifier) Ready(status string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lastStatus = status
	return n.send(daemon.SdNotifyReady + "\nSTATUS=" + status)
}

// ReadyAs sends MAINPID=pid with READY=1 and a status line: a hot-upgrade
// successor tells systemd that it is the service's main process now
// (the unit's NotifyAccess=all lets a process other than the main one
// send it).
func (n *Notifier) ReadyAs(pid int, status string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lastStatus = status
	return n.send(fmt.Sprintf("MAINPID=%d\n%s\nSTATUS=%s", pid, daemon.SdNotifyReady, status))
}

// MainPID sends MAINPID=pid: a predecessor repeats its successor's
// claim before it exits, in case systemd did not take it from the
// successor.
func (n *Notifier) MainPID(pid int) error { return n.send(fmt.Sprintf("MAINPID=%d", pid)) }

// Status sends STATUS=text when it differs from the last one sent.
func (n *Notifier) Status(text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if text == n.lastStatus {
		return nil
	}
	n.lastStatus = text
	return n.send("STATUS=" + text)
}

// Stopping sends STOPPING=1 and EXTEND_TIMEOUT_USEC covering d, so systemd
// waits the whole shutdown window plus cleanup instead of its stop timeout.
func (n *Notifier) Stopping(d time.Duration, status string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lastStatus = status
	return n.send(fmt.Sprintf("%s\nEXTEND_TIMEOUT_USEC=%d\nSTATUS=%s", daemon.SdNotifyStopping, d.Microseconds(), status))
}

// Watchdog sends WATCHDOG=1.
func (n *Notifier) Watchdog() error { return n.send(daemon.SdNotifyWatchdog) }

// WatchdogInterval returns how often to ping the watchdog (half of
// WATCHDOG_USEC), or 0 when the service manager does not ask for pings.
func WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0
	}
	return d / 2
}
