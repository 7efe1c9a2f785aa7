package evloop

import (
	"crypto/tls"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smg-go/smg/internal/http1"
)

// Handler serves requests on the event loops. Its methods run on a loop and must not block.
type Handler interface {
	// Serve gets each request. It answers with Respond, forwards with Forward, waits with
	// Sleep or hands the exchange to a goroutine with Detach.
	Serve(x *Exchange)
	// Reject answers a request the server refuses before Serve (status 400, 408, 413, 431,
	// 501) with Respond; the connection closes after it.
	Reject(x *Exchange, status int, reason string)
}

// Forwarder follows one forwarded request; its methods run on the exchange's loop.
type Forwarder interface {
	// UpstreamHead is called when the worker's response head arrived. true relays the answer
	// to the client as it arrives (response headers added with AddHeader first); false reads
	// it whole, for UpstreamDone to deliver (DeliverHeld), retry or replace.
	UpstreamHead(x *Exchange, status int) bool
	// UpstreamDone ends the attempt: err is nil when the answer is complete, ErrClientGone
	// when the client left, else why the worker's answer failed (an *UpstreamError).
	// Unless the answer was relayed (Relayed) or the client left, the exchange is again the
	// handler's to answer, forward or sleep.
	UpstreamDone(x *Exchange, err error)
	// Wake is called when a Sleep or a Park ends.
	Wake(x *Exchange)
}

// BodyWatcher is a Forwarder told of each piece of the body of an answer it relays, as the
// piece is relayed (Now is when it arrived): a stream's first piece is its first token (the
// expected-wait score counts the requests awaiting theirs), and the gaps between the later
// ones are the engine's decode steps (worker.DecodeTimer). piece is the body's bytes (without
// the chunked framing), valid only during the call.
type BodyWatcher interface {
	UpstreamBody(x *Exchange, piece []byte)
}

// Target is where one attempt goes and what it changes in the client's request.
type Target struct {
	// Addr is the worker's host:port (connections are pooled per Addr).
	Addr string
	// Host is the Host header sent; Addr when empty.
	Host string
	// Auth replaces the client's Authorization header when set.
	Auth []byte
	// RequestID replaces the client's X-Request-Id header when set.
	RequestID []byte
	// Body replaces the client's body when set (the PD handover).
	Body []byte
	// HeaderName, when set, is a header whose value HeaderValue replaces the client's.
	HeaderName  string
	HeaderValue []byte
	// TraceParent, when set, replaces the client's traceparent header (the gateway's span
	// becomes the worker's parent); the client's tracestate goes along unless
	// DropTraceState (the client's traceparent was not used: a new trace has no state).
	TraceParent    []byte
	DropTraceState bool
	// TLS, when set, is the configuration of a worker behind TLS (tls.go): connections to
	// Addr are then pooled apart from plain ones.
	TLS *tls.Config
	// HeadBy, when set (and before the deadline), bounds the wait for the worker's response
	// head; a relayed answer then has until Forward's deadline for its body, a held one must
	// be complete by HeadBy.
	HeadBy time.Time
}

// UpstreamError is a failed attempt: the worker could not be reached, broke the connection,
// answered malformed HTTP or did not answer in time.
type UpstreamError struct {
	Err error
	// Dial: the connection could not be established; Timeout: the deadline passed.
	Dial, timeout bool
}

func (e *UpstreamError) Error() string {
	switch {
	case e.Dial:
		return "cannot connect: " + e.Err.Error()
	case e.timeout:
		return "timed out: " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// Timeout reports whether the attempt ran out of time (after connecting).
func (e *UpstreamError) Timeout() bool { return e.timeout }

var (
	errDeadline    = errors.New("the worker did not answer before the deadline")
	errDialTimeout = errors.New("connect timed out")
	errNoFreeConns = errors.New("no free connections to the worker (--max-connections-per-worker)")
	errEOF         = errors.New("the worker closed the connection before the answer was complete")
)

// Exchange phases.
const (
	phaseDone     = iota // no exchange, or it has been answered
	phaseServing         // the handler has it
	phaseWaiting         // the request went out; waiting for the response head
	phaseHolding         // reading an answer whole
	phaseRelaying        // relaying an answer as it arrives
	phaseSleeping        // Sleep
	phaseDetached        // a goroutine writes the answer (Detach)
	phaseAwaiting        // Await: the handler waits for something of its own (a Call)
	phaseParked          // Park: waiting for an Unparker or the park's timeout
)

// Timer kinds of an exchange.
const (
	timerDeadline = iota
	timerSleep
)

// Exchange is one request and its answer on a client connection. It is reused for the
// connection's next request; its methods are for the loop's goroutine only.
type Exchange struct {
	c   *clientConn
	req Request
	// User is the handler's per-exchange state; it survives from request to request.
	User any

	phase      uint8
	fw         Forwarder
	up         *upstreamConn
	target     Target
	deadline   int64
	head       respHead
	dec        bodyDecoder
	chunked    bool // the relayed answer goes to the client chunked
	relayed    bool
	lastTwo    [2]byte
	upPaused   bool
	held       []byte  // the held answer's head as the worker sent it (x.head indexes it)
	hb         heldBuf // the held answer's body (held.go)
	heldStatus int
	extra      []byte // response headers added by the handler
	extraNames [8]http1.Span
	nextra     int
	fwd        []byte // the forwarded request's head
	pendingErr error
	t          timer
	tw         timer // the head-wait watch (watch.go)
	detached   *Stream
	gen        uint64 // counts the connection's requests (begin)
	// A streamed request body (stream.go): streamed for the whole exchange, bodyIn while
	// the rest is still arriving; reqDec finds its end, reqBodyN counts its decoded bytes.
	streamed, bodyIn bool
	reqChunked       bool
	reqDec           bodyDecoder
	reqBodyN         int
	// unparked is the gen of the request an Unparker woke (read on the loop, see run).
	unparked atomic.Uint64
}

func (x *Exchange) init(c *clientConn) {
	x.c = c
	x.t = unarmed(x)
	x.tw = unarmed(x)
}

// begin starts the exchange of a newly parsed request.
func (x *Exchange) begin() {
	x.gen++
	x.phase, x.relayed, x.pendingErr = phaseServing, false, nil
	x.streamed, x.bodyIn = false, false
	x.extra, x.nextra = x.extra[:0], 0
	x.held, x.hb.b, x.heldStatus = x.held[:0], x.hb.b[:0], 0
}

func (x *Exchange) reset() {
	x.begin()
	x.phase, x.fw, x.up, x.target, x.detached = phaseDone, nil, nil, Target{}, nil
	x.req = Request{}
	x.hb.free(x.c.l)
}

// Req is the request being served.
func (x *Exchange) Req() *Request { return &x.req }

// Status is the worker's status of the current or last attempt (0 before its head).
func (x *Exchange) Status() int { return x.head.status }

// Relayed reports whether the worker's answer started reaching the client.
func (x *Exchange) Relayed() bool { return x.relayed }

// Loop is the index of the exchange's event loop.
func (x *Exchange) Loop() int { return x.c.l.idx }

// Now is the loop's clock reading of the current wake-up (Config.Clock).
func (x *Exchange) Now() time.Time { return x.c.l.s.timeOf(x.c.l.now) }

// Nanos is Now as the clock's Nanos reading (clock.Nanos with clock.Real).
func (x *Exchange) Nanos() int64 { return x.c.l.now }

// AddHeader adds a response header to whatever answer the exchange sends; a worker's header
// of the same name is replaced.
func (x *Exchange) AddHeader(name string, value []byte) {
	start := len(x.extra)
	x.extra = appendHeader(x.extra, name, value)
	if x.nextra < len(x.extraNames) {
		x.extraNames[x.nextra] = http1.Span{Start: uint32(start), End: uint32(start + len(name))}
		x.nextra++
	}
}

// ResetHeaders drops the headers added with AddHeader.
func (x *Exchange) ResetHeaders() { x.extra, x.nextra = x.extra[:0], 0 }

// gatewaySets reports whether the handler sets header name itself.
func (x *Exchange) gatewaySets(name []byte) bool {
	for i := range x.nextra {
		if http1.FoldEqual(name, x.extraNames[i].Of(x.extra)) {
			return true
		}
	}
	return false
}

// appendTrailerHeaders ends a response head: the handler's headers, the connection's, CRLF.
func (x *Exchange) appendTrailerHeaders(dst []byte) []byte {
	dst = append(dst, x.extra...)
	if x.bodyIn {
		// The answer starts before the client's streamed body has arrived: the rest of it
		// will be discarded by a lingering close (exchangeDone), so the client is told.
		x.c.closeAfter, x.c.linger = true, true
	}
	if x.c.closeAfter {
		dst = append(dst, "Connection: close\r\n"...)
	}
	return append(dst, crlf...)
}

// Respond answers with a whole response made by the gateway.
func (x *Exchange) Respond(status int, contentType string, body []byte) {
	if x.phase != phaseServing {
		return
	}
	c := x.c
	c.out = http1.AppendStatusLine(c.out, status)
	if contentType != "" {
		c.out = appendHeader(c.out, "Content-Type", contentType)
	}
	c.out = appendContentLength(c.out, len(body))
	c.out = x.appendTrailerHeaders(c.out)
	c.out = append(c.out, body...)
	x.end()
}

// HeldStatus and HeldBody are the held answer after UpstreamDone(nil).
func (x *Exchange) HeldStatus() int { return x.heldStatus }

// HeldBody is the held answer's body.
func (x *Exchange) HeldBody() []byte { return x.hb.b }

// DeliverHeld sends the held answer: the worker's status and headers, the handler's headers.
func (x *Exchange) DeliverHeld() {
	if x.phase != phaseServing {
		return
	}
	c := x.c
	c.out = x.appendAnswerHead(c.out, &x.head, x.held)
	c.out = appendContentLength(c.out, len(x.hb.b))
	c.out = x.appendTrailerHeaders(c.out)
	c.out = append(c.out, x.hb.b...)
	c.outReserved += x.hb.handOff() // the copy in the output holds the budget until sent
	x.end()
}

// DeliverCall sends the answer of the ended Call c as the exchange's answer: the worker's
// status and headers, the handler's headers, the body.
func (x *Exchange) DeliverCall(c *Call) {
	if x.phase != phaseServing || c.phase != callDone {
		return
	}
	out := x.c.out
	out = x.appendAnswerHead(out, &c.head, c.held)
	out = appendContentLength(out, len(c.hb.b))
	out = x.appendTrailerHeaders(out)
	x.c.out = append(out, c.hb.b...)
	x.c.outReserved += c.hb.handOff()
	x.end()
}

// end completes the exchange: its answer is in the client's output.
func (x *Exchange) end() {
	x.phase = phaseDone
	x.hb.free(x.c.l) // the answer is in the client's output: what was held is returned now
	x.c.l.timers.disarm(&x.t)
	x.c.l.timers.disarm(&x.tw)
	x.c.exchangeDone()
}

// Sleep waits d on the loop, then calls the forwarder's Wake.
func (x *Exchange) Sleep(fw Forwarder, d time.Duration) { x.wait(fw, d, phaseSleeping) }

// Park waits, without a goroutine, until another goroutine wakes the exchange through its
// Unparker or d passes, then calls fw.Wake (the handler tells the two apart by its own
// state). A client that leaves meanwhile ends the exchange with fw.UpstreamDone(x,
// ErrClientGone). An admission queue parks its waiters this way.
func (x *Exchange) Park(fw Forwarder, d time.Duration) { x.wait(fw, d, phaseParked) }

// wait puts a serving exchange in phase (sleeping or parked) with fw to wake, for d at most.
func (x *Exchange) wait(fw Forwarder, d time.Duration, phase uint8) {
	if x.phase != phaseServing {
		return
	}
	x.fw, x.phase = fw, phase
	x.c.l.timers.arm(&x.t, x.c.l.now+int64(d), timerSleep)
}

// Unparker wakes a parked exchange from any goroutine. It names one request: waking an
// exchange that is no longer parked for it (it timed out, its client left, the connection
// serves another request) does nothing.
type Unparker struct {
	x   *Exchange
	gen uint64
}

// Unparker returns the Unparker of the exchange's current request.
func (x *Exchange) Unparker() Unparker { return Unparker{x, x.gen} }

// Unpark wakes the exchange on its loop (fw.Wake), if it is still parked for the request.
func (u Unparker) Unpark() {
	if u.x == nil {
		return
	}
	u.x.unparked.Store(u.gen)
	u.x.c.l.post(u.x)
}

// run is an Unpark on the loop.
func (x *Exchange) run() {
	if x.phase == phaseParked && x.unparked.Load() == x.gen {
		x.c.l.timers.disarm(&x.t)
		x.phase = phaseServing
		x.fw.Wake(x)
	}
}

// Await parks the exchange until the handler takes it back with Resume, when something it
// started ends (a Call: the answer it waits for). A client that leaves meanwhile ends the
// exchange with fw.UpstreamDone(x, ErrClientGone).
func (x *Exchange) Await(fw Forwarder) {
	if x.phase != phaseServing {
		return
	}
	x.fw, x.phase = fw, phaseAwaiting
}

// Resume gives an awaiting exchange back to the handler, to answer, forward or sleep.
func (x *Exchange) Resume() {
	if x.phase == phaseAwaiting {
		x.phase = phaseServing
	}
}

// CancelForward ends the forward under way before any of its answer reached the client: the
// worker connection is closed (the worker sees its request cancelled) and the exchange is
// the handler's again; UpstreamDone is not called. It reports whether there was such a
// forward (false once the answer is being relayed or the attempt has ended).
func (x *Exchange) CancelForward() bool {
	if x.phase != phaseWaiting && x.phase != phaseHolding {
		return false
	}
	if x.up != nil {
		x.up.close()
		x.up = nil
	}
	x.upPaused, x.pendingErr = false, nil
	x.c.l.timers.disarm(&x.t)
	x.c.l.timers.disarm(&x.tw)
	x.phase = phaseServing
	return true
}

func (x *Exchange) onTimer(kind uint8) {
	switch {
	case kind == timerWatch:
		x.watch()
	case kind == timerSleep && (x.phase == phaseSleeping || x.phase == phaseParked):
		x.phase = phaseServing
		x.fw.Wake(x)
	case kind == timerDeadline && (x.phase == phaseWaiting || x.phase == phaseHolding || x.phase == phaseRelaying):
		x.upstreamFailed(&UpstreamError{Err: errDeadline, timeout: true})
	}
}

// Forward sends the request to t and follows the answer with fw, until deadline.
func (x *Exchange) Forward(fw Forwarder, t *Target, deadline time.Time) {
	if x.phase != phaseServing {
		return
	}
	x.fw, x.target = fw, *t
	x.deadline = x.c.l.s.nanosOf(deadline)
	first := x.deadline
	if !t.HeadBy.IsZero() {
		first = min(first, x.c.l.s.nanosOf(t.HeadBy))
	}
	x.c.l.timers.arm(&x.t, first, timerDeadline)
	x.armWatch()
	x.send()
}

// send writes the request to a pooled or new connection to the target.
func (x *Exchange) send() {
	l := x.c.l
	x.phase, x.held, x.hb.b = phaseWaiting, x.held[:0], x.hb.b[:0]
	up, err := l.upstream(x.target.Addr, x.target.TLS)
	if err != nil {
		x.failSoon(err)
		return
	}
	x.up = up
	up.owner = x
	body := x.target.Body
	if body == nil {
		body = x.req.Body()
	}
	if !x.streamed {
		x.fwd = appendForwardHead(x.fwd[:0], &x.req, &x.target, len(body))
		up.send(x.fwd, body)
		return
	}
	// A streamed body: its head now, the rest as it arrives (pumpBody).
	length := x.req.ContentLength()
	if x.reqChunked {
		length = -1
	}
	x.fwd = appendForwardHead(x.fwd[:0], &x.req, &x.target, length)
	if x.reqChunked {
		var mark int
		x.fwd, mark = beginChunk(x.fwd)
		x.fwd = endChunk(append(x.fwd, body...), mark)
		body = nil
	}
	up.send(x.fwd, body)
	x.c.resumeReads()
}

// failSoon fails the attempt after the current event: the handler is not re-entered from
// the call it made.
func (x *Exchange) failSoon(err error) {
	x.pendingErr = err
	x.c.l.soon = append(x.c.l.soon, x)
}

func (x *Exchange) runSoon() {
	if err := x.pendingErr; err != nil && x.phase == phaseWaiting {
		x.pendingErr = nil
		x.upstreamFailed(err)
	}
}

// appendForwardHead writes the head of r for the worker of t: the client's request line and
// headers without the hop-by-hop ones, with the target's Host, credentials and request id,
// and a body of length bytes (-1: chunked).
func appendForwardHead(dst []byte, r *Request, t *Target, length int) []byte {
	dst = append(dst, r.Method()...)
	dst = append(dst, ' ')
	dst = append(dst, r.Target()...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	if t.Host != "" {
		dst = append(dst, t.Host...)
	} else {
		dst = append(dst, t.Addr...)
	}
	dst = append(dst, crlf...)
	for i := range r.NumHeaders() {
		name := r.HeaderName(i)
		if skipForwarded(name, t) || (t.HeaderName != "" && http1.FoldEqual(name, t.HeaderName)) {
			continue
		}
		dst = appendHeader(dst, name, r.HeaderValue(i))
	}
	if length < 0 {
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	} else {
		dst = appendContentLength(dst, length)
	}
	if t.RequestID != nil {
		dst = appendHeader(dst, "X-Request-Id", t.RequestID)
	}
	if t.Auth != nil {
		dst = appendHeader(dst, "Authorization", t.Auth)
	}
	if t.HeaderName != "" {
		dst = appendHeader(dst, t.HeaderName, t.HeaderValue)
	}
	if t.TraceParent != nil {
		dst = appendHeader(dst, "traceparent", t.TraceParent)
	}
	return append(dst, crlf...)
}

// appendHeader writes the header line "name: value" and its CRLF.
func appendHeader[N, V ~string | ~[]byte](dst []byte, name N, value V) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, crlf...)
}

// appendContentLength writes the header line "Content-Length: n" and its CRLF.
func appendContentLength(dst []byte, n int) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, crlf...)
}

// skipForwarded reports whether a client header stays behind: the connection's own, the
// framing (the gateway sends its own Content-Length), and what the target replaces.
func skipForwarded(name []byte, t *Target) bool {
	switch len(name) {
	case 2:
		return http1.EqualFold(name, "te")
	case 4:
		return http1.EqualFold(name, "host")
	case 6:
		return http1.EqualFold(name, "expect")
	case 7:
		return http1.EqualFold(name, "upgrade") || http1.EqualFold(name, "trailer")
	case 10:
		return http1.EqualFold(name, "connection") || http1.EqualFold(name, "keep-alive") ||
			t.DropTraceState && http1.EqualFold(name, "tracestate")
	case 11:
		return t.TraceParent != nil && http1.EqualFold(name, "traceparent")
	case 12:
		return t.RequestID != nil && http1.EqualFold(name, "x-request-id")
	case 13:
		return t.Auth != nil && http1.EqualFold(name, "authorization")
	case 14:
		return http1.EqualFold(name, "content-length")
	case 16:
		return http1.EqualFold(name, "proxy-connection")
	case 17:
		return http1.EqualFold(name, "transfer-encoding")
	}
	return false
}

func (x *Exchange) upstream() *upstreamConn { return x.up }

// onUpstreamData handles what the worker sent: the response head, then the body.
func (x *Exchange) onUpstreamData(up *upstreamConn) {
	data := up.in
	if x.phase == phaseWaiting {
		head, rest := up.finalHead(&x.head)
		if head == nil {
			return
		}
		x.startAnswer(head)
		if x.phase != phaseHolding && x.phase != phaseRelaying {
			return
		}
		data = rest
	}
	var done bool
	var used int
	var err error
	switch x.phase {
	case phaseHolding:
		used, done, err = x.hb.decode(x.c.l, &x.dec, data)
	case phaseRelaying:
		c := x.c
		if len(data) > 0 {
			if x.chunked {
				var mark int
				c.out, mark = beginChunk(c.out)
				start := len(c.out)
				c.out, used, done, err = x.dec.decode(data, c.out)
				x.noteTail(c.out[start:])
				x.noteBody(c.out[start:])
				c.out = endChunk(c.out, mark)
			} else {
				start := len(c.out)
				c.out, used, done, err = x.dec.decode(data, c.out)
				x.noteTail(c.out[start:])
				x.noteBody(c.out[start:])
			}
			c.markDirty()
		}
	default:
		return
	}
	if up.bodyDecoded(used, len(data), done, err) {
		x.upstreamComplete()
	}
}

// noteBody tells a BodyWatcher forwarder of a piece of the answer's body relayed.
func (x *Exchange) noteBody(piece []byte) {
	if len(piece) > 0 {
		if bw, ok := x.fw.(BodyWatcher); ok {
			bw.UpstreamBody(x, piece)
		}
	}
}

// noteTail remembers the last two bytes relayed (does the stream end between events?).
func (x *Exchange) noteTail(b []byte) {
	switch n := len(b); {
	case n >= 2:
		x.lastTwo = [2]byte{b[n-2], b[n-1]}
	case n == 1:
		x.lastTwo = [2]byte{x.lastTwo[1], b[0]}
	}
}

// startAnswer asks the forwarder what to do with the answer whose head is head.
func (x *Exchange) startAnswer(head []byte) {
	h := &x.head
	x.c.l.timers.disarm(&x.tw)
	x.dec.init(h)
	if x.fw.UpstreamHead(x, h.status) {
		x.phase, x.relayed, x.lastTwo = phaseRelaying, true, [2]byte{}
		if !x.target.HeadBy.IsZero() { // the head came in time: the body has the deadline
			x.c.l.timers.arm(&x.t, x.deadline, timerDeadline)
		}
		c := x.c
		c.out = x.appendAnswerHead(c.out, &x.head, head)
		switch x.dec.mode {
		case bodyLength:
			c.out = appendContentLength(c.out, h.contentLength)
			x.chunked = false
		case bodyNone:
			x.chunked = false
		default:
			c.out = append(c.out, "Transfer-Encoding: chunked\r\n"...)
			x.chunked = true
		}
		c.out = x.appendTrailerHeaders(c.out)
		c.markDirty()
		if x.dec.done() {
			x.up.in = x.up.in[:0]
			x.upstreamComplete()
		}
		return
	}
	x.phase, x.heldStatus = phaseHolding, h.status
	x.held = append(x.held[:0], head...)
	if refuseDeclared(x.c.l, &x.dec) {
		x.upstreamFailed(&UpstreamError{Err: ErrAnswerTooLarge})
		return
	}
	if x.dec.done() {
		x.up.in = x.up.in[:0]
		x.upstreamComplete()
	}
}

// appendAnswerHead writes the status line and the relayable headers of the worker's answer
// whose head h indexes.
func (x *Exchange) appendAnswerHead(dst []byte, h *respHead, head []byte) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = append(dst, h.reason.Of(head)...)
	dst = append(dst, crlf...)
	for i := range h.nhdr {
		name := h.headers[i].Name.Of(head)
		if hopByHop(name) || x.gatewaySets(name) {
			continue
		}
		dst = appendHeader(dst, name, h.headers[i].Value.Of(head))
	}
	return dst
}

// upstreamComplete ends an attempt whose answer has been read completely.
func (x *Exchange) upstreamComplete() {
	up := x.up
	x.up = nil
	x.c.l.timers.disarm(&x.t)
	// A worker that answered before the client's streamed body was all sent cannot take
	// another request on the connection.
	up.release(!x.head.close && x.dec.mode != bodyClose && !up.leftover && !x.bodyIn)
	x.upPaused = false // the worker connection is released: nothing left to resume
	switch x.phase {
	case phaseRelaying:
		if x.chunked {
			x.c.out = append(x.c.out, "0\r\n\r\n"...)
		}
		x.c.markDirty()
		x.phase = phaseServing
		x.fw.UpstreamDone(x, nil)
		x.end()
	case phaseHolding:
		x.phase = phaseServing
		x.fw.UpstreamDone(x, nil)
	}
}

// upstreamFailed ends an attempt whose worker failed.
func (x *Exchange) upstreamFailed(err error) {
	x.c.l.timers.disarm(&x.tw)
	up := x.up
	x.up = nil
	if up != nil {
		up.close()
	}
	x.upPaused = false // the worker connection is released: nothing left to resume
	phase := x.phase
	if (phase == phaseRelaying || phase == phaseHolding) && x.dec.mode == bodyClose && errors.Is(err, errEOF) {
		// A body delimited by the connection's end is complete when the worker closes.
		x.c.l.timers.disarm(&x.t)
		x.phase = phaseServing
		if phase == phaseRelaying {
			x.c.out = append(x.c.out, "0\r\n\r\n"...)
			x.c.markDirty()
			x.fw.UpstreamDone(x, nil)
			x.end()
			return
		}
		x.fw.UpstreamDone(x, nil)
		return
	}
	// No silent resend on a new connection, even for a pooled connection that failed before
	// any byte came back: the worker may have read the request (a worker that resets every
	// request would get each one twice), and like fasthttp's client the attempt fails and
	// the handler decides. An idle pooled connection the worker closes is seen (EOF while
	// idle) and dropped before it is reused.
	x.c.l.timers.disarm(&x.t)
	switch phase {
	case phaseRelaying:
		c := x.c
		if x.chunked {
			if tail := c.l.s.cfg.StreamFailureTail; len(tail) > 0 {
				var mark int
				c.out, mark = beginChunk(c.out)
				if x.lastTwo != [2]byte{'\n', '\n'} {
					c.out = append(c.out, "\n\n"...) // end the event the worker left unfinished
				}
				c.out = append(c.out, tail...)
				c.out = endChunk(c.out, mark)
			}
			c.out = append(c.out, "0\r\n\r\n"...)
		} else {
			c.closeAfter = true
		}
		c.markDirty()
		x.phase = phaseServing
		x.fw.UpstreamDone(x, err)
		x.end()
	case phaseWaiting, phaseHolding:
		x.phase = phaseServing
		x.fw.UpstreamDone(x, err)
	}
}

// abort ends the exchange because its client left.
func (x *Exchange) abort(err error) {
	switch x.phase {
	case phaseWaiting, phaseHolding, phaseRelaying:
		if x.up != nil {
			x.up.close() // the worker sees its request cancelled
			x.up = nil
		}
		x.c.l.timers.disarm(&x.t)
		x.c.l.timers.disarm(&x.tw)
		x.phase = phaseDone
		x.fw.UpstreamDone(x, err)
	case phaseSleeping, phaseAwaiting, phaseParked:
		x.c.l.timers.disarm(&x.t)
		x.phase = phaseDone
		x.fw.UpstreamDone(x, err)
	case phaseDetached:
		x.detached.clientGone()
	default:
		x.phase = phaseDone
	}
}

// pauseUpstream stops reading the worker while the client is this far behind.
func (x *Exchange) pauseUpstream() {
	if x.up != nil && !x.upPaused && x.phase == phaseRelaying {
		x.upPaused = true
		x.up.pauseReads(true)
	}
}

func (x *Exchange) resumeUpstream() {
	if x.upPaused {
		x.upPaused = false
		if x.up != nil {
			x.up.pauseReads(false)
		}
	}
}

// Detach hands the exchange to a goroutine, which writes the whole HTTP response (head
// included) to the returned Stream and closes it. The request stays valid until Close.
func (x *Exchange) Detach() *Stream {
	if x.phase != phaseServing {
		return nil
	}
	s := &Stream{x: x, l: x.c.l, fd: x.c.fd, limit: x.c.l.s.cfg.OutputLimit, behind: x.c.pending(), left: make(chan struct{})}
	s.cond.L = &s.mu
	x.phase, x.detached = phaseDetached, s
	return s
}

// Stream is the answer of a detached exchange, written by a goroutine. Write blocks while
// the client is more than the output limit behind.
//
// A write that finds nothing waiting for the client (no byte queued here or on the
// connection) goes to the socket from the writer's goroutine: a stream of small pieces, one
// per generated token, would otherwise wake the loop once per piece. What the socket does not
// take is queued to the loop, and from then on writes queue behind it, so the order holds.
// The fd stays the client's while the writer holds mu and gone is false: the loop marks the
// stream gone (under mu) before it closes the connection.
type Stream struct {
	x      *Exchange
	l      *loop
	fd     int
	limit  int
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	spare  []byte // the buffer run last moved out: the writer's next, so writes reuse memory
	behind int    // what the client connection has not sent yet
	posted bool
	closed bool
	keep   bool
	gone   bool
	left   chan struct{} // closed when the client leaves
}

// Left is closed when the client has left: nothing written reaches it any more.
func (s *Stream) Left() <-chan struct{} { return s.left }

// Write queues p for the client.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.gone && len(s.buf)+s.behind > s.limit {
		s.cond.Wait()
	}
	if s.gone || s.closed {
		return 0, ErrClientGone
	}
	if !s.posted && len(s.buf) == 0 && s.behind == 0 {
		n, err := rawWrite(s.fd, p)
		if n == len(p) {
			return n, nil
		}
		if n > 0 {
			p = p[n:]
		}
		// EAGAIN: the socket is full, the loop waits for it; another error: the loop's own
		// write finds it and closes the connection.
		_ = err
	}
	s.buf = append(s.buf, p...)
	s.postLocked()
	return len(p), nil
}

// Close ends the answer; keepAlive false closes the connection after it.
func (s *Stream) Close(keepAlive bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.keep = true, keepAlive
	s.postLocked()
}

func (s *Stream) postLocked() {
	if !s.posted {
		s.posted = true
		s.l.post(s)
	}
}

// run moves the written bytes to the client connection, on the loop.
func (s *Stream) run() {
	x := s.x
	c := x.c
	s.mu.Lock()
	s.posted = false
	closed, keep := s.closed, s.keep
	buf := s.buf
	s.buf, s.spare = s.spare[:0], nil
	s.behind = c.pending() + len(buf) // queued on the connection from here: writes queue behind it
	s.mu.Unlock()
	if c.state == stateClosed {
		if closed {
			x.detached = nil
			c.recycle()
		}
		return
	}
	c.out = append(c.out, buf...)
	c.markDirty()
	s.mu.Lock()
	s.spare = buf[:0]
	s.behind = c.pending()
	s.mu.Unlock()
	if closed {
		if !keep {
			c.closeAfter = true
		}
		x.detached = nil
		x.phase = phaseServing
		x.end()
	}
}

// drained tells the writer how far behind the client is.
func (s *Stream) drained(pending int) {
	s.mu.Lock()
	s.behind = pending
	if pending <= s.limit {
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

func (s *Stream) clientGone() {
	s.mu.Lock()
	if !s.gone {
		close(s.left)
	}
	s.gone = true
	s.cond.Broadcast()
	s.mu.Unlock()
}
