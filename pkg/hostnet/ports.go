package hostnet

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// portRange is an inclusive range of ports.
type portRange struct{ lo, hi int }

// parsePortList parses the ip_local_reserved_ports format: comma-separated
// ports and LO-HI ranges, possibly empty.
func parsePortList(s string) ([]portRange, error) {
	var out []portRange
	for _, f := range strings.Split(strings.TrimSpace(s), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", f)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("bad port range %q", f)
			}
		}
		out = append(out, portRange{a, b})
	}
	return out, nil
}

// formatPortList merges overlapping or adjacent ranges and formats them.
func formatPortList(rs []portRange) string {
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	var merged []portRange
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			if r.hi > merged[n-1].hi {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	parts := make([]string, len(merged))
	for i, r := range merged {
		if r.lo == r.hi {
			parts[i] = strconv.Itoa(r.lo)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r.lo, r.hi)
		}
	}
	return strings.Join(parts, ",")
}

// ReservePorts adds lo-hi to net.ipv4.ip_local_reserved_ports so host
// sockets never pick an ephemeral port XLB uses for SNAT (DESIGN §1). The
// journal records the original list; Journal.Restore writes it back.
func ReservePorts(j *Journal, lo, hi uint16) error {
	return reservePortsAt(j, reservedPortsSysctl, lo, hi)
}

func reservePortsAt(j *Journal, path string, lo, hi uint16) error {
	cur, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	rs, err := parsePortList(strings.TrimSpace(string(cur)))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	next := formatPortList(append(rs, portRange{int(lo), int(hi)}))
	if err := j.Set(path, next); err != nil {
		return fmt.Errorf("reserve SNAT ports %d-%d: %w", lo, hi, err)
	}
	return nil
}
