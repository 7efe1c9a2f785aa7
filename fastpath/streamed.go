package fastpath

import (
	"sync"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/jsonscan"
)

// Streamed request bodies (--max-buffered-request-bytes, spec: load balancing, "Hash Key").
// A generation request whose body is larger than the limit is not read whole: the event loops
// read its head (the limit's worth) and forward the request with that head and then the rest
// of the client's body as it arrives, the client read only as fast as the worker takes the
// body (fastpath/evloop/stream.go), so that the gateway holds at most the head and one buffer
// of it whatever its size, to plain and TLS workers alike. Nothing of it is parsed but the
// head's last top-level "model" (last wins, as for buffered bodies), to choose the model's
// workers: the policy picks without the routing text (prefix_hash and consistent_hashing fall
// back on the routing-key header or the least-loaded worker, cache_aware and the others pick
// as for a request without text), and the answer is relayed as it arrives, whatever it is.
// The request is sent once: its body cannot be replayed, so it is never retried. In PD mode,
// which rewrites bodies, the body is read whole.

var scanStacks = sync.Pool{New: func() any { return new(jsonscan.Stack) }}

// streamedFields sets what routing knows of a request whose body's head alone was read: its
// model, if the head names it, and that its answer is relayed as it arrives (the body was not
// read for "stream"). It returns false when the head's "model" is neither a string nor null,
// which a buffered body's extraction refuses too.
func (le *loopExchange) streamedFields(head []byte) bool {
	m, ok := headModel(head)
	le.fields.Model = m
	le.fields.Stream = true
	return ok
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

// headModel returns the top-level "model" of the JSON object whose first bytes are head, by
// the rule of buffered bodies, the last occurrence wins (fastpath/extract): the last "model"
// member among those head holds whole, nil when that one is null, a string with escapes (not
// decoded here) or cut by the end of head, or when head names none; the request then goes to
// the route of requests naming no model. ok is false when that last "model" is neither a
// string nor null (400, as a buffered body). A "model" past the head cannot be seen: such a
// body is routed by the head's (docs/compatibility.md, --max-buffered-request-bytes).
func headModel(head []byte) (model []byte, ok bool) {
	st := scanStacks.Get().(*jsonscan.Stack)
	defer scanStacks.Put(st)
	c, i := jsonscan.Peek(head, 0)
	if c != '{' {
		return nil, true
	}
	for i++; ; i++ {
		if c, i = jsonscan.Peek(head, i); c != '"' {
			return model, true // the object ends, or the head does
		}
		end, escaped, k := jsonscan.String(head, i)
		if k != jsonscan.OK {
			return model, true // a name cut by the end of head: not "model" as far as head shows
		}
		name := head[i+1 : end-1]
		if c, i = jsonscan.Peek(head, end); c != ':' {
			return model, true
		}
		if !escaped && string(name) == "model" {
			model = nil // replaced by this member, whatever it holds
			c, j := jsonscan.Peek(head, i+1)
			switch c {
			case '"':
				vend, vescaped, k := jsonscan.String(head, j)
				if k != jsonscan.OK {
					return nil, true // cut by the end of head: unknown
				}
				if !vescaped {
					model = head[j+1 : vend-1]
				}
			case 'n':
			case 0:
				return nil, true // the value is past the head
			default:
				return nil, false
			}
		}
		if i, k = jsonscan.SkipValue(head, i+1, 1, st); k != jsonscan.OK {
			return model, true // cut by the end of head, or malformed: the worker will say
		}
		if c, i = jsonscan.Peek(head, i); c != ',' {
			return model, true
		}
	}
}
