package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/xlbproject/xlb/internal/testnet"
)

// buildRouter makes the router forward with an L4 multipath hash and
// spreads VIP over the XLB hosts with the resilient nexthop group GroupID.
func (l *Lab) buildRouter() error {
	err := l.Router.Do(func() error {
		if err := testnet.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
			return err
		}
		return testnet.Sysctl("net.ipv4.fib_multipath_hash_policy", "1")
	})
	if err != nil {
		return err
	}
	var members []string
	for _, h := range l.Hosts {
		if _, err := l.routerIP("nexthop", "add", "id", strconv.Itoa(h.NexthopID), "via", h.Addr.String(), "dev", "eth1"); err != nil {
			return err
		}
		members = append(members, fmt.Sprintf("%d,%d", h.NexthopID, Weight))
	}
	for _, s := range [][]string{
		{"nexthop", "add", "id", strconv.Itoa(GroupID), "group", strings.Join(members, "/"), "type", "resilient",
			"buckets", strconv.Itoa(Buckets), "idle_timer", strconv.Itoa(IdleTimer), "unbalanced_timer", "0"},
		{"route", "add", VIP.String() + "/32", "nhid", strconv.Itoa(GroupID)},
	} {
		if _, err := l.routerIP(s...); err != nil {
			return err
		}
	}
	return nil
}

// routerIP runs `ip -n ROUTER ARGS` (netlink has no resilient nexthop
// groups) and returns its output; the error includes the output.
func (l *Lab) routerIP(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"-n", l.Router.NS}, args...)
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Member is one entry of the router's nexthop group.
type Member struct {
	ID     int `json:"id"`
	Weight int `json:"weight"`
}

// Group reads the router's nexthop group: its members and idle timer.
func (l *Lab) Group() ([]Member, int, error) {
	out, err := l.routerIP("-j", "nexthop", "show", "id", strconv.Itoa(GroupID))
	if err != nil {
		return nil, 0, err
	}
	var g []struct {
		Group     []Member `json:"group"`
		Resilient struct {
			IdleTimer int `json:"idle_timer"`
		} `json:"resilient_args"`
	}
	if err := json.Unmarshal([]byte(out), &g); err != nil || len(g) != 1 {
		return nil, 0, fmt.Errorf("nexthop group %d: %v: %s", GroupID, err, out)
	}
	for i := range g[0].Group {
		if g[0].Group[i].Weight == 0 {
			g[0].Group[i].Weight = 1 // ip -j omits weight 1
		}
	}
	return g[0].Group, g[0].Resilient.IdleTimer, nil
}

// Buckets counts the group's buckets per nexthop id.
func (l *Lab) Buckets() (map[int]int, error) {
	out, err := l.routerIP("-j", "nexthop", "bucket", "show", "id", strconv.Itoa(GroupID))
	if err != nil {
		return nil, err
	}
	var bs []struct {
		Bucket struct {
			NHID int `json:"nhid"`
		} `json:"bucket"`
	}
	if err := json.Unmarshal([]byte(out), &bs); err != nil {
		return nil, err
	}
	m := map[int]int{}
	for _, b := range bs {
		m[b.Bucket.NHID]++
	}
	return m, nil
}
