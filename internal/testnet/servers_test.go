package testnet

import (
	"crypto/rand"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

const (
	echoAddr = "192.0.2.31:8080"
	sinkAddr = "192.0.2.31:8081"
)

// waitIdle waits for the connections WaitTCP made, then zeroes stats.
func waitIdle(t *testing.T, s *Server, n int) {
	t.Helper()
	if _, err := s.WaitCompleted(longCtx(t), n); err != nil {
		t.Fatal(err)
	}
	s.ResetStats()
}

// Sink answers with the count of bytes received, then closes.
func TestSink(t *testing.T) {
	p := newPair(t)
	s, err := p.b.Serve(":8081", Sink)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.a.Dial(longCtx(t), sinkAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLong))
	buf := make([]byte, 100_003)
	rand.Read(buf)
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	if got, err := ReadSinkCount(c); err != nil || got != uint64(len(buf)) {
		t.Fatalf("count %d, %v; want %d", got, err, len(buf))
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after count: %d more bytes, %v", len(rest), err)
	}
	st, err := s.WaitCompleted(longCtx(t), 1)
	if err != nil || st.BytesIn != int64(len(buf)) || st.BytesOut != 8 || st.Remotes[p.a.IP()] != 1 {
		t.Errorf("stats %+v, %v", st, err)
	}
}

func TestServerSurvivesResetsAndCloses(t *testing.T) {
	RequireRoot(t)
	base := runtime.NumGoroutine()
	p := newPair(t)
	echo, err := p.b.Serve(":8080", Echo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.Serve(":8081", Sink); err != nil {
		t.Fatal(err)
	}
	if err := WaitTCP(p.a, echoAddr, waitLong); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, echo, 1)

	// The client resets the connection mid-stream.
	c, err := p.a.Dial(longCtx(t), echoAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(make([]byte, 1000))
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	st, err := echo.WaitCompleted(longCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Resets != 1 || st.Errors != 0 || !st.Conns[0].Reset {
		t.Errorf("after client RST: %+v", st)
	}

	// The server still serves.
	if err := p.a.EchoCheck(echoAddr, []byte("still there"), waitLong); err != nil {
		t.Fatal(err)
	}

	// A custom handler: the backend sends 5 bytes and closes first.
	hello, err := p.b.Serve(":9000", func(c *Conn) error {
		_, err := c.Write([]byte("hello"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := p.a.Dial(longCtx(t), "192.0.2.31:9000")
	if err != nil {
		t.Fatal(err)
	}
	hc.SetDeadline(time.Now().Add(waitLong))
	if got, err := io.ReadAll(hc); err != nil || string(got) != "hello" {
		t.Errorf("custom handler: %q, %v", got, err)
	}
	hc.Close()
	if st, err := hello.WaitCompleted(longCtx(t), 1); err != nil || st.BytesOut != 5 {
		t.Errorf("custom handler stats %+v, %v", st, err)
	}

	// Idle connections left open must not keep Close from finishing or
	// leak goroutines.
	for range 3 {
		c, err := p.a.DialFrom(longCtx(t), 0, sinkAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, p.Prefix)
	deadline := time.Now().Add(waitLong)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Errorf("%d goroutines after Close, %d before the topology", n, base)
	}
}
