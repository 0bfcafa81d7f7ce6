package logging

import (
	"fmt"
	"io"

	"github.com/sirupsen/logrus"
)

// Formats of --log.format.
const (
	// FormatLogfmt is key=value pairs, one record a line (the default).
	FormatLogfmt = "logfmt"
	// FormatJSON is one JSON object a line.
	FormatJSON = "json"
	// formatText is the spelling before issue 16 (--log-format=text),
	// still accepted: it is logfmt.
	formatText = "text"
)

// DefaultLevel and DefaultFormat are the flags' defaults.
const (
	DefaultLevel  = "info"
	DefaultFormat = FormatLogfmt
)

// Options say how to log.
type Options struct {
	// Level is the least severe level written: debug, info, warn (or
	// warning) or error; logrus.ParseLevel's trace, fatal and panic are
	// accepted too.
	Level string
	// Format is FormatLogfmt or FormatJSON ("text" is logfmt).
	Format string
	// Journal prefixes every line with its syslog priority (JournalStream
	// says when standard error is the journal).
	Journal bool
}

// New returns a logger writing to w as o says. An unknown level or format
// is an error naming the flag (--log.level, --log.format) and the values
// it takes.
func New(w io.Writer, o Options) (*logrus.Logger, error) {
	lvl, err := logrus.ParseLevel(o.Level)
	if err != nil {
		return nil, fmt.Errorf("--log.level: want debug, info, warn or error, got %q", o.Level)
	}
	var f logrus.Formatter
	switch o.Format {
	case FormatLogfmt, formatText:
		f = &logrus.TextFormatter{DisableColors: true, FullTimestamp: true, DisableTimestamp: o.Journal}
	case FormatJSON:
		f = &logrus.JSONFormatter{}
	default:
		return nil, fmt.Errorf("--log.format: want %s or %s, got %q", FormatLogfmt, FormatJSON, o.Format)
	}
	f = Split(f)
	if o.Journal {
		f = Prioritize(f)
	}
	log := logrus.New()
	log.SetOutput(w)
	log.SetLevel(lvl)
	log.SetFormatter(f)
	return log, nil
}
