package testnet

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// netstatPath is the calling thread's /proc/net/netstat: /proc/net follows
// the thread group leader's namespace, thread-self the thread's own (the
// one In and Host.Do switch).
const netstatPath = "/proc/thread-self/net/netstat"

// NetstatCounter returns the counter name of group ("TcpExt", "IpExt";
// `nstat` prints them joined: TcpExtPAWSTimewait is group "TcpExt", name
// "PAWSTimewait") in the calling thread's network namespace, so call it
// inside In or Host.Do. A counter this kernel does not have is an error.
func NetstatCounter(group, name string) (uint64, error) {
	f, err := os.Open(netstatPath)
	if err != nil {
		return 0, fmt.Errorf("testnet: %w", err)
	}
	defer f.Close()
	// The file is pairs of lines: "Group: Name1 Name2 ..." then
	// "Group: value1 value2 ...".
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := group + ":"
	for sc.Scan() {
		names := strings.Fields(sc.Text())
		if len(names) == 0 || names[0] != prefix || !sc.Scan() {
			continue
		}
		values := strings.Fields(sc.Text())
		for i, n := range names {
			if n != name {
				continue
			}
			if i >= len(values) {
				break
			}
			v, err := strconv.ParseUint(values[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("testnet: %s %s%s: %w", netstatPath, group, name, err)
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("testnet: %s: %w", netstatPath, err)
	}
	return 0, fmt.Errorf("testnet: no counter %s%s in %s", group, name, netstatPath)
}
