package evloop

import (
	"errors"
	"time"
)

// CallHandler follows a Call; its method runs on the call's loop and must not block.
type CallHandler interface {
	// CallDone ends the call: err is nil when the answer is complete (Status, Body), else
	// why it failed (an *UpstreamError, or ErrShutdown when the server stops). The handler
	// still owns the call and must Release it, now or later.
	CallDone(c *Call, err error)
}

// Call phases.
const (
	callFree    = iota // in the loop's pool
	callWaiting        // the request went out; waiting for the response head
	callHolding        // reading the answer
	callDone           // CallDone was called; the answer stays until Release
)

// Call is a request the handler sends to a worker beside the exchange's own forward (a PD
// request's prefill leg, sent with the decode leg or before it), its answer read whole. It
// belongs to the exchange's loop, not to the exchange: it may outlive it (a prefill that
// finishes after the decode answer was relayed). Calls are pooled per loop; User survives
// from use to use, like Exchange.User. A Call is for its loop's goroutine only.
type Call struct {
	l *loop
	// User is the handler's per-call state; it survives Release.
	User any

	phase      uint8
	h          CallHandler
	up         *upstreamConn
	head       respHead
	dec        bodyDecoder
	held       []byte  // the answer's head as the worker sent it (head indexes it)
	hb         heldBuf // the answer's body (held.go)
	out        []byte  // the request head
	pendingErr error
	t          timer
	tw         timer // the head-wait watch (watch.go)
	// x and gen are the exchange that made the call and its request (Exchange.gen): a
	// panic in CallDone closes that client connection if it still serves that request.
	x   *Exchange
	gen uint64
}

// Call sends the exchange's request to t's worker, as Forward would send it (the client's
// request line and headers with t's changes, t.Body or the client's body), and reads the
// answer whole, until deadline; h.CallDone is told when it ends, never from inside this
// call. The request is copied out at once: the exchange may end before the call does. t's
// HeadBy is not used.
func (x *Exchange) Call(h CallHandler, t *Target, deadline time.Time) *Call {
	l := x.c.l
	c := takeFree(&l.calls)
	if c == nil {
		c = &Call{l: l}
		c.t, c.tw = unarmed(c), unarmed(c)
	}
	c.phase, c.h, c.pendingErr, c.x, c.gen = callWaiting, h, nil, x, x.gen
	c.held, c.hb.b, c.head.status = c.held[:0], c.hb.b[:0], 0
	l.timers.arm(&c.t, l.s.nanosOf(deadline), timerDeadline)
	c.armWatch()
	up, err := l.upstream(t.Addr, t.TLS)
	if err != nil {
		c.failSoon(err)
		return c
	}
	c.up, up.owner = up, c
	body := t.Body
	if body == nil {
		body = x.req.Body()
	}
	c.out = appendForwardHead(c.out[:0], &x.req, t, len(body))
	up.send(c.out, body)
	return c
}

// Status is the worker's status (0 before the head arrived).
func (c *Call) Status() int { return c.head.status }

// Body is the answer's body, complete once CallDone was told nil.
func (c *Call) Body() []byte { return c.hb.b }

// Release gives the call back to its loop. A call still under way is cancelled: its worker
// connection is closed (the worker sees its request cancelled) and CallDone is not called.
// The call must not be used after.
func (c *Call) Release() {
	if c.phase == callFree {
		return
	}
	if c.up != nil {
		c.up.close()
		c.up = nil
	}
	c.l.timers.disarm(&c.t)
	c.l.timers.disarm(&c.tw)
	c.phase, c.h, c.pendingErr, c.x = callFree, nil, nil, nil
	c.hb.free(c.l)
	c.l.calls = append(c.l.calls, c)
}

func (c *Call) failSoon(err error) {
	c.pendingErr = err
	c.l.soon = append(c.l.soon, c)
}

func (c *Call) runSoon() {
	if err := c.pendingErr; err != nil && c.phase == callWaiting {
		c.pendingErr = nil
		c.upstreamFailed(err)
	}
}

func (c *Call) onTimer(kind uint8) {
	if kind == timerWatch {
		c.watch()
		return
	}
	if kind == timerDeadline && (c.phase == callWaiting || c.phase == callHolding) {
		c.upstreamFailed(&UpstreamError{Err: errDeadline, timeout: true})
	}
}

func (c *Call) upstream() *upstreamConn { return c.up }

// onUpstreamData reads the answer: its head (interim 1xx answers skipped), then its body.
func (c *Call) onUpstreamData(up *upstreamConn) {
	data := up.in
	if c.phase == callWaiting {
		head, rest := up.finalHead(&c.head)
		if head == nil {
			return
		}
		c.l.timers.disarm(&c.tw)
		c.held = append(c.held[:0], head...)
		c.dec.init(&c.head)
		c.phase = callHolding
		data = rest
		if refuseDeclared(c.l, &c.dec) {
			c.upstreamFailed(&UpstreamError{Err: ErrAnswerTooLarge})
			return
		}
		if c.dec.done() {
			up.in, up.leftover = up.in[:0], len(data) > 0
			c.complete()
			return
		}
	}
	if c.phase != callHolding {
		return
	}
	used, done, err := c.hb.decode(c.l, &c.dec, data)
	if up.bodyDecoded(used, len(data), done, err) {
		c.complete()
	}
}

// complete ends a call whose answer has been read whole.
func (c *Call) complete() {
	up := c.up
	c.up = nil
	c.l.timers.disarm(&c.t)
	up.release(!c.head.close && c.dec.mode != bodyClose && !up.leftover)
	c.done(nil)
}

// upstreamFailed ends a call whose worker failed (a body delimited by the connection's end
// is complete when the worker closes).
func (c *Call) upstreamFailed(err error) {
	if c.phase != callWaiting && c.phase != callHolding {
		return
	}
	if up := c.up; up != nil {
		c.up = nil
		up.close()
	}
	c.l.timers.disarm(&c.t)
	c.l.timers.disarm(&c.tw)
	if c.phase == callHolding && c.dec.mode == bodyClose && errors.Is(err, errEOF) {
		err = nil
	}
	c.done(err)
}

// done tells the handler; the call may be released (and reused) from inside CallDone, so
// nothing touches it after.
func (c *Call) done(err error) {
	c.phase = callDone
	h, l := c.h, c.l
	c.h = nil
	l.callX, l.callGen = c.x, c.gen
	h.CallDone(c, err)
	l.callX = nil
}
