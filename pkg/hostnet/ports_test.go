package hostnet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPortListMerge(t *testing.T) {
	for _, tc := range []struct{ in, add, want string }{
		{"", "40000-59999", "40000-59999"},
		{"8080", "40000-59999", "8080,40000-59999"},
		{"40000-45000,50000", "45001-49999", "40000-50000"},
		{"1-10, 5-20", "30-30", "1-20,30"},
	} {
		rs, err := parsePortList(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		add, _ := parsePortList(tc.add)
		if got := formatPortList(append(rs, add...)); got != tc.want {
			t.Errorf("%q + %q = %q, want %q", tc.in, tc.add, got, tc.want)
		}
	}
	if _, err := parsePortList("80,x"); err == nil {
		t.Fatal("want an error for a bad port")
	}
}

func TestReserveAndRestore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "reserved")
	if err := os.WriteFile(p, []byte("8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restore, err := reservePortsAt(p, 40000, 59999)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if strings.TrimSpace(string(b)) != "8080,40000-59999" {
		t.Fatalf("reserved %q", b)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	if strings.TrimSpace(string(b)) != "8080" {
		t.Fatalf("restored %q", b)
	}
}
