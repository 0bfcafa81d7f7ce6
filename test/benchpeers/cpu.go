package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is the aggregate "cpu" line of /proc/stat (proc(5)): busy and
// total time of all CPUs together, in USER_HZ ticks. Idle and iowait are
// not busy; everything else (user, nice, system, irq, softirq, steal) is.
type cpuTimes struct {
	busy, total uint64
	cpus        int
}

func readCPU() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	var t cpuTimes
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch {
		case fields[0] == "cpu":
			found = true
			for i, s := range fields[1:] {
				if i >= 8 { // guest and guest_nice are already in user and nice
					break
				}
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return t, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
				}
				t.total += v
				if i != 3 && i != 4 { // idle, iowait
					t.busy += v
				}
			}
		case strings.HasPrefix(fields[0], "cpu"):
			t.cpus++
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if !found || t.cpus == 0 {
		return t, errors.New("/proc/stat: no cpu lines")
	}
	return t, nil
}

// userHZ is the tick of /proc/stat (USER_HZ, 100 on every Linux
// architecture XLB runs on).
const userHZ = 100

// cpuUse is what the host's CPUs did between two readings.
type cpuUse struct {
	Busy    float64       // busy fraction of all CPUs, 0…1
	BusyCPU time.Duration // busy CPU time, all CPUs summed
}

// since returns the use from a to b.
func since(a, b cpuTimes) cpuUse {
	busy, total := b.busy-a.busy, b.total-a.total
	u := cpuUse{BusyCPU: time.Duration(busy) * time.Second / userHZ}
	if total > 0 {
		u.Busy = float64(busy) / float64(total)
	}
	return u
}

// cpuMeter measures the host's CPU use from start to stop.
type cpuMeter struct{ start cpuTimes }

func startCPU() (*cpuMeter, error) {
	t, err := readCPU()
	return &cpuMeter{t}, err
}

func (m *cpuMeter) stop() (cpuUse, error) {
	t, err := readCPU()
	return since(m.start, t), err
}
