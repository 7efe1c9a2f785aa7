package fastpath

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/disagg"
	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/fastpath/extract"
	"github.com/smg-go/smg/internal/http1"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// loopPlane is the gateway's evloop.Handler (and the CallHandler of PD prefill calls).
// Generation and pass-through requests run on the loop, PD and EPD included, to plain and
// TLS workers alike (evloop/tls.go), with no goroutine and no allocation in steady state
// (a request waiting for admission parks on its loop; a body past
// --max-buffered-request-bytes streams through it; crypto/tls allocates once per record a
// TLS worker's answer takes); every other request (the worker API, probes, /v1/models, the
// admin routes) is bridged: detached to a goroutine that runs the fasthttp handler and
// streams its answer back through the loop.
type loopPlane struct{ s *Server }

// startLoops builds the event-loop server.
func (s *Server) startLoops() (*evloop.Server, error) {
	cfg := evloop.DefaultConfig()
	cfg.Loops = s.cfg.EventLoops
	cfg.MaxBodySize, cfg.MaxHeaderSize = s.cfg.MaxPayloadSize, s.cfg.MaxHeaderSize
	cfg.Reserve, cfg.Release = s.bodies.reserve, s.bodies.release
	cfg.MaxHeldBody, cfg.HeldReserve, cfg.HeldRelease = s.cfg.MaxAnswerSize, s.answers.reserve, s.answers.release
	cfg.ReadTimeout, cfg.IdleTimeout = s.cfg.ReadTimeout, s.cfg.IdleTimeout
	cfg.MaxConns, cfg.UpstreamMaxConns = s.cfg.MaxConnections, s.cfg.MaxConnsPerWorker
	cfg.StreamFailureTail = []byte(streamFailureEvent)
	cfg.StreamBodyOver, cfg.StreamBody = s.cfg.MaxBufferedBody, s.streamedOnLoops
	cfg.Handler, cfg.ResolveAddr, cfg.Clock = loopPlane{s}, s.resolveUpstream, s.clock
	cfg.OnPanic = func(p any) {
		s.log.Error("Panic while serving a request", "panic", p, "stack", string(debug.Stack()))
	}
	return evloop.New(cfg)
}

// streamFailureEvent ends a stream whose worker broke mid-answer: the client learns why its
// answer stops instead of hanging on a half-closed stream.
const streamFailureEvent = `data: {"error":{"message":"the worker's stream broke before the answer was complete","type":"server_error","code":"worker_stream_failed","param":null}}` + "\n\ndata: [DONE]\n\n"

// loopExchange is a generation request on the loop, its one owner: what was read of it
// (fields, the policy's request, ids and hops), its attempt (admission, picks, in-flight
// holds, breaker permits, the retry budget), where it is (route, park, retry pause) and, in
// pd, its PD and EPD legs. It lives in evloop.Exchange.User, reused from request to request
// so that the hot path does not allocate; the loop of the client's connection is the only
// goroutine that touches it. finish ends all of it; only a PD prefill or EPD encode call
// still running may outlive the request, its leg then owned by its evloop.Call
// (loopPrefill).
type loopExchange struct {
	s             *Server
	ex            *evloop.Exchange // the exchange whose User this is (fixed: both are reused together)
	attempt       attempt
	fields        extract.Fields
	req           policy.Request
	routingTokens []uint32          // the ids of the routing tokens header
	reqID         []byte            // the request id sent to the workers and the client
	hops          []byte            // X-SMG-Hop with this gateway added
	exclude       [4]*worker.Worker // the first excluded workers' room (req.Exclude)
	trace         traceState        // the W3C trace context, with tracing on
	route         int
	rt            *policy.Route
	begun         bool // the request was admitted (attempt.start ran): end must run exactly once
	start         time.Time
	target        evloop.Target
	lastErr       error
	failed        *worker.Worker // the worker of the last failed attempt, while a retry pauses
	body          []byte         // error envelopes
	// parked is set while the request waits in the admission queue as waiter.
	parked bool
	waiter parkedWaiter
	// tel gathers the request's telemetry record (telemetry.go).
	tel requestTelemetry
	// tokens is set while the request waits for its token ids (eventtokens.go).
	tokens *tokenJob
	pd     pdLegs
}

func (p loopPlane) Serve(ex *evloop.Exchange) {
	s := p.s
	r := ex.Req()
	route, er, ok := generationRoute(r.Path())
	if !ok || string(r.Method()) != "POST" {
		p.bridge(ex)
		return
	}
	le, _ := ex.User.(*loopExchange)
	if le == nil {
		le = &loopExchange{s: s, ex: ex}
		ex.User = le
	}
	le.start, le.route = ex.Now(), route
	le.beginRecord(ex)
	if s.cfg.Trace.Enable {
		le.trace.begin(r.Peek(headerTraceParent), s.traceRatio)
	}
	if !le.checkHop(ex) {
		return
	}
	if ex.Streamed() {
		if !le.streamedFields(r.Body()) {
			le.fail(ex, errInvalidRequest, `"model" must be a string or null`)
			return
		}
	} else if err := extract.Extract(r.Body(), er, &le.fields); err != nil {
		le.fail(ex, errInvalidRequest, err.Error())
		return
	}
	s.fillRequest(r, le)
	tab := s.router.Current()
	if tab.PD && passThrough(route) {
		le.fail(ex, errPassThroughPD, string(r.Path())+" is not served in PD mode (--pd-disaggregation): prefill and decode workers only take generation requests with a KV handover")
		return
	}
	var rt, prt *policy.Route
	if tab.PD {
		prt, rt, ok = lookupPD(tab, le.fields.Model)
	} else {
		rt, ok = tab.Lookup(le.fields.Model)
	}
	if !ok {
		le.fail(ex, errModelNotFound, "model '"+string(le.fields.Model)+"' is not served by any worker; GET /v1/models lists the models")
		return
	}
	le.rt = rt
	le.pd.begin(tab.PD, prt)
	if tab.EPD && disagg.Multimodal(r.Body()) {
		le.pd.epd.begin(lookupEncode(tab, le.fields.Model))
	}
	switch e, st := le.attempt.beginOrPark(s, &le.req, &le.waiter, ex.Unparker(), ex.Now()); st {
	case admitRefused:
		le.fail(ex, e, "the gateway is at --max-concurrent-requests or --rate-limit-tokens-per-second; retry later")
	case admitParked:
		// It waits in the admission queue on the loop, until release hands it a slot or
		// --queue-timeout-secs passes (Wake), or its client leaves (UpstreamDone).
		le.parked = true
		ex.Park(le, s.adm.timeout)
	default:
		le.admitted(ex)
	}
}

// admitted sends a request that holds its admission slot.
func (le *loopExchange) admitted(ex *evloop.Exchange) {
	le.begun = true
	le.tel.rec.Admitted = ex.Nanos()
	le.attempt.once = ex.Streamed() // the body streams past: it cannot be sent twice
	if le.grpcRoute() {
		le.sendGRPC(ex) // tokenized and picked off the loop (grpcpath.go, grpcpd.go)
		return
	}
	if le.pd.on {
		if le.pd.epd.on { // text-only requests are PD (epd.go)
			le.sendEPD(ex)
			return
		}
		if !le.tokenizeFirst(ex) {
			le.sendPD(ex) // else picked once tokenized (Wake)
		}
		return
	}
	if le.tokenizeFirst(ex) {
		return // picked once tokenized (Wake)
	}
	le.pickAndSend(ex)
}

// pickAndSend picks the request's worker and sends it there.
func (le *loopExchange) pickAndSend(ex *evloop.Exchange) {
	a := &le.attempt
	if err := a.pick(le.rt, &a.main); err != nil {
		le.failPick(ex, err)
		return
	}
	le.send(ex)
}

// unpark ends the admission wait of a parked request (Wake): it is sent if it got a slot,
// else the queue timeout passed.
func (le *loopExchange) unpark(ex *evloop.Exchange) {
	le.parked = false
	if !le.attempt.resume(le.s, &le.req, &le.waiter, ex.Now()) {
		le.fail(ex, errQueueTimeout, "the request waited --queue-timeout-secs in the admission queue (--max-concurrent-requests); retry later")
		return
	}
	le.admitted(ex)
}

// checkHop refuses a request that went through this gateway already (loops.go) and readies
// X-SMG-Hop with the gateway's id.
func (le *loopExchange) checkHop(ex *evloop.Exchange) bool {
	s := le.s
	seen := ex.Req().Header(headerHop)
	switch {
	case len(seen) == 0:
		le.hops = append(le.hops[:0], s.hopID...)
	case len(seen) > maxHopHeader || hopListHas(seen, s.hopID):
		le.fail(ex, errLoop, "the request came back to the gateway that forwarded it (X-SMG-Hop): a worker URL points at a gateway; remove it with DELETE /workers/{id}")
		return false
	default:
		le.hops = append(append(append(le.hops[:0], seen...), ", "...), s.hopID...)
	}
	return true
}

// send forwards the request to the attempt's picked worker.
func (le *loopExchange) send(ex *evloop.Exchange) { le.forwardMain(ex, nil) }

// forwardMain forwards the request to the main leg's worker (the decode worker in PD mode),
// with body instead of the client's when set.
func (le *loopExchange) forwardMain(ex *evloop.Exchange, body []byte) {
	a := &le.attempt
	w := a.main.w
	now := ex.Now()
	deadline := a.tryDeadline(le.fields.Stream, now)
	le.target = le.workerTarget(w, body)
	// --first-byte-timeout-secs bounds a non-streamed answer whole (it starts only when
	// complete) and a stream's head.
	if fbt := le.s.cfg.FirstByteTimeout; fbt > 0 && now.Add(fbt).Before(deadline) {
		if le.fields.Stream {
			le.target.HeadBy = now.Add(fbt)
		} else {
			deadline = now.Add(fbt)
		}
	}
	a.dispatch(&a.main)
	if le.fields.Stream {
		a.main.hold.AwaitFirstToken()
	}
	ex.Forward(le, &le.target, deadline)
}

// KeepWaiting cuts the wait for the head of a worker that worker/stall found unresponsive:
// the attempt fails as a fault and is retried elsewhere.
func (le *loopExchange) KeepWaiting(*evloop.Exchange) bool {
	w := le.attempt.main.w
	return w == nil || w.StallState() != worker.StallUnresponsive
}

// UpstreamHead relays a successful stream as it arrives; any other answer is held whole, so
// that a retryable one can go to another worker.
func (le *loopExchange) UpstreamHead(ex *evloop.Exchange, status int) bool {
	le.attempt.main.firstByte()
	if !le.fields.Stream || status >= 300 {
		return false
	}
	le.addHeaders(ex)
	return true
}

// UpstreamBody implements evloop.BodyWatcher: a piece of a relayed stream arrived, the first
// its first token.
func (le *loopExchange) UpstreamBody(ex *evloop.Exchange, piece []byte) {
	now := ex.Nanos()
	le.attempt.streamPiece(now)
	le.tel.streamPiece(now, piece)
}

func (le *loopExchange) addHeaders(ex *evloop.Exchange) {
	le.answerHeaders(ex, le.attempt.main.w)
}

// answerHeaders sets the gateway's headers of an answer that worker w gave.
func (le *loopExchange) answerHeaders(ex *evloop.Exchange, w *worker.Worker) {
	ex.ResetHeaders()
	ex.AddHeader(headerRoutedWorker, w.URLBytes())
	ex.AddHeader(headerRequestID, le.reqID)
	if le.pd.pw != nil {
		ex.AddHeader(headerPrefillWorker, le.pd.pw.URLBytes())
	}
	if le.pd.epd.w != nil {
		ex.AddHeader(headerEncodeWorker, le.pd.epd.w.URLBytes())
	}
}

// UpstreamDone settles the attempt's leg with the worker's answer and then delivers the
// answer, retries elsewhere or answers the failure.
func (le *loopExchange) UpstreamDone(ex *evloop.Exchange, err error) {
	a := &le.attempt
	switch {
	case isParseError(err): // the client's streamed body failed: its fault, not the worker's
		le.pd.drop(true)
		le.reject(ex, err.(*evloop.ParseError))
	case le.parked: // the client left while the request waited for admission
		le.parked = false
		a.cancelPark(le.s, &le.waiter)
		le.finish(499)
	case errors.Is(err, evloop.ErrClientGone) || errors.Is(err, evloop.ErrShutdown):
		// The client left: the leg still held is abandoned (end); a relayed answer counts
		// as the worker's error class.
		// nginx's "client closed request": no answer was complete, even when a relayed
		// one had begun with the worker's status.
		const status = 499
		if w := a.main.w; w != nil && ex.Relayed() {
			w.Upstream[worker.OutcomeError].Inc()
		}
		le.pd.drop(true) // the engine sees the prefill cancelled too
		le.dropTokens()
		le.finish(status)
	case ex.Relayed():
		w := a.main.w
		if err != nil { // the stream broke on the worker's side: a fault
			a.main.settle(0, err)
			le.failRecord(errStreamFailed, "worker "+w.URL+"'s stream broke before the answer was complete: "+err.Error())
		} else {
			a.streamDone()
			a.main.settle(ex.Status(), nil)
			a.served(le.rt, w)
		}
		le.finish(ex.Status())
	case errors.Is(err, evloop.ErrAnswerMemory):
		// The gateway's own budget, not the worker's fault: no breaker fault, no retry (it
		// would take the same memory elsewhere).
		a.main.abandon()
		le.pd.drop(true)
		le.fail(ex, errAnswerMemory, "the gateway holds too many workers' answers in memory at once (1 GiB by default); retry later")
	default:
		le.heldDone(ex, err)
	}
}

// heldDone settles the main leg with a held answer (or the transport error err) and
// delivers it, waits for its PD prefill, retries elsewhere or answers the failure.
func (le *loopExchange) heldDone(ex *evloop.Exchange, err error) {
	a := &le.attempt
	status := 0
	if err == nil {
		status = ex.HeldStatus()
	}
	w := a.main.w
	a.main.settle(status, err)
	a.answered(status, err, ex.Nanos())
	if le.pd.pf != nil && err == nil && status < 300 {
		// SGLang PD: the decode answer cannot be right without its prefill.
		if !le.pd.pf.done {
			le.pd.awaiting = true
			ex.Await(le)
			return
		}
		if le.pd.pf.failed() {
			le.prefillFailed(ex)
			return
		}
	}
	// The decode answer decides (or there is no PD): a prefill still running for it is
	// of no use any more.
	le.pd.drop(true)
	if errors.Is(err, evloop.ErrAnswerTooLarge) {
		// Not retried: the same request would ask as large an answer of any worker.
		le.deliverFailure(ex, w, err)
		return
	}
	if !a.retryable(status, err) {
		le.deliverHeld(ex, w)
		return
	}
	if err == nil {
		err = errRetryableStatus
	}
	le.lastErr, le.pd.prefillErr = err, false
	if pause, ok := a.retry(w, ex.Now()); ok {
		le.failed = w
		ex.Sleep(le, pause)
		return
	}
	le.deliverFailure(ex, w, err)
}

// Wake re-picks after a retry's backoff.
func (le *loopExchange) Wake(ex *evloop.Exchange) {
	if le.parked {
		le.unpark(ex)
		return
	}
	if le.tokens != nil {
		le.tokenized(ex)
		return
	}
	if le.pd.on {
		le.wakePD(ex)
		return
	}
	s, a, failed := le.s, &le.attempt, le.failed
	if r, ok := s.router.Current().Lookup(le.fields.Model); ok && a.pick(r, &a.main) == nil {
		s.log.Debug("Retrying on another worker", "failed", failed.URL, "next", a.main.w.URL, "attempt", a.failures+1, "error", le.lastErr)
		le.rt = r
		le.send(ex)
		return
	}
	a.exhausted = a.retries() // no worker left to retry on
	le.deliverFailure(ex, failed, le.lastErr)
}

// deliverHeld sends the worker w's held answer with the gateway's headers.
func (le *loopExchange) deliverHeld(ex *evloop.Exchange, w *worker.Worker) {
	status := ex.HeldStatus()
	le.answerHeaders(ex, w)
	if status < 300 {
		le.tel.usage(ex.HeldBody())
	}
	le.tel.firstToken(ex.Nanos())
	ex.DeliverHeld()
	if status < 300 {
		le.attempt.served(le.rt, w)
	}
	le.finish(status)
}

// deliverFailure answers for the last failed attempt (on w): the worker's own error answer
// if it gave one, else the gateway's envelope for the transport error.
func (le *loopExchange) deliverFailure(ex *evloop.Exchange, w *worker.Worker, err error) {
	if errors.Is(err, errRetryableStatus) {
		le.deliverHeld(ex, w)
		return
	}
	le.s.log.Debug("Upstream request failed", "worker", w.URL, "error", err)
	if errors.Is(err, evloop.ErrAnswerTooLarge) {
		le.fail(ex, errAnswerTooLarge, fmt.Sprintf("worker %s answered with a body larger than the %d bytes the gateway reads whole for a non-streamed answer (ask for \"stream\": true)", w.URL, le.s.cfg.MaxAnswerSize))
		return
	}
	if errors.Is(err, evloop.ErrAnswerMemory) { // a PD or EPD leg's answer (a Call)
		le.fail(ex, errAnswerMemory, "the gateway holds too many workers' answers in memory at once (1 GiB by default); retry later")
		return
	}
	var ue *evloop.UpstreamError
	if errors.As(err, &ue) && ue.Timeout() {
		le.fail(ex, errUpstreamTimeout, "worker "+w.URL+" did not answer within --request-timeout-secs")
		return
	}
	le.fail(ex, errUpstreamUnreachable, "worker "+w.URL+" is unreachable: "+err.Error())
}

func (le *loopExchange) failPick(ex *evloop.Exchange, err error) {
	if a := &le.attempt; a.failures > 0 {
		a.exhausted = a.retries() // a retry found no worker left (a PD pair's pick)
	}
	switch {
	case errors.Is(err, policy.ErrInvalidTargetWorker):
		le.fail(ex, errTargetWorker, err.Error())
	case errors.Is(err, policy.ErrNoAvailableWorkers):
		le.fail(ex, errNoWorkers, "no available workers for this request; all workers are unhealthy, draining or gone")
	default:
		le.fail(ex, errNoWorkers, err.Error())
	}
}

// fail answers a gateway-made error in the OpenAI envelope.
func (le *loopExchange) fail(ex *evloop.Exchange, e apiError, msg string) {
	ex.ResetHeaders()
	ex.AddHeader(headerErrorCode, []byte(e.code))
	if len(le.reqID) > 0 {
		ex.AddHeader(headerRequestID, le.reqID)
	}
	le.failRecord(e, msg)
	if le.pd.pw != nil {
		ex.AddHeader(headerPrefillWorker, le.pd.pw.URLBytes())
	}
	if le.pd.epd.w != nil {
		ex.AddHeader(headerEncodeWorker, le.pd.epd.w.URLBytes())
	}
	le.body = appendErrorBody(le.body[:0], e, msg)
	ex.Respond(e.status, "application/json", le.body)
	le.finish(e.status)
}

// finish counts the request, ends its attempt (what a leg still holds is abandoned, the
// admission slot freed) and readies the state for the connection's next request.
func (le *loopExchange) finish(status int) {
	le.s.observe(le.route, status, le.start)
	le.endRecord(status)
	le.end()
	le.reset()
}

func (le *loopExchange) end() {
	if le.begun {
		le.attempt.end()
		le.begun = false
	}
}

func (le *loopExchange) reset() {
	le.req.Reset()
	le.fields.Reset()
	le.routingTokens = le.routingTokens[:0]
	le.rt, le.lastErr, le.failed = nil, nil, nil
	le.dropTokens()
	le.target = evloop.Target{}
	le.pd.end() // a prefill still running finishes alone (a relayed decode answer)
	if cap(le.body) > 4096 {
		le.body = nil
	}
}

// Reject answers a request the loops refuse before routing, in the gateway's envelope.
func (p loopPlane) Reject(ex *evloop.Exchange, status int, reason string) {
	le := &loopExchange{s: p.s, route: routeOther, start: ex.Now()}
	le.beginRejected(ex)
	le.reject(ex, &evloop.ParseError{Status: status, Reason: reason})
}

func isParseError(err error) bool {
	_, ok := err.(*evloop.ParseError)
	return ok
}

// reject answers a request the loops refused, or whose streamed body failed, with pe.
func (le *loopExchange) reject(ex *evloop.Exchange, pe *evloop.ParseError) {
	s, status, reason := le.s, pe.Status, pe.Reason
	switch status {
	case fasthttp.StatusRequestHeaderFieldsTooLarge:
		if reason == http1.ErrTooManyHeaders.Reason {
			le.fail(ex, errHeaderTooLarge, fmt.Sprintf("request has more than %d header lines (the gateway's fixed limit on lines; --max-header-size bounds the bytes)", http1.MaxHeaders))
			break
		}
		le.fail(ex, errHeaderTooLarge, fmt.Sprintf("request header block exceeds --max-header-size (%d bytes)", s.cfg.MaxHeaderSize))
	case fasthttp.StatusServiceUnavailable:
		le.fail(ex, errBodyMemory, "the gateway is reading too many request bodies at once (--max-request-body-memory); retry later")
	case fasthttp.StatusRequestEntityTooLarge:
		le.fail(ex, errPayloadTooLarge, fmt.Sprintf("request body exceeds --max-payload-size (%d bytes)", s.cfg.MaxPayloadSize))
	case fasthttp.StatusRequestTimeout:
		le.fail(ex, errReadTimeout, "timed out reading the request")
	default:
		le.fail(ex, apiError{status, "invalid_request_error", "invalid_request"}, "malformed HTTP request: "+reason)
	}
}

// bridge serves a request with the fasthttp handler on a goroutine; its answer streams back
// through the loop (a relayed stream keeps its flushes and its backpressure).
func (p loopPlane) bridge(ex *evloop.Exchange) {
	st := ex.Detach()
	if st == nil {
		return
	}
	r := ex.Req()
	ctx := new(fasthttp.RequestCtx)
	ctx.Init2(&bridgeConn{start: p.s.clock.Now()}, fasthttpLogger{p.s.log}, true)
	req := &ctx.Request
	req.Header.SetMethodBytes(r.Method())
	req.SetRequestURIBytes(r.Target())
	r.VisitHeaders(func(name, value []byte) {
		switch {
		case http1.FoldEqual(name, "Host"):
			req.Header.SetHostBytes(value)
		case http1.FoldEqual(name, "Content-Length"), http1.FoldEqual(name, "Transfer-Encoding"):
		default:
			req.Header.AddBytesKV(name, value)
		}
	})
	if body := r.Body(); len(body) > maxSpecBody && bytes.HasPrefix(r.Path(), []byte("/workers")) {
		// The worker API refuses it with 413 by its length alone: no copy of a huge body.
		ctx.SetUserValue(oversizeBodyKey, len(body))
	} else {
		req.SetBody(body)
	}
	keepAlive := r.KeepAlive()
	go func() {
		s := p.s
		s.serveBridged(ctx)
		ctx.Response.SkipBody = string(ctx.Method()) == "HEAD"
		if !keepAlive {
			ctx.Response.SetConnectionClose()
		}
		bw := bufio.NewWriterSize(st, 4096)
		err := ctx.Response.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		st.Close(err == nil && !ctx.Response.ConnectionClose())
	}()
}

// bridgeConn is the connection a bridged request's fasthttp handler sees: it reads and writes
// nothing (the loop does). start is when the loop bridged the request, on the server's clock.
type bridgeConn struct{ start time.Time }

// observe counts a request on route that ended with status, begun at start on the server's
// clock (smg_http_requests_total, smg_http_request_duration_seconds).
func (s *Server) observe(route, status int, start time.Time) {
	s.m.observe(route, status, s.clock.Now().Sub(start))
}

// bridgedStart is when the loop bridged ctx's request, on the server's clock; a handler
// called without the bridge (a unit test's) counts from now.
func (s *Server) bridgedStart(ctx *fasthttp.RequestCtx) time.Time {
	if c, ok := ctx.Conn().(*bridgeConn); ok {
		return c.start
	}
	return s.clock.Now()
}

var bridgeAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

func (*bridgeConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (*bridgeConn) Write(p []byte) (int, error)      { return 0, errors.New("bridged connection") }
func (*bridgeConn) Close() error                     { return nil }
func (*bridgeConn) LocalAddr() net.Addr              { return bridgeAddr }
func (*bridgeConn) RemoteAddr() net.Addr             { return bridgeAddr }
func (*bridgeConn) SetDeadline(time.Time) error      { return nil }
func (*bridgeConn) SetReadDeadline(time.Time) error  { return nil }
func (*bridgeConn) SetWriteDeadline(time.Time) error { return nil }
