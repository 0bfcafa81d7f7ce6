package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestNewRejectsUnknownLevelAndFormat(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Level: "loud", Format: FormatLogfmt}, `--log.level: want debug, info, warn or error, got "loud"`},
		{Options{Level: "info", Format: "xml"}, `--log.format: want logfmt or json, got "xml"`},
	} {
		if _, err := New(&bytes.Buffer{}, tc.o); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): %v, want %s", tc.o, err, tc.want)
		}
	}
}

// Each format and level as the daemon writes it, with and without the
// journal's priority prefixes.
func TestFormats(t *testing.T) {
	multi := errors.New("xlb.yaml:3: ports: missing\nxlb.yaml:9: snat.ip: bad")
	for _, tc := range []struct {
		name string
		o    Options
		log  func(*logrus.Logger)
		want []string // lines, matched as prefixes after the timestamp is cut
	}{
		{"logfmt", Options{Level: "info", Format: FormatLogfmt}, func(l *logrus.Logger) {
			l.Debug("hidden")
			l.WithField("backend", "web-1").Warn("backend unreachable")
		}, []string{`level=warning msg="backend unreachable" backend=web-1`}},
		{"text is logfmt", Options{Level: "debug", Format: "text"}, func(l *logrus.Logger) {
			l.Debug("shown")
		}, []string{`level=debug msg=shown`}},
		{"logfmt splits a multi-line error", Options{Level: "info", Format: FormatLogfmt}, func(l *logrus.Logger) {
			l.WithError(multi).WithField("config", "/etc/xlb/xlb.yaml").Error("xlb failed")
		}, []string{
			`level=error msg="xlb failed" config=/etc/xlb/xlb.yaml error="xlb.yaml:3: ports: missing"`,
			`level=error msg="xlb failed" config=/etc/xlb/xlb.yaml error="xlb.yaml:9: snat.ip: bad"`,
		}},
		{"journal", Options{Level: "info", Format: FormatLogfmt, Journal: true}, func(l *logrus.Logger) {
			l.Info("starting xlb")
			l.Warn("metrics listener open")
			l.WithError(multi).Error("xlb failed")
		}, []string{
			`<6>level=info msg="starting xlb"`,
			`<4>level=warning msg="metrics listener open"`,
			`<3>level=error msg="xlb failed" error="xlb.yaml:3: ports: missing"`,
			`<3>level=error msg="xlb failed" error="xlb.yaml:9: snat.ip: bad"`,
		}},
		{"a multi-line message", Options{Level: "info", Format: FormatLogfmt, Journal: true}, func(l *logrus.Logger) {
			l.Warn("first\nsecond\n")
		}, []string{`<4>level=warning msg=first`, `<4>level=warning msg=second`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			tc.log(l)
			got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			for i := range got {
				if !tc.o.Journal {
					if !strings.Contains(got[i], "time=") {
						t.Errorf("line %q has no time", got[i])
					}
					_, got[i], _ = strings.Cut(got[i], " ") // time="..."
				} else if strings.Contains(got[i], "time=") {
					t.Errorf("journal line %q has a time (the journal stamps its own)", got[i])
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// In JSON, each line of a multi-line error is a record of its own whose
// error field is that line; other fields and the level stay.
func TestJSONSplit(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, Options{Level: "info", Format: FormatJSON, Journal: true})
	if err != nil {
		t.Fatal(err)
	}
	l.WithError(errors.New("a\nb")).WithField("n", 2).Error("failed")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for i, want := range []string{"a", "b"} {
		j, ok := strings.CutPrefix(lines[i], "<3>")
		if !ok {
			t.Fatalf("line %q lacks <3>", lines[i])
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(j), &rec); err != nil {
			t.Fatalf("line %q: %v", j, err)
		}
		if rec["error"] != want || rec["msg"] != "failed" || rec["level"] != "error" || rec["n"] != float64(2) || rec["time"] == nil {
			t.Errorf("record %d: %v", i, rec)
		}
	}
}

func TestPriority(t *testing.T) {
	for l, want := range map[logrus.Level]int{
		logrus.PanicLevel: 2, logrus.FatalLevel: 2, logrus.ErrorLevel: 3, logrus.WarnLevel: 4,
		logrus.InfoLevel: 6, logrus.DebugLevel: 7, logrus.TraceLevel: 7,
	} {
		if got := Priority(l); got != want {
			t.Errorf("Priority(%s) = %d, want %d", l, got, want)
		}
	}
}

// JournalStream matches the file's own device and inode only.
func TestJournalStream(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]bool{
		fmt.Sprintf("%d:%d", st.Dev, st.Ino):   true,
		fmt.Sprintf("%d:%d", st.Dev, st.Ino+1): false,
		"":                                     false,
		"garbage":                              false,
	} {
		if got := JournalStream(f, value); got != want {
			t.Errorf("JournalStream(%q) = %v, want %v", value, got, want)
		}
	}
}
