package fleet

import (
	"testing"
	"time"
)

func TestParseHandOffs(t *testing.T) {
	since := time.UnixMicro(1_000_000)
	out := `{"MESSAGE":"time=\"...\" level=info msg=\"hot upgrade: starting the new process\" pid=12","__REALTIME_TIMESTAMP":"900000"}
Hint: stderr noise
{"MESSAGE":"time=\"...\" level=info msg=\"hot upgrade: starting the new process\" pid=13","__REALTIME_TIMESTAMP":"2000000"}
{"MESSAGE":[104,105],"__REALTIME_TIMESTAMP":"2500000"}
{"MESSAGE":"level=info msg=\"hot upgrade complete: handed over\" new_pid=13","__REALTIME_TIMESTAMP":"3000000"}
{"MESSAGE":"level=info msg=\"hot upgrade: starting the new process\"","__REALTIME_TIMESTAMP":"4000000"}
`
	hs, err := parseHandOffs("xlb1", out, since)
	if err != nil {
		t.Fatal(err)
	}
	want := []HandOff{
		{Host: "xlb1", Start: time.UnixMicro(2_000_000), Done: time.UnixMicro(3_000_000)},
		{Host: "xlb1", Start: time.UnixMicro(4_000_000)},
	}
	if len(hs) != len(want) {
		t.Fatalf("hand-offs %+v, want %+v", hs, want)
	}
	for i := range want {
		if !hs[i].Start.Equal(want[i].Start) || !hs[i].Done.Equal(want[i].Done) || hs[i].Host != want[i].Host {
			t.Errorf("hand-off %d: %+v, want %+v", i, hs[i], want[i])
		}
	}
}

func TestOverlap(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	for _, c := range []struct {
		name string
		hs   []HandOff
		want bool
	}{
		{"one after another", []HandOff{{"a", at(1), at(2)}, {"b", at(3), at(4)}, {"c", at(5), at(6)}}, false},
		{"out of order, disjoint", []HandOff{{"c", at(5), at(6)}, {"a", at(1), at(2)}}, false},
		{"same host twice", []HandOff{{"a", at(1), at(4)}, {"a", at(2), at(3)}}, false},
		{"overlap", []HandOff{{"a", at(1), at(3)}, {"b", at(2), at(4)}}, true},
		{"touching", []HandOff{{"a", at(1), at(2)}, {"b", at(2), at(4)}}, true},
		{"unfinished first", []HandOff{{"a", at(1), time.Time{}}, {"b", at(5), at(6)}}, true},
	} {
		if _, _, got := Overlap(c.hs); got != c.want {
			t.Errorf("%s: overlap %v, want %v", c.name, got, c.want)
		}
	}
}
