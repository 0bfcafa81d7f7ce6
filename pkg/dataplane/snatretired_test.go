package dataplane

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// configOf is a config of SNAT addresses addrs, range lo-hi, and retired
// spaces.
func configOf(addrs []string, lo, hi uint16, retired ...RetiredSNAT) xlbXlbConfig {
	var c xlbXlbConfig
	for i, a := range addrs {
		c.SnatIpsBe[i] = be32(netip.MustParseAddr(a))
	}
	c.Nsnat, c.SnatPortLo, c.SnatPortHi = uint32(len(addrs)), lo, hi
	c.SnatWords = SNATSpace{Addrs: len(addrs), PortLo: lo, PortHi: hi}.words()
	setRetired(&c, retired)
	return c
}

func space(a string, lo, hi uint16) RetiredSNAT {
	return RetiredSNAT{Addr: netip.MustParseAddr(a), PortLo: lo, PortHi: hi}
}

// What a config change retires: the previous space and retired set, less
// the new space, per address.
func TestRetire(t *testing.T) {
	const x, y = "192.0.2.10", "192.0.2.100"
	for _, tc := range []struct {
		name       string
		prev, next xlbXlbConfig
		want       []RetiredSNAT
	}{
		{"a fresh start", xlbXlbConfig{}, configOf([]string{x}, 40000, 40009), nil},
		{"the same space", configOf([]string{x}, 40000, 40009), configOf([]string{x}, 40000, 40009), nil},
		{"a range covering the old one", configOf([]string{x}, 40000, 40009), configOf([]string{x}, 39000, 41000), nil},
		{"a moved range", configOf([]string{x}, 40000, 40009), configOf([]string{x}, 41000, 41009), []RetiredSNAT{space(x, 40000, 40009)}},
		{"an overlapping range", configOf([]string{x}, 40000, 40009), configOf([]string{x}, 40005, 40100), []RetiredSNAT{space(x, 40000, 40004)}},
		{"a range inside the old one", configOf([]string{x}, 40000, 40009), configOf([]string{x}, 40003, 40004),
			[]RetiredSNAT{space(x, 40000, 40002), space(x, 40005, 40009)}},
		{"another address", configOf([]string{x}, 40000, 40009), configOf([]string{y}, 40000, 40009), []RetiredSNAT{space(x, 40000, 40009)}},
		{"an address added", configOf([]string{x}, 40000, 40009), configOf([]string{x, y}, 40000, 40009), nil},
		{"retired spaces carried, merged with a touching range", configOf([]string{x}, 40010, 40019, space(x, 40000, 40009), space(y, 30000, 30000)),
			configOf([]string{x}, 41000, 41009), []RetiredSNAT{space(x, 40000, 40019), space(y, 30000, 30000)}},
		{"a retired space back in use", configOf([]string{x}, 41000, 41009, space(x, 40000, 40009)), configOf([]string{x}, 40000, 40009),
			[]RetiredSNAT{space(x, 41000, 41009)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := retire(&tc.prev, &tc.next)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("retired %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// More retired spaces than the config holds: the nearest spans of one
// address are joined; more addresses than it holds refuse the config.
func TestRetireBeyondTheLimit(t *testing.T) {
	const x = "192.0.2.10"
	var spaces []RetiredSNAT // 90 ports every 100, but 5 and 6 only 2 apart
	for i := range MaxRetiredSNAT {
		lo := uint16(20000 + 100*i)
		if i == 6 {
			lo -= 8
		}
		spaces = append(spaces, space(x, lo, lo+89))
	}
	prev := configOf([]string{x}, 40000, 40009, spaces...)
	got, err := retire(&prev, ptr(configOf([]string{x}, 50000, 50009)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxRetiredSNAT {
		t.Fatalf("%d retired spaces, want %d: %v", len(got), MaxRetiredSNAT, got)
	}
	if j := slices.Index(got, space(x, spaces[5].PortLo, spaces[6].PortHi)); j < 0 {
		t.Fatalf("retired %v: want %v and %v joined", got, spaces[5], spaces[6])
	}

	var many []RetiredSNAT
	for i := range MaxRetiredSNAT {
		many = append(many, space(netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}).String(), 40000, 40009))
	}
	prev = configOf([]string{x}, 40000, 40009, many...)
	if _, err := retire(&prev, ptr(configOf([]string{x}, 41000, 41009))); err == nil || !strings.Contains(err.Error(), "at most 16") {
		t.Fatalf("%d addresses to retire: %v, want an error", MaxRetiredSNAT+1, err)
	}
}
