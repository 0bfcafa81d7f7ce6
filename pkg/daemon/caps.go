package daemon

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Capabilities the daemon needs (the systemd unit grants exactly these).
// CAP_SYS_ADMIN covers CAP_BPF on every kernel. CAP_PERFMON is not needed:
// the data path is written for the verifier's unprivileged-pointer rules
// (Spectre mitigations on), and XLB loads no tracing programs.
var required = []struct {
	bit  uint
	name string
	why  string
}{
	{12, "CAP_NET_ADMIN", "attach XDP, manage neighbours, write net sysctls"},
	{39, "CAP_BPF", "create BPF maps and load programs"},
}

const capSysAdmin = 21

// checkCapabilities fails with the names of the missing capabilities, so
// an operator does not have to decode an EPERM from deep inside the BPF
// loader.
func checkCapabilities() error {
	eff, err := effectiveCaps()
	if err != nil {
		return nil // cannot tell; the operations themselves will say
	}
	var missing []string
	for _, c := range required {
		has := eff&(1<<c.bit) != 0
		if !has && c.name == "CAP_BPF" && eff&(1<<capSysAdmin) != 0 {
			has = true
		}
		if !has {
			missing = append(missing, fmt.Sprintf("%s (%s)", c.name, c.why))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing capabilities: %s; run as root or grant them (the packaged systemd unit does)", strings.Join(missing, ", "))
	}
	return nil
}

// effectiveCaps reads CapEff from /proc/self/status.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff in /proc/self/status")
}
