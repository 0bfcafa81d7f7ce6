package lab

import (
	"context"
	"testing"
)

// BenchmarkDial measures a connect+close from the client to an echo server
// (namespace switch included).
func BenchmarkDial(b *testing.B) {
	l := New(b, Options{Backends: 1})
	ctx := context.Background()
	for b.Loop() {
		c, err := l.Client().Dial(ctx, l.EchoAddr(0))
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkDo measures entering and leaving a namespace.
func BenchmarkDo(b *testing.B) {
	l := New(b, Options{Backends: 1})
	for b.Loop() {
		l.XLB.Do(func() error { return nil })
	}
}
