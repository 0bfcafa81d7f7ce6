package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/xlbproject/xlb/pkg/backend"
	"github.com/xlbproject/xlb/pkg/config"
)

// waitBound bounds every wait of these tests: generous, since client-go
// backs off up to seconds after an error and the machine is shared.
const waitBound = 60 * time.Second

// recorder runs a provider and keeps every set it sends.
type recorder struct {
	p    *Provider
	mu   sync.Mutex
	sets [][]backend.Backend
}

// run starts p until the test ends; the cleanup requires Run to return
// ctx.Err().
func run(t *testing.T, p *Provider) *recorder {
	t.Helper()
	r := &recorder{p: p}
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan []backend.Backend)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, updates) }()
	go func() {
		for set := range updates {
			r.mu.Lock()
			r.sets = append(r.sets, set)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		case <-time.After(waitBound):
			t.Errorf("Run did not return after cancel")
		}
		close(updates)
	})
	return r
}

// newProvider is New with a test logger, client c and debounce (0: the
// default).
func newProvider(t *testing.T, portName string, c Client, debounce time.Duration) (*Provider, *test.Hook) {
	t.Helper()
	log, hook := test.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	p, err := New(config.KubernetesProvider{Namespace: ns, Service: svc, PortName: portName}, Options{Log: log, Client: c, Debounce: debounce})
	if err != nil {
		t.Fatal(err)
	}
	return p, hook
}

// count is how many sets were sent.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sets)
}

// last is the latest set sent, and whether there was one.
func (r *recorder) last() ([]backend.Backend, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil, false
	}
	return r.sets[len(r.sets)-1], true
}

// wait polls until the latest set is want (nil and empty are equal).
func (r *recorder) wait(t *testing.T, want []backend.Backend) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		got, ok := r.last()
		if ok && sameSet(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the provider's set is %v (sent: %v), want %v (last error %v)", waitBound, got, ok, want, r.p.LastError())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitBound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sameSet(a, b []backend.Backend) bool {
	return len(a) == 0 && len(b) == 0 || slices.Equal(a, b)
}

// left is what leaves eligibility between two sets: the backends the
// manager marks departed (draining while pairs reference them).
func left(prev, cur []backend.Backend) []string {
	var out []string
	for _, b := range prev {
		if !slices.ContainsFunc(cur, func(c backend.Backend) bool { return c.IP == b.IP }) {
			out = append(out, b.Name)
		}
	}
	return out
}

func names(bs []backend.Backend) string {
	var s []string
	for _, b := range bs {
		s = append(s, fmt.Sprintf("%s=%s:%d", b.Name, b.IP, b.Port))
	}
	return fmt.Sprint(s)
}
