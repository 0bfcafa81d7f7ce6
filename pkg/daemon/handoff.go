package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/status/api"
)

// handOffTimeout bounds a hand-off from the successor's start to its
// ready message: a successor that takes longer is killed and the
// predecessor keeps serving. It stays below `xlb reload`'s default wait.
const handOffTimeout = 60 * time.Second

// handOff runs the predecessor's side of a hot upgrade (SIGUSR2): start
// the binary now on disk with the listeners and the instance lock, stop
// discovery and maintenance when it asks, and wait for its ready message.
// It returns true when the successor took over (the caller then exits
// without undoing anything); false when the hand-off failed, after taking
// the data path back, restarting discovery and maintenance and logging
// why. ctx ending (a stop signal) aborts the hand-off.
func (d *runner) handOff(ctx context.Context, lis *listeners) bool {
	d.publishLifecycle(api.HandingOver)
	newPID, quiesced, err := d.runHandOff(ctx, lis)
	if err == nil {
		// The successor serves on the shared listening sockets: leave
		// every new connection to it before `xlb reload` returns.
		if err := lis.stopAccepting(); err != nil {
			d.log.WithError(err).Warn("hot upgrade: close this process's listeners")
		}
		d.log.WithField("new_pid", newPID).Info("hot upgrade complete: handed over")
		d.notify.MainPID(newPID)
		writeUpgradeResult(upgradeResult{PID: os.Getpid(), Result: api.UpgradeOK, NewPID: newPID}, d.log)
		return true
	}
	if quiesced {
		if rerr := d.reclaim(); rerr != nil {
			err = fmt.Errorf("%w; taking the data path back also failed: %v", err, rerr)
		}
	}
	if cerr := d.inst.DP.CountHotUpgrade(false); cerr != nil {
		d.log.WithError(cerr).Warn("count the failed hot upgrade")
	}
	d.publishUpgradeFailure(err)
	d.publishLifecycle(api.Running)
	d.notify.Status(d.runningStatus())
	d.log.WithError(err).Error("hot upgrade failed; still serving")
	writeUpgradeResult(upgradeResult{PID: os.Getpid(), Result: api.UpgradeFailed, Error: err.Error()}, d.log)
	return false
}

// runHandOff starts the successor and follows the protocol
// (handoff_protocol.go). quiesced reports whether this process stopped
// its discovery and maintenance for the successor.
func (d *runner) runHandOff(ctx context.Context, lis *listeners) (newPID int, quiesced bool, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, false, fmt.Errorf("find the binary on disk: %w", err)
	}
	conn, theirs, err := newHandOffPair()
	if err != nil {
		return 0, false, err
	}
	defer conn.Close()
	files := []*os.File{theirs}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, ln := range []net.Listener{lis.adminLn, lis.metricsLn} {
		f, err := dupListener(ln)
		if err != nil {
			return 0, false, fmt.Errorf("hand the listener %s over: %w", ln.Addr(), err)
		}
		files = append(files, f)
	}
	sock, err := dupSocket(lis.sockLn)
	if err != nil {
		return 0, false, fmt.Errorf("hand the admin socket over: %w", err)
	}
	files = append(files, sock)
	env, args, err := d.successorCommand()
	if err != nil {
		return 0, false, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(env, envHandOffSocket+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// descriptors 3..5, the lock as 6, the admin socket as 7
	cmd.ExtraFiles = append(append([]*os.File(nil), files[:len(files)-1]...), d.inst.LockFile(), sock)
	if err := cmd.Start(); err != nil {
		return 0, false, fmt.Errorf("start %s: %w", exe, err)
	}
	d.log.WithFields(logrus.Fields{"binary": exe, "pid": cmd.Process.Pid}).Info("hot upgrade: starting the new process")
	// exited is closed when the successor has exited, with its status in
	// waitErr.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	msgs := make(chan handOffMsg, 8)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := conn.recv()
			if err != nil {
				recvErr <- err
				return
			}
			msgs <- m
		}
	}()
	timer := time.NewTimer(handOffTimeout)
	defer timer.Stop()
	fail := func(err error) (int, bool, error) {
		// A successor that failed exits by itself; one that hangs or
		// overran is stopped here, before the data path is taken back.
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		return 0, quiesced, err
	}
	for {
		select {
		case m := <-msgs:
			switch m.Type {
			case msgQuiesce:
				d.quiesce()
				quiesced = true
				hz, _ := d.inst.DP.HZ() // measured long ago: cached
				if err := conn.send(handOffMsg{Type: msgQuiesced, Backends: d.knownBackends(), HZ: hz, Drained: d.isDrained()}); err != nil {
					return fail(err)
				}
			case msgReady:
				return m.PID, quiesced, nil
			case msgFailed:
				return fail(fmt.Errorf("the new process (pid %d) failed: %s", cmd.Process.Pid, m.Error))
			default:
				return fail(fmt.Errorf("hand-off: unexpected message %q", m.Type))
			}
		case err := <-recvErr:
			// The successor closed its end: it is exiting. Its exit
			// status is the better story.
			select {
			case <-exited:
				return fail(fmt.Errorf("the new process (pid %d) exited before taking over: %v", cmd.Process.Pid, exitStory(waitErr)))
			case <-time.After(10 * time.Second):
				return fail(fmt.Errorf("the new process (pid %d) closed the hand-off channel: %w", cmd.Process.Pid, err))
			}
		case <-exited:
			return fail(fmt.Errorf("the new process (pid %d) exited before taking over: %v", cmd.Process.Pid, exitStory(waitErr)))
		case <-timer.C:
			return fail(fmt.Errorf("the new process (pid %d) did not take over within %v; stopped it", cmd.Process.Pid, handOffTimeout))
		case <-ctx.Done():
			return fail(errors.New("stop signal during the hand-off; stopped the new process"))
		}
	}
}

// exitStory describes a successor's exit.
func exitStory(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// quiesce stops what writes to the shared data path besides packets:
// backend discovery (the routable set) and the maintenance loop (the
// reaper). The successor starts its own.
func (d *runner) quiesce() {
	d.inst.StopDiscovery()
	d.stopBackground()
	d.log.Info("hot upgrade: discovery and maintenance stopped for the new process")
}

// reclaim takes the data path back after a failed hand-off and restarts
// discovery and maintenance.
func (d *runner) reclaim() error {
	if err := d.inst.Reclaim(context.Background()); err != nil {
		return err
	}
	return d.startMaintenance()
}

// knownBackends lists every backend of every service this process knows,
// with its service, member id and backend id, for the successor.
func (d *runner) knownBackends() []backend.Known {
	var out []backend.Known
	for _, s := range d.inst.Services() {
		for _, b := range s.Backends.Snapshot() {
			out = append(out, backend.Known{ID: b.ID, Backend: b.Backend, Service: s.Name, IP: b.IP, Name: b.Name})
		}
	}
	return out
}

// dupSocket duplicates the admin unix socket's listener for a successor,
// as dupListener does a TCP one.
func dupSocket(ln *net.UnixListener) (*os.File, error) {
	rc, err := ln.SyscallConn()
	if err != nil {
		return nil, err
	}
	return dupFD(rc)
}

// dupListener duplicates ln's socket for a successor. Not
// TCPListener.File: exec.Cmd calls Fd() on every inherited file, and Fd()
// of such a file switches the socket to blocking mode, a flag of the open
// socket that this process's listener shares; an accept(2) it then makes
// blocks, and closing the listener waits for it forever. A descriptor
// duplicated here keeps the socket non-blocking.
func dupListener(ln net.Listener) (*os.File, error) {
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return nil, err
	}
	return dupFD(rc)
}

// dupFD duplicates a listening socket's descriptor, close-on-exec (and
// kept non-blocking, see dupListener).
func dupFD(rc syscall.RawConn) (*os.File, error) {
	var fd int
	var dupErr error
	if err := rc.Control(func(s uintptr) { fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	return os.NewFile(uintptr(fd), "xlb-listener"), nil
}
