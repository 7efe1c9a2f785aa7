package fastpath

import (
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/worker"
)

// A client that leaves before its worker has started answering (issue 17): the gateway used
// to wait for the worker until the request's deadline (1800 s by default), holding the
// worker's in-flight count and connection for nobody. Now the worker's connection watches
// the client while it waits for the first byte (worker.Watch): when the client has gone,
// the round trip ends with worker.ErrClientLeft, the worker's connection is closed (the
// engine sees the request cancelled), and the attempt is abandoned, not retried, and not
// counted against the worker. Every round trip to a worker is sent this way, the PD legs
// included (pd.go), so the same watch also cuts a wait on a worker found unresponsive
// (worker/stall) and one the request gave up (a PD leg whose other leg failed).

// errClientLeft is forward's answer for a request whose client left: there is nobody to
// retry or answer for.
var errClientLeft = errors.New("the client left before the worker answered")

// upstreamBody is the request body as it is sent to a worker: fasthttp writes it (WriteTo)
// on the round trip's goroutine once the worker's connection is taken and resp knows it,
// which is when the connection learns which client to watch.
type upstreamBody struct {
	body []byte
	// rest, for a streamed body (streamed.go), is the client's body stream after body, the
	// head; size is then the whole body's length (-1: chunked) and limit bounds it.
	rest        io.Reader
	size, limit int
	resp        *fasthttp.Response
	// client is the client's connection; cancel, when set, gives the round trip up (PD: the
	// other leg failed).
	client net.Conn
	cancel *atomic.Bool
}

// length is the body's length as the worker is told it (-1: chunked).
func (b *upstreamBody) length() int {
	if b.rest != nil {
		return b.size
	}
	return len(b.body)
}

// sendWatched makes req's body x.up's, so that the round trip reading into resp watches
// ctx's client (and x.up's cancel). x.up.body points into the request's body buffer or the
// exchange's PD buffer: the request must not pool its buffer when the body stream replaces
// it (fasthttp's server keeps it anyway; a bridged request would not).
func sendWatched(ctx *fasthttp.RequestCtx, x *exchange, resp *fasthttp.Response) {
	x.up.resp, x.up.client = resp, ctx.Conn()
	ctx.Request.KeepBodyBuffer = true
	ctx.Request.SetBodyStream(&x.up, x.up.length())
}

// WriteTo implements fasthttp.BodyWriterTo.
func (b *upstreamBody) WriteTo(w io.Writer) (int64, error) {
	worker.Watch(b.resp, b.client, b.cancel)
	n, err := w.Write(b.body)
	if err != nil || b.rest == nil {
		return int64(n), err
	}
	m, err := copyRest(w, b.rest, b.limit-n)
	return int64(n) + m, err
}

func (b *upstreamBody) SupportsBodyWriteTo() bool { return true }

// Read is never called (fasthttp uses WriteTo); it is there to make upstreamBody a body
// stream.
func (b *upstreamBody) Read([]byte) (int, error) { return 0, io.EOF }
