package hostnet

import (
	"testing"

	"github.com/xlbproject/xlb/test/lab"
)

func TestResolverRejectsUnattachedInterface(t *testing.T) {
	l := lab.New(t, lab.Options{Topology: lab.TwoArm})
	front, _ := l.XLB.Iface("eth0")
	res := NewResolver(l.XLB.Netlink(), lab.XLBBackIP, map[int]string{front.Index: "eth0"})
	_, err := res.Resolve(l.Backends[0].IP())
	if err == nil || err.Error() != "routed via eth1, which XLB is not attached to" {
		t.Fatalf("err %v", err)
	}
}
