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
type bodyBuf struct{ b []byte }

var bodyBufs = sync.Pool{New: func() any { return new(bodyBuf) }}

var (
	errBodyBudget = errors.New("the gateway holds --max-request-body-memory bytes of request bodies already")
	errBodyLarge  = errors.New("the request body exceeds --max-payload-size")
)

// readBody reads the request's streamed body, if it has one, and makes it the request's
// body. It returns the buffer to hand to releaseBody when the handler is done, or false
// after answering the client with the reason the body could not be read.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) (*bodyBuf, bool) {
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
	// A body never needs more than its declared length; a chunked one is read to one byte
	// past --max-payload-size, which tells it is too large.
	limit := declared
	if declared < 0 {
		limit = s.cfg.MaxPayloadSize + 1
	}
	b := bb.b[:0]
	for len(b) < limit {
		if len(b) == cap(b) {
			grown, ok := s.growBody(b, limit)
			if !ok {
				bb.b = b
				s.releaseBody(ctx, bb)
				s.failBody(ctx, errBodyBudget)
				return nil, false
			}
			b = grown
		}
		n, err := stream.Read(b[len(b):min(cap(b), limit)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			bb.b = b
			s.releaseBody(ctx, bb)
			s.failBody(ctx, err)
			return nil, false
		}
	}
	if len(b) > s.cfg.MaxPayloadSize {
		bb.b = b
		s.releaseBody(ctx, bb)
		s.failBody(ctx, errBodyLarge)
		return nil, false
	}
	bb.b = b
	ctx.Request.SetBodyRaw(b)
	return bb, true
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
	bb.b = bb.b[:0]
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
