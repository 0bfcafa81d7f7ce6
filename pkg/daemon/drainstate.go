package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/xlbproject/xlb/pkg/hostnet"
)

// drainFileName is the drain record of one network namespace's instance
// in the runtime directory (hostnet.DefaultJournalDir, /run/xlb): the
// unit keeps the directory across restarts, stops and crashes
// (RuntimeDirectoryPreserve=yes), so only an undrain or a reboot, which
// clears /run, forgets the drain.
const drainFileName = "drain-netns-%d.json"

// drainRecord is an operator's drain as kept on disk (issue 28): a
// restarted or crashed instance starts drained again, and its status says
// since when and by whom.
type drainRecord struct {
	Since time.Time `json:"since"`
	By    string    `json:"by"`
}

// drainPath is the drain record's path for the caller's network
// namespace.
func drainPath() (string, error) {
	p, err := hostnet.NamespaceFile(hostnet.DefaultJournalDir, drainFileName)
	if err != nil {
		return "", fmt.Errorf("the drain record in %s: %w", hostnet.DefaultJournalDir, err)
	}
	return p, nil
}

// loadDrain reads the drain record; nil when there is none.
func loadDrain() (*drainRecord, string, error) {
	path, err := drainPath()
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, path, nil
	case err != nil:
		return nil, path, fmt.Errorf("the drain record: %w", err)
	}
	var r drainRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, path, fmt.Errorf("the drain record %s: %w", path, err)
	}
	return &r, path, nil
}

// saveDrain writes r (atomically: a new file renamed over the old one),
// or removes the record when r is nil.
func saveDrain(r *drainRecord) error {
	path, err := drainPath()
	if err != nil {
		return err
	}
	if r == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the drain record: %w", err)
		}
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write the drain record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the drain record: %w", err)
	}
	return nil
}
