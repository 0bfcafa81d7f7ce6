package fleet

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Log messages of the process that hands over in a hot upgrade
// (pkg/daemon/handoff.go): the first when it starts its successor, the
// second once the successor has taken over.
const (
	handOffStartMsg = "hot upgrade: starting the new process"
	handOffDoneMsg  = "hot upgrade complete: handed over"
)

// HandOff is one hot upgrade (`systemctl reload xlb`) of a host's xlb as
// its journal tells it: from the start of the successor to the hand-over.
// Done is zero when the journal has no hand-over for it (failed, or still
// running).
type HandOff struct {
	Host        string
	Start, Done time.Time
}

// HandOffs reads the hot upgrades in host h's xlb.service journal since
// the given time. Journal timestamps are CLOCK_REALTIME, the same in
// every container of the lab.
func (h *Host) HandOffs(since time.Time) ([]HandOff, error) {
	out, err := h.Exec("journalctl", "--no-pager", "--output=json", "--unit=xlb.service",
		"--since=@"+strconv.FormatInt(since.Unix(), 10))
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", h.Inventory, err, Tail(out, 5))
	}
	return parseHandOffs(h.Inventory, out, since)
}

// parseHandOffs reads journalctl --output=json lines (others are
// skipped: Exec mixes in stderr).
func parseHandOffs(host, out string, since time.Time) ([]HandOff, error) {
	var hs []HandOff
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e struct {
			Message  any    `json:"MESSAGE"` // a string, or bytes as a number array
			Realtime string `json:"__REALTIME_TIMESTAMP"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("%s: journal line %q: %w", host, line, err)
		}
		msg, _ := e.Message.(string)
		us, err := strconv.ParseInt(e.Realtime, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: journal timestamp %q: %w", host, e.Realtime, err)
		}
		at := time.UnixMicro(us)
		if at.Before(since) {
			continue
		}
		switch {
		case strings.Contains(msg, handOffStartMsg):
			hs = append(hs, HandOff{Host: host, Start: at})
		case strings.Contains(msg, handOffDoneMsg) && len(hs) > 0 && hs[len(hs)-1].Done.IsZero():
			hs[len(hs)-1].Done = at
		}
	}
	return hs, nil
}

// Overlap returns two hand-offs of different hosts whose times overlap
// (an unfinished one lasts forever), or ok false when there are none.
func Overlap(hs []HandOff) (a, b HandOff, ok bool) {
	s := append([]HandOff(nil), hs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
	for i := 1; i < len(s); i++ {
		for j := 0; j < i; j++ {
			if s[j].Host != s[i].Host && (s[j].Done.IsZero() || !s[i].Start.After(s[j].Done)) {
				return s[j], s[i], true
			}
		}
	}
	return HandOff{}, HandOff{}, false
}
