package testnet

import (
	"io"
	"net"
	"testing"
	"time"
)

// Respond answers one request line and closes first only when asked to.
func TestRespond(t *testing.T) {
	p := newPair(t)
	s, err := p.b.Serve(":8080", Respond)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{RequestServerCloses, RequestClientCloses} {
		c, err := p.a.DialFrom(longCtx(t), 0, echoAddr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(waitLong))
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(RespondReply))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != RespondReply {
			t.Fatalf("%q: reply %q, %v", req, got, err)
		}
		if req == RequestServerCloses {
			if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
				t.Fatalf("after the reply: %q, %v; want the server's FIN", rest, err)
			}
		} else {
			// The server waits for our FIN: nothing arrives meanwhile.
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if n, err := c.Read(got); n != 0 || !isTimeout(err) {
				t.Fatalf("server closed first (%d bytes, %v)", n, err)
			}
			c.SetReadDeadline(time.Now().Add(waitLong))
			c.CloseWrite()
			if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
				t.Fatalf("after our FIN: %q, %v", rest, err)
			}
		}
		c.Close()
	}
	st, err := s.WaitCompleted(longCtx(t), 2)
	if err != nil || st.Errors != 0 || st.Resets != 0 {
		t.Fatalf("%+v, %v", st, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
