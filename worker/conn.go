package worker

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// conn is a connection to a worker. It is its own RemoteAddr, so that the gateway can reach
// the connection a fasthttp.Response was read from (Response.RemoteAddr, set as the round
// trip starts) and move its read deadline: fasthttp reads a streamed answer's body under the
// deadline of its headers, which a first-byte timeout makes short (ExtendReadDeadline).
type conn struct{ net.Conn }

func (c *conn) RemoteAddr() net.Addr { return c }

// Network and String make conn the net.Addr of the worker's end.
func (c *conn) Network() string { return c.Conn.RemoteAddr().Network() }
func (c *conn) String() string  { return c.Conn.RemoteAddr().String() }

func wrapDial(dial fasthttp.DialFunc) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		return &conn{c}, nil
	}
}

// ExtendReadDeadline sets the read deadline of the worker connection resp was read from,
// while resp's body is still being streamed from it. It must be called on the goroutine that
// made the round trip. It reports false when resp did not come from a worker's HostClient.
func ExtendReadDeadline(resp *fasthttp.Response, t time.Time) bool {
	c, ok := resp.RemoteAddr().(*conn)
	return ok && c.SetReadDeadline(t) == nil
}
