package fastpath

import (
	"errors"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/extract"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
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
	fields  extract.Fields
	req     policy.Request
	tokens  []uint32
	reqID   []byte
	exclude [4]*worker.Worker
}

func (s *Server) getExchange() *exchange { return s.exchanges.Get().(*exchange) }

func (s *Server) putExchange(x *exchange) {
	x.req.Reset()
	x.fields.Reset()
	x.tokens = x.tokens[:0]
	x.reqID = x.reqID[:0]
	s.exchanges.Put(x)
}

// requestIDPrefixes are the spec product's prefixes for generated request ids, by route.
var requestIDPrefixes = [...]string{routeChat: "chatcmpl-", routeCompletions: "cmpl-", routeGenerate: "gnt-"}

// generation serves the three generation routes: extract, pick, forward, relay.
func (s *Server) generation(ctx *fasthttp.RequestCtx, route int, er extract.Route) {
	if !ctx.IsPost() {
		s.methodNotAllowed(ctx, route, "POST")
		return
	}
	x := s.getExchange()
	defer s.putExchange(x)

	if err := extract.Extract(ctx.PostBody(), er, &x.fields); err != nil {
		s.fail(ctx, route, errInvalidRequest, err.Error())
		return
	}
	s.fillRequest(ctx, x)

	rt, ok := s.router.Current().Lookup(x.fields.Model)
	if !ok {
		s.fail(ctx, route, errModelNotFound, "model '"+string(x.fields.Model)+"' is not served by any worker; GET /v1/models lists the models")
		return
	}
	res, err := rt.Picker.Pick(&x.req)
	if err != nil {
		s.failPick(ctx, route, err)
		return
	}
	rt.Selections.Inc()

	// The client's request object is forwarded as is: same body bytes, same headers, but
	// the Host, X-Request-Id and the worker's credentials.
	reqID := ctx.Request.Header.Peek(headerRequestID)
	if len(reqID) == 0 {
		x.reqID = appendRequestID(append(x.reqID[:0], requestIDPrefixes[route]...))
		reqID = x.reqID
		ctx.Request.Header.SetBytesV(headerRequestID, reqID)
	}
	clientClose := ctx.Request.Header.ConnectionClose()
	ctx.Request.Header.ResetConnectionClose()

	s.forward(ctx, x, res.Worker, route, reqID)

	if clientClose {
		ctx.SetConnectionClose()
	}
}

// fillRequest builds the policy's view of the request from the extracted fields and headers.
func (s *Server) fillRequest(ctx *fasthttp.RequestCtx, x *exchange) {
	h := &ctx.Request.Header
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

// forward sends the request to w and relays the answer. It owns w's in-flight increment: the
// count falls here for a buffered answer or an upstream error, or in the relay once fasthttp
// has finished with the streamed body; the deferred guard covers a panic in between.
func (s *Server) forward(ctx *fasthttp.RequestCtx, x *exchange, w *worker.Worker, route int, reqID []byte) {
	req := &ctx.Request
	req.SetHost(w.Host)
	if w.Auth != nil {
		req.Header.SetBytesV("Authorization", w.Auth)
	}
	tokens := -1
	if x.req.Tokens != nil {
		tokens = len(x.req.Tokens)
	}
	w.NoteDispatch(tokens)
	w.InFlight.Add(1)
	settled := false
	defer func() {
		if !settled {
			w.InFlight.Add(-1)
		}
	}()
	deadline := time.Now().Add(s.cfg.RequestTimeout)

	if !x.fields.Stream {
		err := w.Client.DoDeadline(req, &ctx.Response, deadline)
		settled = true
		w.InFlight.Add(-1)
		if err != nil {
			w.Upstream[worker.OutcomeError].Inc()
			s.failUpstream(ctx, route, w, err)
			return
		}
		w.Upstream[worker.OutcomeOf(ctx.Response.StatusCode())].Inc()
		s.finishHeaders(ctx, w, reqID)
		s.m.observe(route, ctx.Response.StatusCode(), ctx.Time())
		return
	}

	rl := s.relays.Get().(*relay)
	rl.resp.StreamBody = true
	if err := w.Client.DoDeadline(req, &rl.resp, deadline); err != nil {
		settled = true
		w.InFlight.Add(-1)
		w.Upstream[worker.OutcomeError].Inc()
		s.recycleRelay(rl)
		s.failUpstream(ctx, route, w, err)
		return
	}
	rl.s, rl.w, rl.route, rl.start = s, w, route, ctx.Time()
	rl.resp.Header.CopyTo(&ctx.Response.Header)
	s.finishHeaders(ctx, w, reqID)
	ctx.Response.SetBodyStream(rl, rl.resp.Header.ContentLength())
	settled = true // fasthttp owns the relay now and will close it exactly once
}

// finishHeaders adds the gateway's response headers and drops the upstream's hop-by-hop ones.
func (s *Server) finishHeaders(ctx *fasthttp.RequestCtx, w *worker.Worker, reqID []byte) {
	h := &ctx.Response.Header
	h.ResetConnectionClose()
	h.SetBytesV(headerRoutedWorker, w.URLBytes())
	h.SetBytesV(headerRequestID, reqID)
}

// relay is the body stream of a streamed answer: it reads the upstream body and, when
// fasthttp closes it, releases the upstream connection and the worker's in-flight count.
type relay struct {
	s     *Server
	w     *worker.Worker
	resp  fasthttp.Response
	route int
	start time.Time
}

// Read implements io.Reader over the upstream body.
func (rl *relay) Read(p []byte) (int, error) { return rl.resp.BodyStream().Read(p) }

// CloseWithError implements fasthttp.ReadCloserWithError: fasthttp calls it exactly once when
// the body has been written, when writing it failed (the client went away: err != nil), or
// when the response is reset unwritten.
func (rl *relay) CloseWithError(err error) error {
	s, w, status := rl.s, rl.w, rl.resp.StatusCode()
	// Closing an unfinished upstream body closes its connection: the engine sees the request
	// cancelled instead of generating for nobody.
	_ = rl.resp.CloseBodyStream()
	w.InFlight.Add(-1)
	if err != nil {
		w.Upstream[worker.OutcomeError].Inc()
	} else {
		w.Upstream[worker.OutcomeOf(status)].Inc()
	}
	s.m.observe(rl.route, status, rl.start)
	s.recycleRelay(rl)
	return nil
}

func (s *Server) recycleRelay(rl *relay) {
	_ = rl.resp.CloseBodyStream()
	rl.resp.Reset()
	rl.s, rl.w = nil, nil
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
