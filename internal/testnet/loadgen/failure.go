package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Failure is the kind of a failed connection.
type Failure int

const (
	// Refused: the SYN was answered with a RST (connect: ECONNREFUSED).
	Refused Failure = iota
	// ConnectTimeout: no SYN-ACK within Config.ConnectTimeout (the SYN and
	// its retransmissions went unanswered).
	ConnectTimeout
	// Reset: the connection was reset after the handshake (ECONNRESET,
	// EPIPE).
	Reset
	// IOTimeout: the reply (or, server first, the server's FIN) did not
	// come within Config.IOTimeout.
	IOTimeout
	// NoLocalPort: the client found no free source port
	// (EADDRNOTAVAIL), a limit of the client, not of the path.
	NoLocalPort
	// BadReply: the reply was not testnet.RespondReply, or the connection
	// ended before it.
	BadReply
	// Other is any other error.
	Other

	numFailures
)

var failureNames = [numFailures]string{"refused", "connect-timeout", "reset", "io-timeout", "no-local-port", "bad-reply", "other"}

func (f Failure) String() string {
	if f < 0 || f >= numFailures {
		return fmt.Sprintf("Failure(%d)", int(f))
	}
	return failureNames[f]
}

// classify names the kind of err, returned by the connect (connect true)
// or by the exchange after it.
func classify(err error, connect bool) Failure {
	var ne net.Error
	timeout := errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ETIMEDOUT) || (errors.As(err, &ne) && ne.Timeout())
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return NoLocalPort
	case timeout && connect:
		return ConnectTimeout
	case timeout:
		return IOTimeout
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return Reset
	case errors.Is(err, errBadReply):
		return BadReply
	}
	return Other
}

var errBadReply = errors.New("loadgen: unexpected reply")
