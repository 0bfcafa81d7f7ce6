package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// humanBytes formats n bytes with IEC units and one decimal: "512 B",
// "1.2 MiB".
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}

// units is how byte counts are written: IEC units with one decimal
// (humanBytes), or exact (--bytes: "36700160").
type units struct{ exact bool }

// bytes formats a byte count.
func (u units) bytes(n uint64) string {
	if u.exact {
		return strconv.FormatUint(n, 10)
	}
	return humanBytes(n)
}

// rate formats a byte rate per second rounded to whole bytes
// ("97.7 KiB/s", or "100000/s" exact), "-" when unknown.
func (u units) rate(bps float64, ok bool) string {
	if !ok {
		return "-"
	}
	return u.bytes(uint64(bps+0.5)) + "/s"
}

// countRate formats an event rate per second, "-" when unknown.
func countRate(r float64, ok bool) string {
	if !ok {
		return "-"
	}
	if r < 10 && r != float64(int64(r)) {
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

// uptime formats whole seconds as "45s", "13m05s", "2h13m05s", "3d04h13m".
func uptime(sec int64) string {
	d := time.Duration(sec) * time.Second
	days, h, m, s := sec/86400, int64(d/time.Hour)%24, int64(d/time.Minute)%60, sec%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd%02dh%02dm", days, h, m)
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// sampleAge formats the sample age in milliseconds, or says there is none.
func sampleAge(ms *int64) string {
	if ms == nil {
		return "no sample yet"
	}
	if *ms < 10_000 {
		return fmt.Sprintf("%dms", *ms)
	}
	return (time.Duration(*ms) * time.Millisecond).Round(time.Second).String()
}

// percent is part/whole in percent with one decimal, "-" for whole 0.
func percent(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	p := 100 * float64(part) / float64(whole)
	if part > 0 && p < 0.1 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// yesNo renders a boolean for a table cell.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// orDash is s, or "-" when empty.
func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
