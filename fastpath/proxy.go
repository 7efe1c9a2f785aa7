package fastpath

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/extract"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

const (
	headerRequestID    = "X-Request-Id"
	headerRoutedWorker = "X-Smg-Routed-Worker-Id"
	// maxRoutingKeyLen bounds routing-key header values (spec: at most 128 bytes).
	maxRoutingKeyLen = 128
)

// exchange is the per-request scratch state of a generation request, pooled so that the hot
// path does not allocate. It is owned by one handler invocation.
type exchange struct {
	attempt attempt
	fields  extract.Fields
	req     policy.Request
	tokens  []uint32
	reqID   []byte
	hops    []byte // X-SMG-Hop with this gateway added, when the request had one
	up      upstreamBody
	exclude [4]*worker.Worker
	// pdBody is the buffer of PD body rewrites, sent as x.up's body.
	pdBody []byte
}

// maxPooledPDBody bounds the PD body buffer an exchange keeps between requests.
const maxPooledPDBody = 1 << 20

func (s *Server) getExchange() *exchange { return s.exchanges.Get().(*exchange) }

func (s *Server) putExchange(x *exchange) {
	x.req.Reset()
	x.fields.Reset()
	x.tokens = x.tokens[:0]
	x.reqID = x.reqID[:0]
	x.hops = x.hops[:0]
	x.up = upstreamBody{}
	if cap(x.pdBody) > maxPooledPDBody {
		x.pdBody = nil
	}
	x.pdBody = x.pdBody[:0]
	s.exchanges.Put(x)
}

// requestIDPrefixes are the spec product's prefixes for generated request ids, by route.
var requestIDPrefixes = [...]string{routeChat: "chatcmpl-", routeCompletions: "cmpl-", routeGenerate: "gnt-",
	routeEmbeddings: "embd-", routeRerank: "rerank-", routeRerankNative: "rerank-", routeClassify: "classify-",
	routeTokenize: "tok-", routeDetokenize: "detok-", routeResponses: "resp_", routeMessages: "msg_"}

// generation serves the generation routes and the engine pass-through routes: extract,
// pick, forward, relay.
func (s *Server) generation(ctx *fasthttp.RequestCtx, body *bodyBuf, route int, er extract.Route) {
	if !ctx.IsPost() {
		s.methodNotAllowed(ctx, route, "POST")
		return
	}
	x := s.getExchange()
	defer s.putExchange(x)
	if !s.checkHop(ctx, x, route) {
		return
	}

	tab := s.router.Current()
	streamed := body != nil && body.partial
	if streamed && tab.PD {
		// PD rewrites the body (bootstrap fields): it must be read whole.
		if !s.readRest(ctx, body) {
			return
		}
		streamed = false
	}
	if streamed {
		s.prepareStreamed(ctx, x, body.b)
	} else {
		x.up.body = ctx.PostBody()
		if err := extract.Extract(x.up.body, er, &x.fields); err != nil {
			s.fail(ctx, route, errInvalidRequest, err.Error())
			return
		}
	}
	s.fillRequest(&ctx.Request.Header, x)

	if tab.PD && passThrough(route) {
		s.fail(ctx, route, errPassThroughPD, string(ctx.Path())+" is not served in PD mode (--pd-disaggregation): prefill and decode workers only take generation requests with a KV handover")
		return
	}
	var rt, prefill *policy.Route
	var ok bool
	if tab.PD {
		prefill, rt, ok = lookupPD(tab, x.fields.Model)
	} else {
		rt, ok = tab.Lookup(x.fields.Model)
	}
	if !ok {
		s.fail(ctx, route, errModelNotFound, "model '"+string(x.fields.Model)+"' is not served by any worker; GET /v1/models lists the models")
		return
	}
	if e, ok := x.attempt.begin(s, &x.req); !ok {
		s.fail(ctx, route, e, "the gateway is at --max-concurrent-requests or --rate-limit-tokens-per-second; retry later")
		return
	}
	// Whatever way the request ends (an answer, an error, a panic), what its attempt still
	// holds is released here.
	defer x.attempt.end()
	x.attempt.once = streamed // the body streams past: it cannot be sent twice

	// The client's request object is forwarded as is: same body bytes, same headers, but
	// the Host, X-Request-Id and the worker's credentials (and in PD mode the handover
	// fields).
	reqID := ctx.Request.Header.Peek(headerRequestID)
	if len(reqID) == 0 {
		x.reqID = appendRequestID(append(x.reqID[:0], requestIDPrefixes[route]...))
		reqID = x.reqID
		ctx.Request.Header.SetBytesV(headerRequestID, reqID)
	}
	clientClose := ctx.Request.Header.ConnectionClose()
	ctx.Request.Header.ResetConnectionClose()

	switch {
	case tab.EPD:
		s.dispatchEPD(ctx, x, lookupEncode(tab, x.fields.Model), prefill, rt, route, reqID)
	case tab.PD:
		s.dispatchPD(ctx, x, prefill, rt, route, reqID)
	default:
		s.dispatch(ctx, x, rt, route, reqID)
	}

	if clientClose {
		ctx.SetConnectionClose()
	}
}

// headerSource reads a request header: fasthttp's request header, or an event loop's request.
type headerSource interface{ Peek(key string) []byte }

// fillRequest builds the policy's view of the request from the extracted fields and headers.
func (s *Server) fillRequest(h headerSource, x *exchange) {
	r := &x.req
	r.Model = x.fields.Model
	r.Text = x.fields.Text
	r.Rid = x.fields.Rid
	r.Tokens = x.fields.InputIDs
	if v := h.Peek(DefaultRoutingTokensHeader); len(v) > 0 {
		if toks, ok := parseRoutingTokens(x.tokens[:0], v); ok {
			x.tokens = toks
			r.Tokens = toks
		}
	}
	for _, name := range s.cfg.RoutingKeyHeaders {
		if v := h.Peek(name); validRoutingKey(v) {
			r.RoutingKey = v
			break
		}
	}
	if r.RoutingKey == nil {
		if v := h.Peek(DefaultRoutingKeyHeader); validRoutingKey(v) {
			r.RoutingKey = v
		}
	}
	r.TargetWorker = h.Peek(DefaultTargetWorkerHeader)
	r.Authorization = h.Peek("Authorization")
	r.ForwardedFor = h.Peek("X-Forwarded-For")
	r.Cookie = h.Peek("Cookie")
	r.Exclude = x.exclude[:0]
}

// validRoutingKey applies the spec's rule: non-empty UTF-8 of at most 128 bytes.
func validRoutingKey(v []byte) bool {
	return len(v) > 0 && len(v) <= maxRoutingKeyLen && utf8.Valid(v)
}

// dispatch picks a worker on rt and sends it the request and, while nothing has reached the
// client yet, retries a failed attempt on another worker, re-picked with the failed ones
// excluded, until it succeeds, the retries run out or the request's deadline would pass.
func (s *Server) dispatch(ctx *fasthttp.RequestCtx, x *exchange, rt *policy.Route, route int, reqID []byte) {
	a := &x.attempt
	if err := a.pick(rt, &a.main); err != nil {
		s.failPick(ctx, route, err)
		return
	}
	for {
		w := a.main.w
		err := s.forward(ctx, x, route, reqID)
		if err == nil {
			a.served(rt, w)
			return
		}
		if errors.Is(err, errClientLeft) {
			return
		}
		// The attempt failed before the client saw a byte: try another worker, if the budget,
		// the deadline, the client and the route table allow.
		if wait, ok := a.retry(w, time.Now()); ok && pause(ctx, wait) {
			if r, ok := s.router.Current().Lookup(x.fields.Model); ok && a.pick(r, &a.main) == nil {
				s.log.Debug("Retrying on another worker", "failed", w.URL, "next", a.main.w.URL, "attempt", a.failures+1, "error", err)
				rt = r
				continue
			}
		}
		// Nobody left to try, or no time, or no client: answer with this attempt's failure.
		s.deliverFailure(ctx, route, w, err, reqID)
		return
	}
}

// logDecision logs a routing decision at debug level (spec: Observability).
func (s *Server) logDecision(rt *policy.Route, w *worker.Worker, req *policy.Request) {
	if s.logDecisions {
		s.log.Debug("Routing decision", "policy", rt.Policy, "model", string(req.Model), "worker_type", w.Type(), "worker", w.URL)
	}
}

// errRetryableStatus marks an attempt whose worker answered with a retryable status; the
// answer is in ctx.Response.
var errRetryableStatus = errors.New("retryable upstream status")

// forward sends the request to the attempt's picked worker (a.main) and settles that leg. It
// returns nil when the answer is delivered (or handed to fasthttp to stream), or the reason
// it failed before the client saw a byte: a transport error (ctx.Response untouched) or
// errRetryableStatus (the worker's whole answer in ctx.Response). On the last attempt a
// retryable status is delivered as is.
//
// The leg's in-flight hold is released here for a buffered answer or a failure, or by the
// relay once fasthttp has finished with the streamed body; the attempt's end covers a panic
// in between.
func (s *Server) forward(ctx *fasthttp.RequestCtx, x *exchange, route int, reqID []byte) error {
	a := &x.attempt
	w := a.main.w
	req := &ctx.Request
	w.Address(req)
	if auth := w.AuthHeader(); auth != nil {
		req.Header.SetBytesV("Authorization", auth)
	}
	now := time.Now()
	deadline := a.tryDeadline(x.fields.Stream, now)
	if fbt := s.cfg.FirstByteTimeout; fbt > 0 && now.Add(fbt).Before(deadline) {
		deadline = now.Add(fbt)
	}
	a.dispatch(&a.main)

	if !x.fields.Stream {
		sendWatched(ctx, x, &ctx.Response)
		err := worker.Cause(&ctx.Response, w.Client.DoDeadline(req, &ctx.Response, deadline))
		return s.answered(ctx, a, route, reqID, ctx.Response.StatusCode(), err)
	}

	a.awaitFirstToken(&a.main)
	rl := s.relays.Get().(*relay)
	rl.resp.StreamBody = true
	sendWatched(ctx, x, &rl.resp)
	err := worker.Cause(&rl.resp, w.Client.DoDeadline(req, &rl.resp, deadline))
	status := rl.resp.StatusCode()
	if err == nil && status < 300 {
		if deadline != a.deadline {
			// The first-byte timeout bounded the wait for the headers; the body may take
			// what is left of the request's time.
			worker.ExtendReadDeadline(&rl.resp, a.deadline)
		}
		rl.s, rl.leg, rl.route, rl.start = s, a.handOff(), route, ctx.Time()
		rl.resp.Header.CopyTo(&ctx.Response.Header)
		s.finishHeaders(ctx, w, reqID)
		// fasthttp owns the relay now and will close it exactly once.
		ctx.Response.SetBodyStream(rl, rl.resp.Header.ContentLength())
		return nil
	}
	if err == nil {
		// An error answer to a stream is small and not an event stream: take it whole, so that
		// it can be retried elsewhere or delivered like a buffered answer.
		err = s.bufferErrorAnswer(ctx, rl)
	}
	s.recycleRelay(rl)
	return s.answered(ctx, a, route, reqID, status, err)
}

// answered settles the attempt's main leg with its worker's answer (status, in ctx.Response,
// or the transport error err) and delivers it, unless it is worth another worker.
func (s *Server) answered(ctx *fasthttp.RequestCtx, a *attempt, route int, reqID []byte, status int, err error) error {
	w := a.main.w
	if errors.Is(err, worker.ErrClientLeft) || errors.Is(err, errClientBody) {
		a.main.abandon() // not the worker's fault
		ctx.SetConnectionClose()
		if errors.Is(err, errClientBody) { // it may still be there: say why (a client gone misses nothing)
			writeClientBodyError(ctx, err)
		}
		return errClientLeft
	}
	if errors.Is(err, worker.ErrCancelled) {
		a.main.abandon() // the request gave the worker up (PD: its prefill failed)
		return err
	}
	a.main.settle(status, err)
	if a.retryable(status, err) {
		if err == nil {
			err = errRetryableStatus
		}
		return err
	}
	s.deliver(ctx, route, w, reqID)
	return nil
}

// maxErrorAnswer bounds how much of an error answer to a stream the gateway buffers.
const maxErrorAnswer = 1 << 20

// bufferErrorAnswer copies a streamed error answer (status and body) into ctx.Response.
func (s *Server) bufferErrorAnswer(ctx *fasthttp.RequestCtx, rl *relay) error {
	rl.resp.Header.CopyTo(&ctx.Response.Header)
	ctx.Response.ResetBody()
	_, err := io.Copy(ctx.Response.BodyWriter(), io.LimitReader(rl.resp.BodyStream(), maxErrorAnswer))
	return err
}

// deliverFailure answers for the last failed attempt: the worker's own error answer if it gave
// one, else the gateway's envelope for the transport error.
func (s *Server) deliverFailure(ctx *fasthttp.RequestCtx, route int, w *worker.Worker, err error, reqID []byte) {
	if errors.Is(err, errRetryableStatus) {
		s.deliver(ctx, route, w, reqID)
		return
	}
	s.failUpstream(ctx, route, w, err)
}

// deliver sends the worker w's answer in ctx.Response with the gateway's headers, and
// counts it.
func (s *Server) deliver(ctx *fasthttp.RequestCtx, route int, w *worker.Worker, reqID []byte) {
	s.finishHeaders(ctx, w, reqID)
	s.m.observe(route, ctx.Response.StatusCode(), ctx.Time())
}

// finishHeaders adds the gateway's response headers and drops the upstream's hop-by-hop ones.
func (s *Server) finishHeaders(ctx *fasthttp.RequestCtx, w *worker.Worker, reqID []byte) {
	h := &ctx.Response.Header
	h.ResetConnectionClose()
	h.SetBytesV(headerRoutedWorker, w.URLBytes())
	h.SetBytesV(headerRequestID, reqID)
}

// relay is the body stream of a streamed answer: it reads the upstream body and, when
// fasthttp closes it, releases the upstream connection and the attempt's handed-off leg (the
// worker's in-flight count, its breaker permit, the request's admission slot).
type relay struct {
	s   *Server
	leg leg
	// upstreamFailed is set when reading the worker's body failed: the stream broke on the
	// worker's side, which is a fault, unlike a client that went away. tail then holds the
	// error event still to send, and lastTwo the last bytes relayed before it.
	upstreamFailed bool
	tail           []byte
	lastTwo        [2]byte
	resp           fasthttp.Response
	route          int
	start          time.Time
}

// Read implements io.Reader over the upstream body.
func (rl *relay) Read(p []byte) (int, error) {
	if rl.upstreamFailed {
		return rl.readTail(p)
	}
	n, err := rl.resp.BodyStream().Read(p)
	if n > 0 {
		rl.leg.firstToken()
	}
	if n >= 2 {
		rl.lastTwo = [2]byte{p[n-2], p[n-1]}
	} else if n == 1 {
		rl.lastTwo = [2]byte{rl.lastTwo[1], p[0]}
	}
	if err == nil || err == io.EOF {
		return n, err
	}
	// The worker's stream broke (it died, reset, or the deadline passed). Instead of cutting
	// the client's connection mid-body, end the stream cleanly with an SSE error event, so the
	// client learns why its answer stops and no client hangs on a half-closed stream.
	rl.upstreamFailed = true
	rl.tail = rl.tail[:0]
	if rl.lastTwo != [2]byte{'\n', '\n'} {
		rl.tail = append(rl.tail, "\n\n"...) // terminate the event the worker left unfinished
	}
	rl.tail = append(rl.tail, `data: {"error":{"message":"the worker's stream broke before the answer was complete","type":"server_error","code":"worker_stream_failed","param":null}}`+"\n\ndata: [DONE]\n\n"...)
	if n > 0 {
		return n, nil
	}
	return rl.readTail(p)
}

// readTail hands out the closing error event, then EOF.
func (rl *relay) readTail(p []byte) (int, error) {
	if len(rl.tail) == 0 {
		return 0, io.EOF
	}
	n := copy(p, rl.tail)
	rl.tail = rl.tail[n:]
	return n, nil
}

// CloseWithError implements fasthttp.ReadCloserWithError: fasthttp calls it exactly once when
// the body has been written, when writing it failed (the client went away: err != nil), or
// when the response is reset unwritten.
func (rl *relay) CloseWithError(err error) error {
	s, status := rl.s, rl.resp.StatusCode()
	// Closing an unfinished upstream body closes its connection: the engine sees the request
	// cancelled instead of generating for nobody.
	_ = rl.resp.CloseBodyStream()
	o, u := breaker.Classify(status, false), worker.OutcomeOf(status)
	switch {
	case rl.upstreamFailed:
		o = breaker.Fault
	case err != nil:
		o = breaker.Abandoned
	}
	if err != nil {
		u = worker.OutcomeError
	}
	rl.leg.end(o, u)
	s.m.observe(rl.route, status, rl.start)
	s.recycleRelay(rl)
	return nil
}

func (s *Server) recycleRelay(rl *relay) {
	_ = rl.resp.CloseBodyStream()
	rl.resp.Reset()
	rl.s, rl.leg, rl.upstreamFailed, rl.tail, rl.lastTwo = nil, leg{}, false, rl.tail[:0], [2]byte{}
	s.relays.Put(rl)
}

// fail answers a gateway-made error and counts it.
func (s *Server) fail(ctx *fasthttp.RequestCtx, route int, e apiError, msg string) {
	writeError(ctx, e, msg)
	s.m.observe(route, e.status, ctx.Time())
}

func (s *Server) failPick(ctx *fasthttp.RequestCtx, route int, err error) {
	switch {
	case errors.Is(err, policy.ErrInvalidTargetWorker):
		s.fail(ctx, route, errTargetWorker, err.Error())
	case errors.Is(err, policy.ErrNoAvailableWorkers):
		s.fail(ctx, route, errNoWorkers, "no available workers for this request; all workers are unhealthy, draining or gone")
	default:
		s.fail(ctx, route, errNoWorkers, err.Error())
	}
}

func (s *Server) failUpstream(ctx *fasthttp.RequestCtx, route int, w *worker.Worker, err error) {
	s.log.Debug("Upstream request failed", "worker", w.URL, "error", err)
	if errors.Is(err, errBodyLarge) { // a streamed chunked body ran past the limit
		ctx.SetConnectionClose()
		s.fail(ctx, route, errPayloadTooLarge, fmt.Sprintf("request body exceeds --max-payload-size (%d bytes)", s.cfg.MaxPayloadSize))
		return
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() && !errors.Is(err, fasthttp.ErrDialTimeout) {
		s.fail(ctx, route, errUpstreamTimeout, "worker "+w.URL+" did not answer within --request-timeout-secs")
		return
	}
	s.fail(ctx, route, errUpstreamUnreachable, "worker "+w.URL+" is unreachable: "+err.Error())
}

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
