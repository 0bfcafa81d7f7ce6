package testnet

import (
	"encoding/binary"
	"errors"
	"io"
)

// Echo writes back every byte it receives until the peer half-closes, then
// returns (and the server closes the connection).
func Echo(c *Conn) error {
	buf := make([]byte, 32<<10)
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
