package worker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// conn is a connection to a worker. It is its own RemoteAddr, so that the gateway can reach
// the connection a fasthttp.Response was read from (Response.RemoteAddr, set as the round
// trip starts) and move its read deadline: fasthttp reads a streamed answer's body under the
// deadline of its headers, which a first-byte timeout makes short (ExtendReadDeadline).
type conn struct {
	net.Conn
	// watching is set while a round trip waits for its worker's first byte (Watch); client,
	// then, is its client's connection if it can be watched, and cancel its request's
	// cancel. deadline is the read deadline the round trip set.
	watching bool
	client   net.Conn
	cancel   *atomic.Bool
	deadline time.Time
	// gaveUp is why the watched round trip gave up (ErrClientLeft, ErrCancelled,
	// ErrWorkerUnresponsive), until the next Watch: fasthttp reports any error on the first
	// byte as a closed connection (Cause).
	gaveUp error
	// w is the worker the connection leads to: a round trip waiting on a worker found
	// unresponsive (StallUnresponsive) is cut. Nil in tests.
	w *Worker
}

func (c *conn) RemoteAddr() net.Addr { return c }

// Network and String make conn the net.Addr of the worker's end.
func (c *conn) Network() string { return c.Conn.RemoteAddr().Network() }
func (c *conn) String() string  { return c.Conn.RemoteAddr().String() }

// wrapDial makes every connection to w a conn. For a worker behind TLS (tlsConfig set) the
// TLS client runs inside the conn (fasthttp leaves a connection with a Handshake method as
// it is): the round trip's watch then sees the worker's answer, not the records TLS
// exchanges on its own (OpenSSL sends TLS 1.3 session tickets once it has read the client's
// Finished, so they arrive after the handshake: a watch below TLS took them for the worker's
// first byte and stopped watching; TestTLSWorkerWhoseTicketsFollowTheHandshake).
func wrapDial(dial fasthttp.DialFunc, w *Worker, tlsConfig *tls.Config, timeout time.Duration) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		if tlsConfig != nil {
			tc := tls.Client(c, tlsConfig)
			if err := handshake(tc, timeout); err != nil {
				_ = c.Close()
				return nil, err
			}
			c = tc
		}
		return &conn{Conn: c, w: w}, nil
	}
}

// Handshake tells fasthttp that the connection needs no TLS client on top: a TLS worker's
// is inside (wrapDial); a plain worker's HostClient does not ask.
func (c *conn) Handshake() error { return nil }

func handshake(tc *tls.Conn, timeout time.Duration) error {
	if err := tc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("cannot complete the TLS handshake with the worker: %w", err)
	}
	return tc.SetDeadline(time.Time{})
}

// ExtendReadDeadline sets the read deadline of the worker connection resp was read from,
// while resp's body is still being streamed from it. It must be called on the goroutine that
// made the round trip. It reports false when resp did not come from a worker's HostClient.
func ExtendReadDeadline(resp *fasthttp.Response, t time.Time) bool {
	c, ok := resp.RemoteAddr().(*conn)
	return ok && c.SetReadDeadline(t) == nil
}

// ErrClientLeft ends a round trip whose client went away while the worker had not started
// its answer (Watch).
var ErrClientLeft = errors.New("the client closed its connection before the worker answered")

// ErrCancelled ends a round trip whose request gave it up before the worker answered (Watch's
// cancel): in PD mode, one leg because the other failed.
var ErrCancelled = errors.New("the request gave up this round trip before the worker answered")

// ErrWorkerUnresponsive ends a round trip waiting for the first byte of a worker that stopped
// answering (StallUnresponsive): the request is retried elsewhere, and the worker's breaker
// counts a fault.
var ErrWorkerUnresponsive = errors.New("the worker stopped answering (no first byte while requests waited, and a probe got no answer)")

// watchInterval is how often a round trip waiting for the worker's first byte checks that
// its client is still there: the longest an abandoned request keeps its worker busy.
const watchInterval = 250 * time.Millisecond

// Watch makes the round trip under way on the connection resp is being read from give up
// before its worker's first byte arrives: with ErrClientLeft when client (if it can tell:
// a socket, or a connection that says itself) closes its connection, with ErrCancelled once
// cancel (if not nil) is set, and with ErrWorkerUnresponsive once worker/stall finds the
// worker unresponsive. The worker's connection is then closed, so the engine sees the
// request cancelled, and the gateway frees what the request holds at once instead of at its
// deadline (issue 17). It must be called on the goroutine making the round trip, after it
// took its connection (fasthttp calls a request's body writer then); it does nothing for a
// response that is not read from a worker's connection.
func Watch(resp *fasthttp.Response, client net.Conn, cancel *atomic.Bool) {
	c, ok := resp.RemoteAddr().(*conn)
	if !ok {
		return
	}
	c.watching, c.client, c.cancel, c.gaveUp = true, nil, cancel, nil
	if client == nil {
		return
	}
	_, socket := client.(syscall.Conn)
	if _, says := client.(leaver); socket || says {
		c.client = client // an in-memory connection could not tell
	}
}

// leaver is a client connection that knows itself whether its client left: the event loops'
// bridge, whose socket the loop owns.
type leaver interface{ ClientLeft() bool }

// left reports whether client's client went away: as the connection says, or as its socket
// shows.
func left(client net.Conn) bool {
	if l, ok := client.(leaver); ok {
		return l.ClientLeft()
	}
	return clientGone(client)
}

// SetReadDeadline records the deadline the round trip set, which Read restores once the
// first byte has arrived.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) SetDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

// Read reads the worker's answer. While a round trip is watched and nothing has arrived, it
// waits in slices of watchInterval and checks between them that the client is still there,
// that the request has not given the round trip up and that the worker has not been found
// unresponsive.
func (c *conn) Read(p []byte) (int, error) {
	if !c.watching {
		return c.Conn.Read(p)
	}
	defer func() { c.watching, c.client, c.cancel = false, nil, nil }()
	for {
		slice := time.Now().Add(watchInterval)
		if !c.deadline.IsZero() && !slice.Before(c.deadline) {
			// The round trip's own deadline comes first: the last wait, until it (the
			// previous slice's deadline is still set: reading under it cut a try up to a
			// slice before its deadline).
			if err := c.Conn.SetReadDeadline(c.deadline); err != nil {
				return 0, err
			}
			return c.Conn.Read(p)
		}
		if err := c.Conn.SetReadDeadline(slice); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 || !isTimeout(err) {
			if rerr := c.Conn.SetReadDeadline(c.deadline); err == nil {
				err = rerr
			}
			return n, err
		}
		switch {
		case c.client != nil && left(c.client):
			c.gaveUp = ErrClientLeft
		case c.cancel != nil && c.cancel.Load():
			c.gaveUp = ErrCancelled
		case c.w != nil && c.w.stall.Load() == StallUnresponsive:
			c.gaveUp = ErrWorkerUnresponsive
		default:
			continue
		}
		return 0, c.gaveUp
	}
}

// Cause returns why the round trip that read into resp failed: the reason its watch gave
// up, if it did (fasthttp turns any error on an answer's first byte into
// fasthttp.ErrConnectionClosed, which would make a client's departure look like the
// worker's fault), else err.
func Cause(resp *fasthttp.Response, err error) error {
	if err == nil {
		return nil
	}
	if c, ok := resp.RemoteAddr().(*conn); ok && c.gaveUp != nil {
		return c.gaveUp
	}
	return err
}

// isTimeout reports whether err is a read deadline's timeout. It asserts rather than calls
// errors.As, whose target escapes: one allocation per watched read.
func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}
