package worker

import (
	"errors"
	"net"
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
	// client, while set, is the client of the round trip waiting for its first byte
	// (WatchClient); deadline is the read deadline the round trip set.
	client   net.Conn
	deadline time.Time
	// w is the worker the connection leads to: a round trip waiting on a worker found
	// unresponsive (StallUnresponsive) is cut. Nil in tests.
	w *Worker
}

func (c *conn) RemoteAddr() net.Addr { return c }

// Network and String make conn the net.Addr of the worker's end.
func (c *conn) Network() string { return c.Conn.RemoteAddr().Network() }
func (c *conn) String() string  { return c.Conn.RemoteAddr().String() }

func wrapDial(dial fasthttp.DialFunc, w *Worker) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: c, w: w}, nil
	}
}

// ExtendReadDeadline sets the read deadline of the worker connection resp was read from,
// while resp's body is still being streamed from it. It must be called on the goroutine that
// made the round trip. It reports false when resp did not come from a worker's HostClient.
func ExtendReadDeadline(resp *fasthttp.Response, t time.Time) bool {
	c, ok := resp.RemoteAddr().(*conn)
	return ok && c.SetReadDeadline(t) == nil
}

// ErrClientLeft ends a round trip whose client went away while the worker had not started
// its answer (WatchClient).
var ErrClientLeft = errors.New("the client closed its connection before the worker answered")

// ErrWorkerUnresponsive ends a round trip waiting for the first byte of a worker that stopped
// answering (StallUnresponsive): the request is retried elsewhere, and the worker's breaker
// counts a fault.
var ErrWorkerUnresponsive = errors.New("the worker stopped answering (no first byte while requests waited, and a probe got no answer)")

// watchInterval is how often a round trip waiting for the worker's first byte checks that
// its client is still there: the longest an abandoned request keeps its worker busy.
const watchInterval = 250 * time.Millisecond

// WatchClient makes the round trip under way on the connection resp is being read from give
// up, with ErrClientLeft, when client closes its connection before the worker's first byte
// arrives: the worker's connection is then closed, so the engine sees the request cancelled,
// and the gateway frees what the request holds at once instead of at its deadline (issue
// 17). It must be called on the goroutine making the round trip, after it took its
// connection (fasthttp calls a request's body writer then); it does nothing for a response
// that is not read from a worker's connection.
func WatchClient(resp *fasthttp.Response, client net.Conn) {
	_, socket := client.(syscall.Conn)
	if _, says := client.(leaver); !socket && !says {
		return // an in-memory or TLS connection: clientGone could not tell
	}
	if c, ok := resp.RemoteAddr().(*conn); ok {
		c.client = client
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

// Read reads the worker's answer. While a client is watched and nothing has arrived, it
// waits in slices of watchInterval and checks between them that the client is still there
// and that the worker has not been found unresponsive.
func (c *conn) Read(p []byte) (int, error) {
	if c.client == nil {
		return c.Conn.Read(p)
	}
	defer func() { c.client = nil }()
	for {
		slice := time.Now().Add(watchInterval)
		if !c.deadline.IsZero() && !slice.Before(c.deadline) {
			// The round trip's own deadline comes first: the last wait.
			return c.Conn.Read(p)
		}
		if err := c.Conn.SetReadDeadline(slice); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		var ne net.Error
		if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
			if rerr := c.Conn.SetReadDeadline(c.deadline); err == nil {
				err = rerr
			}
			return n, err
		}
		if left(c.client) {
			return 0, ErrClientLeft
		}
		if c.w != nil && c.w.stall.Load() == StallUnresponsive {
			return 0, ErrWorkerUnresponsive
		}
	}
}
