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
	dir := t.TempDir()
	p := filepath.Join(dir, "reserved")
	if err := os.WriteFile(p, []byte("8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournal(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := reservePortsAt(j, p, 40000, 59999); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if strings.TrimSpace(string(b)) != "8080,40000-59999" {
		t.Fatalf("reserved %q", b)
	}
	// a crash: the next instance opens the journal and sees the original
	j2, err := OpenJournal(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if got := j2.Recovered(); len(got) != 1 || got[0] != p {
		t.Fatalf("recovered %v", got)
	}
	if err := reservePortsAt(j2, p, 40000, 59999); err != nil {
		t.Fatal(err)
	}
	if err := j2.Restore(); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(p)
	if strings.TrimSpace(string(b)) != "8080" {
		t.Fatalf("restored %q, want the value from before the first instance", b)
	}
	if _, err := os.Stat(j2.Path()); !os.IsNotExist(err) {
		t.Fatalf("journal left behind: %v", err)
	}
}

func TestNetnsLock(t *testing.T) {
	dir := t.TempDir()
	a, err := LockNetns(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockNetns(dir); err == nil || !strings.Contains(err.Error(), "another xlb is running") {
		t.Fatalf("second lock: %v", err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("lock file left after release: %v", entries)
	}
	b, err := LockNetns(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	b.Release()
}

// A retired SNAT range leaves the reserved list once released, but not the
// ports the host had reserved itself, the ranges still kept, or ports
// others reserved since outside the released range.
func TestReleasePorts(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "reserved")
	if err := os.WriteFile(p, []byte("8080,40005\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournal(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := releasePortsAt(j, p, []PortRange{{40000, 40009}}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != "8080,40005" {
		t.Fatalf("a list XLB never changed became %q", b)
	}
	for _, r := range []PortRange{{40000, 40009}, {41000, 41009}} {
		if err := reservePortsAt(j, p, r.Lo, r.Hi); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(p, []byte("8080,9000,40000-40009,41000-41009\n"), 0o644); err != nil { // 9000: another's
		t.Fatal(err)
	}
	if err := releasePortsAt(j, p, []PortRange{{40000, 40009}}, []PortRange{{40008, 40009}, {41000, 41009}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != "8080,9000,40005,40008-40009,41000-41009" {
		t.Fatalf("after releasing 40000-40009 but 40008-40009: %q", b)
	}
	if err := releasePortsAt(j, p, []PortRange{{40008, 40009}}, []PortRange{{41000, 41009}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != "8080,9000,40005,41000-41009" {
		t.Fatalf("after releasing the rest: %q", b)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != "8080,40005" {
		t.Fatalf("restored %q", b)
	}
}
