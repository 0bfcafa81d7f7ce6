package logging

import (
	"bytes"
	"fmt"
	"os"
	"syscall"

	"github.com/sirupsen/logrus"
)

// EnvJournalStream is set by systemd to "DEVICE:INODE" of the stream it
// connected standard output and error to, when that stream is the journal
// (systemd.exec(5), "$JOURNAL_STREAM").
const EnvJournalStream = "JOURNAL_STREAM"

// JournalStream reports whether f is the journal stream that value (the
// JOURNAL_STREAM variable, "DEVICE:INODE" in decimal) names: systemd's
// rule, since a process may have redirected its standard error since the
// variable was set. An empty or malformed value, or a file that cannot be
// inspected, is not the journal.
func JournalStream(f *os.File, value string) bool {
	var dev, ino uint64
	if value == "" {
		return false
	}
	if n, err := fmt.Sscanf(value, "%d:%d", &dev, &ino); err != nil || n != 2 {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == dev && st.Ino == ino
}

// Priority is the syslog priority (RFC 5424 severity, sd-daemon(3)'s
// "<N>" prefixes) of a logrus level: panic and fatal 2 (crit), error 3
// (err), warn 4 (warning), info 6 (info), debug and trace 7 (debug).
func Priority(l logrus.Level) int {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel:
		return 2
	case logrus.ErrorLevel:
		return 3
	case logrus.WarnLevel:
		return 4
	case logrus.InfoLevel:
		return 6
	}
	return 7
}

// Prioritize returns a formatter that starts every line f writes with
// "<N>", N the record's Priority: journald reads the prefix as the line's
// PRIORITY and removes it (SyslogLevelPrefix=, the default).
func Prioritize(f logrus.Formatter) logrus.Formatter { return prioritizer{f} }

type prioritizer struct{ inner logrus.Formatter }

func (p prioritizer) Format(e *logrus.Entry) ([]byte, error) {
	b, err := p.inner.Format(e)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Appendf(nil, "<%d>", Priority(e.Level))
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		out.Write(prefix)
		out.Write(line)
	}
	return out.Bytes(), nil
}
