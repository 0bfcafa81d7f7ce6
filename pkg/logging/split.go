package logging

import (
	"bytes"
	"strings"

	"github.com/sirupsen/logrus"
)

// Split returns a formatter that writes a record whose message or field
// values span several lines as several records through f: record i has
// line i of each multi-line value (a value with fewer lines is left out
// of the later records) and every single-line field unchanged. Values
// that span lines are strings and errors (their Error text); one trailing
// newline does not count. A record on one line goes through f as it is.
func Split(f logrus.Formatter) logrus.Formatter { return splitter{f} }

type splitter struct{ inner logrus.Formatter }

func (s splitter) Format(e *logrus.Entry) ([]byte, error) {
	msg := lines(e.Message)
	n := len(msg)
	multi := map[string][]string{}
	for k, v := range e.Data {
		if l := lines(text(v)); len(l) > 1 {
			multi[k] = l
			n = max(n, len(l))
		}
	}
	if n <= 1 {
		return s.inner.Format(e)
	}
	var out bytes.Buffer
	for i := range n {
		r := &logrus.Entry{Logger: e.Logger, Time: e.Time, Level: e.Level, Caller: e.Caller, Context: e.Context,
			Data: make(logrus.Fields, len(e.Data)), Message: e.Message}
		if len(msg) > 1 {
			r.Message = at(msg, i)
		}
		for k, v := range e.Data {
			l, ok := multi[k]
			switch {
			case !ok:
				r.Data[k] = v
			case i < len(l):
				r.Data[k] = l[i]
			}
		}
		b, err := s.inner.Format(r)
		if err != nil {
			return nil, err
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

// text is v's text when v is a string or an error, "" otherwise.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case error:
		return v.Error()
	}
	return ""
}

// lines splits s at newlines, one trailing newline ignored.
func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// at is l[i], or "" past its end.
func at(l []string, i int) string {
	if i < len(l) {
		return l[i]
	}
	return ""
}
