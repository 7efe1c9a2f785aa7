package fastpath

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/jsonscan"
)

// Streamed request bodies (--max-buffered-request-bytes, spec: load balancing, "Hash Key").
// A generation request whose body is larger than the limit is not read whole: readBody reads
// its head (the limit's worth), and the request is forwarded with that head and then the rest
// of the client's body stream, copied to the worker as it arrives, so that the gateway holds
// at most the head and one copy buffer of it whatever its size. Nothing of it is parsed but
// the head's top-level "model", to choose the model's workers: the policy picks without the
// routing text (prefix_hash and consistent_hashing fall back on the routing-key header or the
// least-loaded worker, cache_aware and the others pick as for a request without text), and
// the answer is relayed as it arrives, whatever it is. The request is sent once: its body
// cannot be replayed, so it is never retried. In PD mode, which rewrites bodies, the body
// is read whole as before. The event loops do the same with their own reader
// (fastpath/evloop/stream.go: the client is read only as fast as the worker takes the body),
// to plain and TLS workers alike.

// streamCopyBuffer is the size of the buffer a streamed body is copied through.
const streamCopyBuffer = 64 << 10

var (
	copyBuffers = sync.Pool{New: func() any { b := make([]byte, streamCopyBuffer); return &b }}
	scanStacks  = sync.Pool{New: func() any { return new(jsonscan.Stack) }}
)

// errClientBody wraps a failure to read the rest of a streamed body from the client (it left,
// it stalled past the read timeout, its chunked encoding broke): the client's fault, not the
// worker's.
var errClientBody = errors.New("cannot read the rest of the request body from the client")

// writeClientBodyError answers a request whose streamed body could not be read (err wraps
// errClientBody) as the event loops do: 408 when it stopped arriving for --read-timeout, 400
// otherwise (its chunked encoding broke, or it ended early). Without it the handler would
// return nothing written, and fasthttp would answer 200 with an empty body.
func writeClientBodyError(ctx *fasthttp.RequestCtx, err error) {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		writeError(ctx, errReadTimeout, "timed out reading the request body")
		return
	}
	writeError(ctx, errInvalidRequest, "cannot read the request body: "+err.Error())
}

// prepareStreamed readies x to forward a request whose body's head alone was read.
func (s *Server) prepareStreamed(ctx *fasthttp.RequestCtx, x *exchange, head []byte) {
	x.streamedFields(head)
	x.up.body = head
	x.up.rest = ctx.RequestBodyStream()
	x.up.size = ctx.Request.Header.ContentLength() // -1: chunked, and forwarded chunked
	x.up.limit = s.cfg.MaxPayloadSize
}

// streamedFields sets what routing knows of a request whose body's head alone was read (on
// either data plane): its model, if the head names it, and that its answer is relayed as it
// arrives (the body was not read for "stream").
func (x *exchange) streamedFields(head []byte) {
	x.fields.Model = headModel(head)
	x.fields.Stream = true
}

// streamedOnLoops reports whether the event loops serve a request whose body is past
// --max-buffered-request-bytes before it has arrived (evloop.Config.StreamBody): a
// generation or pass-through POST, outside PD mode. PD and EPD modes rewrite every body for
// each pair they try (bootstrap fields, the encode handshake, kv_transfer_params) and may
// send it again to another pair, so their bodies are read whole and parsed however large,
// bounded by --max-payload-size like any buffered body, as the spec product's PD router
// parses every body to inject its bootstrap fields (TestPDBodyPastTheBufferLimitIsReadWhole).
func (s *Server) streamedOnLoops(r *evloop.Request) bool {
	_, _, ok := generationRoute(r.Path())
	return ok && string(r.Method()) == "POST" && !s.router.Current().PD
}

// headModel returns the top-level "model" of the JSON object whose first bytes are head, when
// it is among the members head holds whole (as clients write it, first); nil otherwise, and
// the request then goes to the route of requests naming no model. A model name with escapes
// is not decoded: nil.
func headModel(head []byte) []byte {
	st := scanStacks.Get().(*jsonscan.Stack)
	defer scanStacks.Put(st)
	c, i := jsonscan.Peek(head, 0)
	if c != '{' {
		return nil
	}
	for i++; ; i++ {
		if c, i = jsonscan.Peek(head, i); c != '"' {
			return nil
		}
		end, escaped, k := jsonscan.String(head, i)
		if k != jsonscan.OK {
			return nil
		}
		name := head[i+1 : end-1]
		if c, i = jsonscan.Peek(head, end); c != ':' {
			return nil
		}
		if !escaped && string(name) == "model" {
			c, j := jsonscan.Peek(head, i+1)
			if c != '"' {
				return nil
			}
			vend, vescaped, k := jsonscan.String(head, j)
			if k != jsonscan.OK || vescaped {
				return nil
			}
			return head[j+1 : vend-1]
		}
		if i, k = jsonscan.SkipValue(head, i+1, 1, st); k != jsonscan.OK {
			return nil
		}
		if c, i = jsonscan.Peek(head, i); c != ',' {
			return nil
		}
	}
}

// copyRest copies the rest of a streamed body from the client to the worker's connection w,
// at most allowed bytes: past them the body is too large (errBodyLarge).
func copyRest(w io.Writer, rest io.Reader, allowed int) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var n int64
	for {
		m, rerr := rest.Read(buf)
		if m > 0 {
			if n += int64(m); n > int64(allowed) {
				return n, errBodyLarge
			}
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
		}
		switch {
		case rerr == io.EOF:
			return n, nil
		case rerr != nil:
			return n, errors.Join(errClientBody, rerr)
		}
	}
}
