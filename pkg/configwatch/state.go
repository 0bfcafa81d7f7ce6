package configwatch

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/xlbproject/xlb/pkg/config"
)

// State is what the watcher knows about the config file on disk compared
// with the loaded config (DESIGN §1, last paragraph). The daemon publishes
// the latest one in snapshot.Snapshot.Config; the status document's config
// object and the xlb_config_* metrics show it. Treat it as read-only once
// delivered (ChangedKeys is shared).
type State struct {
	// Path is the config file's path as the daemon was given it.
	Path string
	// ReloadRequired is true when the file on disk is valid and differs
	// from the loaded config; ChangedKeys names the differing keys
	// (config.Diff): top-level keys, and with a services: list
	// "services[NAME]" or "services[NAME].KEY" (issue 29). A reload (SIGUSR2 hand-off, DESIGN §6) applies
	// it without losing a connection.
	ReloadRequired bool
	ChangedKeys    []string
	// Invalid holds the validation error of the file on disk when it does
	// not parse (then ReloadRequired is false); Missing is true when the
	// file was deleted.
	Invalid string
	Missing bool
}

// applyHint tells the operator how to apply a changed file: a reload, the
// SIGUSR2 hand-off to a new process that reads it (DESIGN §6), which keeps
// every established connection.
const applyHint = "`systemctl reload xlb` applies it"

// deliver logs and hands on a new state.
func (w *Watcher) deliver(st State) {
	w.report(st)
	w.last = st
	if w.onChange != nil {
		w.onChange(st)
	}
}

// evaluate reads and validates the file and compares it with the loaded
// config (config.Diff).
func (w *Watcher) evaluate() State {
	st := State{Path: w.path}
	onDisk, _, err := config.Load(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.Missing = true
	case err != nil:
		st.Invalid = err.Error()
	default:
		if keys := config.Diff(w.loaded, onDisk); len(keys) > 0 {
			st.ReloadRequired, st.ChangedKeys = true, keys
		}
	}
	return st
}

// report logs one line for a new state.
func (w *Watcher) report(st State) {
	name := filepath.Base(w.path)
	log := w.log.WithField("path", w.path)
	switch {
	case st.Missing:
		log.Warnf("%s was deleted; the running instance keeps its loaded config; restore the file before reloading xlb", name)
	case st.Invalid != "":
		log.WithField("error", st.Invalid).Warnf("%s on disk is invalid; the running instance keeps its loaded config; fix the file before reloading xlb", name)
	case st.ReloadRequired:
		log.WithField("changed_keys", st.ChangedKeys).Warnf("%s changed on disk (keys: %s); the running instance keeps its loaded config; %s", name, strings.Join(st.ChangedKeys, ", "), applyHint)
	default:
		log.Infof("%s matches the loaded config again; no reload required", name)
	}
}

func equal(a, b State) bool {
	return a.Path == b.Path && a.ReloadRequired == b.ReloadRequired && a.Invalid == b.Invalid &&
		a.Missing == b.Missing && slices.Equal(a.ChangedKeys, b.ChangedKeys)
}
