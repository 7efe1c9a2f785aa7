package fastpath

import (
	"errors"
	"math/rand/v2"
	"unicode/utf8"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

const (
	headerRequestID    = "X-Request-Id"
	headerRoutedWorker = "X-Smg-Routed-Worker-Id"
	// maxRoutingKeyLen bounds routing-key header values (spec: at most 128 bytes).
	maxRoutingKeyLen = 128
)

// workerTarget is where a leg of the request goes: worker w, with the gateway's request
// id, hop list and trace context, and body instead of the client's when set.
func (le *loopExchange) workerTarget(w *worker.Worker, body []byte) evloop.Target {
	t := evloop.Target{Addr: w.Host, TLS: w.TLSConfig(), Auth: w.AuthHeader(), RequestID: le.reqID, HeaderName: headerHop, HeaderValue: le.hops, Body: body}
	le.trace.apply(&t)
	return t
}

// maxPooledPDBody bounds the PD body buffers a loop exchange keeps between requests.
const maxPooledPDBody = 1 << 20

// requestIDPrefixes are the spec product's prefixes for generated request ids, by route.
var requestIDPrefixes = [...]string{routeChat: "chatcmpl-", routeCompletions: "cmpl-", routeGenerate: "gnt-",
	routeEmbeddings: "embd-", routeRerank: "rerank-", routeRerankNative: "rerank-", routeClassify: "classify-",
	routeTokenize: "tok-", routeDetokenize: "detok-", routeResponses: "resp_", routeMessages: "msg_"}

// fillRequest builds the policy's view of the request from its extracted fields and r's
// headers.
func (s *Server) fillRequest(r *evloop.Request, le *loopExchange) {
	req := &le.req
	req.Model = le.fields.Model
	req.Text = le.fields.Text
	req.Rid = le.fields.Rid
	req.Tokens = le.fields.InputIDs
	if v := r.Peek(DefaultRoutingTokensHeader); len(v) > 0 {
		if toks, ok := parseRoutingTokens(le.routingTokens[:0], v); ok {
			le.routingTokens = toks
			req.Tokens = toks
		}
	}
	for _, name := range s.cfg.RoutingKeyHeaders {
		if v := r.Peek(name); validRoutingKey(v) {
			req.RoutingKey = v
			break
		}
	}
	if req.RoutingKey == nil {
		if v := r.Peek(DefaultRoutingKeyHeader); validRoutingKey(v) {
			req.RoutingKey = v
		}
	}
	req.TargetWorker = r.Peek(DefaultTargetWorkerHeader)
	req.Authorization = r.Peek("Authorization")
	req.ForwardedFor = r.Peek("X-Forwarded-For")
	req.Cookie = r.Peek("Cookie")
	req.Exclude = le.exclude[:0]
}

// validRoutingKey applies the spec's rule: non-empty UTF-8 of at most 128 bytes.
func validRoutingKey(v []byte) bool {
	return len(v) > 0 && len(v) <= maxRoutingKeyLen && utf8.Valid(v)
}

// logDecision logs a routing decision at debug level (spec: Observability).
func (s *Server) logDecision(rt *policy.Route, w *worker.Worker, req *policy.Request) {
	if s.logDecisions {
		s.log.Debug("Routing decision", "policy", rt.Policy, "model", string(req.Model), "worker_type", w.Type(), "worker", w.URL)
	}
}

// errRetryableStatus marks an attempt whose worker answered with a retryable status; the
// answer is held by the exchange (evloop.Exchange.HeldStatus).
var errRetryableStatus = errors.New("retryable upstream status")

// appendRequestID appends 24 random base-62 characters, as the spec product's ids have.
func appendRequestID(b []byte) []byte {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for i := 0; i < 24; {
		r := rand.Uint64()
		for j := 0; j < 10 && i < 24; j++ { // 10 draws of 6 bits per 64-bit word
			c := r & 63
			r >>= 6
			if c < 62 {
				b = append(b, alphabet[c])
				i++
			}
		}
	}
	return b
}

// parseRoutingTokens parses the x-smg-routing-tokens header: token ids separated by commas
// or spaces, optionally inside brackets ("1,2,3" or "[1, 2, 3]"). ok is false for anything
// else; the header is then ignored.
func parseRoutingTokens(dst []uint32, v []byte) ([]uint32, bool) {
	if len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']' {
		v = v[1 : len(v)-1]
	}
	var n uint64
	digits := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && v[i] >= '0' && v[i] <= '9' {
			n = n*10 + uint64(v[i]-'0')
			digits++
			if n > 1<<32-1 || digits > 10 {
				return dst, false
			}
			continue
		}
		if i < len(v) && v[i] != ',' && v[i] != ' ' {
			return dst, false
		}
		if digits > 0 {
			dst = append(dst, uint32(n))
		} else if i < len(v) && v[i] == ',' {
			return dst, false // empty element
		}
		n, digits = 0, 0
	}
	return dst, len(dst) > 0
}
