package fastpath

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// Request bodies are read by the gateway, not by fasthttp: the server streams them
// (fasthttp.Server.StreamRequestBody), and Handle reads the stream into a buffer that grows
// as bytes arrive. fasthttp's own reader sizes the buffer from the declared Content-Length
// before the first byte of the body is read, so a client that declares 500 MB and sends 10
// bytes held 500 MB until the read timeout (issue 17). Now a body costs at most twice what
// has arrived, and all bodies being read or forwarded together share one budget
// (--max-request-body-memory): past it a request gets 503 at once instead of the gateway
// running out of memory.

// DefaultMaxBodyMemory is --max-request-body-memory's default: 1 GiB for all request bodies
// held at once, twice the default --max-payload-size.
const DefaultMaxBodyMemory = 1 << 30

const (
	// minBodyGrowth is the smallest buffer a body is read into, and the smallest growth step.
	minBodyGrowth = 4 << 10
	// maxPooledBody bounds the body buffers kept for reuse between requests.
	maxPooledBody = 1 << 20
)

// bodyBudget counts the bytes of the body buffers in use against a limit. Buffers waiting
// in the pool are not counted: the pool keeps none larger than maxPooledBody.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reserve takes n bytes of the budget, or nothing if they are not there.
func (b *bodyBudget) reserve(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *bodyBudget) release(n int) { b.used.Add(-int64(n)) }

// bodyBuf is a request body read by the gateway; its capacity is reserved in the budget.
type bodyBuf struct {
	b []byte
	// partial is set when b holds only the head of a generation body larger than
	// --max-buffered-request-bytes: the rest is still in the request's body stream, to be
	// streamed to the worker (streamed.go) or read by readRest.
	partial bool
}

var bodyBufs = sync.Pool{New: func() any { return new(bodyBuf) }}

var (
	errBodyBudget = errors.New("the gateway holds --max-request-body-memory bytes of request bodies already")
	errBodyLarge  = errors.New("the request body exceeds --max-payload-size")
)

// readBody reads the request's streamed body, if it has one, and makes it the request's
// body. For a generation route (streamable) whose body is larger than
// --max-buffered-request-bytes it reads only that much, the head, and returns the buffer
// marked partial without making it the request's body. It returns the buffer to hand to
// releaseBody when the handler is done, or false after answering the client with the reason
// the body could not be read.
func (s *Server) readBody(ctx *fasthttp.RequestCtx, streamable bool) (*bodyBuf, bool) {
	stream := ctx.RequestBodyStream()
	declared := ctx.Request.Header.ContentLength() // -1: chunked
	if stream == nil || declared == 0 {
		return nil, true
	}
	if declared > s.cfg.MaxPayloadSize {
		s.failBody(ctx, errBodyLarge)
		return nil, false
	}
	bb := bodyBufs.Get().(*bodyBuf)
	if !s.bodies.reserve(cap(bb.b)) {
		bodyBufs.Put(bb)
		s.failBody(ctx, errBodyBudget)
		return nil, false
	}
	limit := s.bodyLimit(declared)
	head := limit
	if streamable && s.cfg.MaxBufferedBody < limit {
		head = s.cfg.MaxBufferedBody
		if declared < 0 {
			head++ // one byte past tells that a chunked body is larger
		}
	}
	eof, ok := s.fill(ctx, stream, bb, head)
	if !ok {
		return nil, false
	}
	if !eof && head < limit {
		bb.partial = true
		return bb, true
	}
	return bb, s.finishBody(ctx, bb)
}

// bodyLimit is how much of a body may be read: its declared length, or for a chunked one
// one byte past --max-payload-size, which tells it is too large.
func (s *Server) bodyLimit(declared int) int {
	if declared < 0 {
		return s.cfg.MaxPayloadSize + 1
	}
	return declared
}

// readRest reads the rest of a partial body (PD mode rewrites bodies, so it needs them
// whole) and makes the whole its request's body; false after answering the client.
func (s *Server) readRest(ctx *fasthttp.RequestCtx, bb *bodyBuf) bool {
	limit := s.bodyLimit(ctx.Request.Header.ContentLength())
	if _, ok := s.fill(ctx, ctx.RequestBodyStream(), bb, limit); !ok {
		return false
	}
	bb.partial = false
	return s.finishBody(ctx, bb)
}

// fill reads stream into bb until it holds upTo bytes or the body ends (eof), growing it
// within the budget. On a failure it answers the client, releases bb and returns ok false.
func (s *Server) fill(ctx *fasthttp.RequestCtx, stream io.Reader, bb *bodyBuf, upTo int) (eof, ok bool) {
	b := bb.b
	for len(b) < upTo {
		if len(b) == cap(b) {
			grown, ok := s.growBody(b, upTo)
			if !ok {
				bb.b = b
				s.releaseBody(ctx, bb)
				s.failBody(ctx, errBodyBudget)
				return false, false
			}
			b = grown
		}
		n, err := stream.Read(b[len(b):min(cap(b), upTo)])
		b = b[:len(b)+n]
		if err == io.EOF {
			eof = true
			break
		}
		if err != nil {
			bb.b = b
			s.releaseBody(ctx, bb)
			s.failBody(ctx, err)
			return false, false
		}
	}
	bb.b = b
	return eof, true
}

// finishBody checks a body read whole against --max-payload-size and makes it the request's
// body; false after answering the client.
func (s *Server) finishBody(ctx *fasthttp.RequestCtx, bb *bodyBuf) bool {
	if len(bb.b) > s.cfg.MaxPayloadSize {
		s.releaseBody(ctx, bb)
		s.failBody(ctx, errBodyLarge)
		return false
	}
	ctx.Request.SetBodyRaw(bb.b)
	return true
}

// growBody doubles b's capacity (at least minBodyGrowth, at most limit), taking the growth
// from the budget; false when the budget has no room. The new buffer is allocated only when
// a body is larger than the pooled buffer it started in.
func (s *Server) growBody(b []byte, limit int) ([]byte, bool) {
	size := min(max(2*cap(b), minBodyGrowth), limit)
	if !s.bodies.reserve(size - cap(b)) {
		return b, false
	}
	grown := make([]byte, len(b), size)
	copy(grown, b)
	return grown, true
}

// releaseBody returns a body read by readBody to the pool and its bytes to the budget. The
// request must not be used after it (the buffer is detached from it first).
func (s *Server) releaseBody(ctx *fasthttp.RequestCtx, bb *bodyBuf) {
	if bb == nil {
		return
	}
	ctx.Request.SetBodyRaw(nil)
	s.bodies.release(cap(bb.b))
	if cap(bb.b) > maxPooledBody {
		bb.b = nil
	}
	bb.b, bb.partial = bb.b[:0], false
	bodyBufs.Put(bb)
}

// failBody answers a request whose body could not be read, and closes the connection: the
// rest of the body may still be on its way, so the close lingers (linger.go).
func (s *Server) failBody(ctx *fasthttp.RequestCtx, err error) {
	lingerOnClose(ctx.Conn())
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(err, errBodyLarge):
		writeError(ctx, errPayloadTooLarge, fmt.Sprintf("request body exceeds --max-payload-size (%d bytes)", s.cfg.MaxPayloadSize))
	case errors.Is(err, errBodyBudget):
		writeError(ctx, errBodyMemory, "the gateway is reading too many request bodies at once (--max-request-body-memory); retry later")
	case errors.As(err, &te) && te.Timeout():
		writeError(ctx, errReadTimeout, "timed out reading the request body")
	default: // a broken chunked encoding, or the client left
		writeError(ctx, errInvalidRequest, "cannot read the request body: "+err.Error())
	}
	ctx.SetConnectionClose()
	s.m.observe(routeOther, ctx.Response.StatusCode(), ctx.Time())
}
