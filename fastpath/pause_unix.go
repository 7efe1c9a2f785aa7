//go:build unix

package fastpath

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// clientLeft waits until end for the client of ctx to close its connection. left reports that
// it did; watched reports that the wait covered the whole time until end (false: the
// connection could not be watched, or the client sent more bytes, after which its close
// cannot be seen without reading them, and the caller sleeps the rest).
//
// The wait reads nothing: a peek (MSG_PEEK) tells EOF from "nothing to read", and while there
// is nothing to read the goroutine parks in the netpoller until the socket turns readable or
// the read deadline (end) passes. fasthttp resets the read deadline a handler set once the
// handler returns.
func clientLeft(ctx *fasthttp.RequestCtx, end time.Time) (left, watched bool) {
	sc, ok := ctx.Conn().(syscall.Conn)
	if !ok {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil || ctx.SetReadDeadline(end) != nil {
		return false, false
	}
	more := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false // nothing to read: park until readable or the deadline
			case err != nil || n == 0: // reset, or EOF: the client closed
				left = true
			default:
				more = true
			}
			return true
		}
	})
	switch {
	case left:
		return true, true
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, true
	case err != nil: // the connection broke under the wait
		return true, true
	}
	return false, !more
}
