package kubernetes

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
)

// logSink carries client-go's contextual logging (klog's logr interface,
// through the context Run gives the informer) to logrus at debug level:
// watch restarts, backoffs and cache syncs are detail; the API errors that
// matter reach LastError and the provider's own warnings. Verbosity above
// maxKlogV is dropped.
type logSink struct {
	log    logrus.FieldLogger
	name   string
	values []any
}

// maxKlogV is the most verbose klog level kept: 2 has the informer's
// "caches populated" and watch-list fallbacks, 4 and up every request.
const maxKlogV = 2

func (s *logSink) Init(logr.RuntimeInfo) {}

func (s *logSink) Enabled(level int) bool { return level <= maxKlogV }

func (s *logSink) Info(level int, msg string, kv ...any) {
	s.entry(kv).Debug("client-go: " + msg)
}

func (s *logSink) Error(err error, msg string, kv ...any) {
	s.entry(kv).WithError(err).Debug("client-go: " + msg)
}

func (s *logSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any(nil), s.values...), kv...)
	return &c
}

func (s *logSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}

// entry turns key/value pairs into logrus fields.
func (s *logSink) entry(kv []any) logrus.FieldLogger {
	f := logrus.Fields{}
	if s.name != "" {
		f["logger"] = s.name
	}
	all := append(append([]any(nil), s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		f[fmt.Sprint(all[i])] = all[i+1]
	}
	return s.log.WithFields(f)
}
