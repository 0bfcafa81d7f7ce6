package bgp

import (
	"context"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// logrusHandler is a log/slog handler (GoBGP v4 logs through log/slog)
// that writes each record to a logrus logger at the matching level, with
// the record's attributes as fields. Records below gobgpLogLevel are
// dropped; logrus applies its own level after that.
type logrusHandler struct {
	log    logrus.FieldLogger
	fields logrus.Fields
	group  string
}

// gobgpLogLevel keeps GoBGP's per-connection-attempt debug records out:
// peer up/down, configuration and errors are Info and above.
const gobgpLogLevel = slog.LevelInfo

func newSlogLogger(log logrus.FieldLogger) *slog.Logger {
	return slog.New(&logrusHandler{log: log, fields: logrus.Fields{}})
}

func (h *logrusHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= gobgpLogLevel }

func (h *logrusHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make(logrus.Fields, len(h.fields)+r.NumAttrs())
	for k, v := range h.fields {
		fields[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		h.add(fields, h.group, a)
		return true
	})
	e := h.log.WithFields(fields)
	switch {
	case r.Level >= slog.LevelError:
		e.Error(r.Message)
	case r.Level >= slog.LevelWarn:
		e.Warn(r.Message)
	case r.Level >= slog.LevelInfo:
		e.Info(r.Message)
	default:
		e.Debug(r.Message)
	}
	return nil
}

// add stores a (a group's attributes each under "group.key").
func (h *logrusHandler) add(fields logrus.Fields, group string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := a.Key
		if group != "" && g != "" {
			g = group + "." + g
		} else if g == "" {
			g = group
		}
		for _, ga := range v.Group() {
			h.add(fields, g, ga)
		}
		return
	}
	if a.Key == "" {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	fields[key] = v.Any()
}

func (h *logrusHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &logrusHandler{log: h.log, fields: make(logrus.Fields, len(h.fields)+len(attrs)), group: h.group}
	for k, v := range h.fields {
		n.fields[k] = v
	}
	for _, a := range attrs {
		h.add(n.fields, h.group, a)
	}
	return n
}

func (h *logrusHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	g := name
	if h.group != "" {
		g = h.group + "." + name
	}
	return &logrusHandler{log: h.log, fields: h.fields, group: g}
}
