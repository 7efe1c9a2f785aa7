package fastpath

import (
	"io"
	"net"
	"syscall"
	"time"
)

// Lingering close. When the gateway refuses a request before reading all of it (a header
// block past --max-header-size, a body past --max-payload-size), the client may still be
// sending. Closing a socket with unread input makes the kernel answer with a reset, and a
// reset that reaches the client before it read the answer destroys the answer: the client
// sees "connection reset" instead of the 431 or 413 that tells it what to fix. Like nginx's
// lingering_close, such a connection is half-closed after the answer and its input drained
// until the client closes its side or lingerTimeout passes (a time bound, like nginx's
// lingering_time: a byte bound would reset exactly the clients that send the most).
const lingerTimeout = 2 * time.Second

// lingerListener hands out connections that can be marked for a lingering close.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &lingerConn{Conn: c}
	if _, ok := c.(syscall.Conn); ok {
		// The client's socket stays reachable: a retry's pause and the wait for a worker's
		// first byte watch it for a client that leaves (pause_unix.go, worker.Watch).
		return lingerSyscallConn{lc}, nil
	}
	return lc, nil
}

// lingerSyscallConn is a lingerConn over a connection with a file descriptor.
type lingerSyscallConn struct{ *lingerConn }

func (c lingerSyscallConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// lingerConn is a client connection; lingerOnClose is set by the error handler of the
// serving goroutine, and Close runs on that same goroutine.
type lingerConn struct {
	net.Conn
	lingerOnClose bool
}

// lingerOnClose marks c, when it is a lingerConn, to drain its input before closing.
func lingerOnClose(c net.Conn) {
	switch lc := c.(type) {
	case *lingerConn:
		lc.lingerOnClose = true
	case lingerSyscallConn:
		lc.lingerOnClose = true
	}
}

func (c *lingerConn) Close() error {
	if c.lingerOnClose {
		c.lingerOnClose = false
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
			_, _ = io.Copy(io.Discard, c.Conn)
		}
	}
	return c.Conn.Close()
}
