package testnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// Echo writes back every byte it receives until the peer half-closes, then
// returns (and the server closes the connection).
func Echo(c *Conn) error { return EchoBuffer(c, 32<<10) }

// EchoBuffer is Echo through a buffer of size bytes (a server holding many
// connections at once wants a small one).
func EchoBuffer(c io.ReadWriter, size int) error {
	buf := make([]byte, size)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Sink reads until the peer half-closes, then writes the number of bytes
// received as an 8-byte big-endian integer and returns.
func Sink(c *Conn) error {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := c.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	var out [8]byte
	binary.BigEndian.PutUint64(out[:], uint64(n))
	_, err := c.Write(out[:])
	return err
}

// ReadSinkCount reads the 8-byte big-endian count a Sink answers with.
func ReadSinkCount(r io.Reader) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// The one-line requests Respond understands, and its answer. They play
// HTTP/1.x without the headers: RequestServerCloses is a request with
// "Connection: close" (the server closes first and holds TIME_WAIT, as
// in the issue 13 measurements), RequestClientCloses one after which the
// client closes first (the client holds TIME_WAIT).
const (
	RequestClientCloses = "GET /keep\n"
	RequestServerCloses = "GET /close\n"
	RespondReply        = "200 OK\n"
	// MaxRequestLine bounds a request line; a longer one is an error.
	MaxRequestLine = 1024
)

// Respond reads one request line (up to '\n', at most MaxRequestLine
// bytes; bytes after the line are ignored) and writes RespondReply. After RequestServerCloses it returns at
// once, so the server closes first; after any other request it waits for
// the client's FIN (EOF) and then returns.
func Respond(c *Conn) error {
	buf := make([]byte, MaxRequestLine)
	n := 0
	for {
		m, err := c.Read(buf[n:])
		n += m
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			n = i + 1
			break
		}
		if err != nil {
			return err
		}
		if n == len(buf) {
			return errors.New("testnet: request line too long")
		}
	}
	if _, err := c.Write([]byte(RespondReply)); err != nil {
		return err
	}
	if string(buf[:n]) == RequestServerCloses {
		return nil
	}
	_, err := io.Copy(io.Discard, c)
	return err
}
