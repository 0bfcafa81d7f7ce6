package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"
)

// EchoCheck opens a TCP connection from h to addr (an echo server, directly
// or through XLB), sends msg while reading, and checks that exactly msg
// comes back. The whole exchange is bounded by timeout.
func (h *Host) EchoCheck(addr string, msg []byte, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := h.Dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	werr := make(chan error, 1)
	go func() { _, err := c.Write(msg); werr <- err }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes differs", len(msg))
	}
	return nil
}
