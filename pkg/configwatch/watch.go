// Package configwatch notices changes to xlb.yaml on disk and reports them
// without changing the running instance (DESIGN §1, last paragraph): a
// valid file that differs from the loaded config is "reload required" with
// the changed top-level keys (`systemctl reload xlb`, the SIGUSR2 hand-off
// of DESIGN §6, applies it), an invalid file is reported as invalid (not
// as reload-required), a deleted file as missing, and a file that matches
// the loaded config again clears the state.
package configwatch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
)

// Debounce is how long the directory must stay quiet after an event before
// the file is read again: editors and config management write a file in
// several steps (truncate and write, or write a temporary file and rename
// it over). A burst that never goes quiet is read MaxDelay after it began.
// A new state is reported only when a second read one Debounce later
// agrees, so a writer paused between truncating and writing, or between
// deleting and recreating, does not produce a passing "invalid" or
// "deleted" warning.
const (
	Debounce = 200 * time.Millisecond
	MaxDelay = 2 * time.Second
)

// Watcher watches one config file. Create it with New and run it with Run.
type Watcher struct {
	path     string // as given, reported in State.Path
	abs      string // absolute path of the file
	loaded   *config.Config
	log      logrus.FieldLogger
	onChange func(State)

	last  State
	ready chan struct{} // closed once the directory watch is in place
}

// New returns a watcher for the config file at path. loaded is the config
// the instance runs, as config.Load returned it (before pkg/instance
// resolves `auto` values), so the comparison is with the file as it was
// loaded.
// onChange receives each new state (nil: state only logged); it is called
// from Run's goroutine, once per distinct state. The initial state is clean
// (Path set, nothing else) and is not delivered.
func New(path string, loaded *config.Config, log logrus.FieldLogger, onChange func(State)) *Watcher {
	if log == nil {
		log = logrus.StandardLogger()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	return &Watcher{path: path, abs: abs, loaded: loaded, log: log, onChange: onChange,
		last: State{Path: path}, ready: make(chan struct{})}
}

// Run watches until ctx ends and then returns nil; call it once. It returns
// an error only when the watch cannot be set up.
//
// It watches the file's directory, not the file: a rename over the file
// (editors, config management) would drop a watch on the file itself.
// Events are filtered by the file's base name, except when the file is a
// symlink (a Kubernetes ConfigMap mount swaps a sibling `..data` link):
// then every event in its directory and in its target's directory counts.
// Right after the watch is in place the file is read once, which catches
// edits made since it was loaded. Each distinct state is logged and
// delivered once, after a confirming read (Debounce).
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("configwatch: %w", err)
	}
	defer fw.Close()
	dir := filepath.Dir(w.abs)
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("configwatch: watch %s: %w", dir, err)
	}
	targetDir := w.watchTarget(fw, dir, "")
	close(w.ready)

	timer := time.NewTimer(0) // the first check catches edits made since the file was loaded
	pending, burstStart := true, time.Now()
	var candidate *State // a new state read once, awaiting confirmation
	schedule := func() {
		switch {
		case !pending:
			pending, burstStart = true, time.Now()
			timer.Reset(Debounce)
		case time.Since(burstStart) < MaxDelay:
			timer.Reset(Debounce)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if w.relevant(ev, dir, targetDir) {
				schedule()
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			// An overflow may have dropped events: read the file again.
			w.log.WithError(err).Warn("config watch: event error; checking the file again")
			schedule()
		case <-timer.C:
			pending = false
			targetDir = w.watchTarget(fw, dir, targetDir)
			st := w.evaluate()
			switch {
			case equal(st, w.last):
				candidate = nil
			case candidate != nil && equal(st, *candidate):
				candidate = nil
				w.deliver(st)
			default:
				candidate = &st
				schedule() // confirm with a second read
			}
		}
	}
}

// relevant reports whether ev may have changed the file's content.
func (w *Watcher) relevant(ev fsnotify.Event, dir, targetDir string) bool {
	if ev.Name == dir { // the directory itself went away
		return true
	}
	if targetDir != "" {
		d := filepath.Dir(ev.Name)
		return d == dir || d == targetDir
	}
	return filepath.Base(ev.Name) == filepath.Base(w.abs)
}

// watchTarget keeps a watch on the directory of the symlink target when the
// file is a symlink into another directory, and returns that directory
// ("" when the file is not a symlink). prev is the one watched so far.
func (w *Watcher) watchTarget(fw *fsnotify.Watcher, dir, prev string) string {
	var next string
	if fi, err := os.Lstat(w.abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		next = dir
		if real, err := filepath.EvalSymlinks(w.abs); err == nil {
			next = filepath.Dir(real)
		}
	}
	if next == prev {
		return prev
	}
	if prev != "" && prev != dir {
		_ = fw.Remove(prev) // may be gone already
	}
	if next != "" && next != dir {
		if err := fw.Add(next); err != nil {
			w.log.WithError(err).WithField("dir", next).Warn("config watch: cannot watch the symlink target's directory")
		}
	}
	return next
}
