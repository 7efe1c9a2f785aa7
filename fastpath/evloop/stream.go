package evloop

import "github.com/smg-go/smg/internal/http1"

// Streamed request bodies (Config.StreamBody). A request whose body is larger than
// Config.StreamBodyOver, and which Config.StreamBody accepts, is served once its head and the first
// StreamBodyOver bytes of its body are in: the client's read buffer never grows past that.
// When the handler forwards it, the worker gets the head (Content-Length as the client
// declared it, or chunked), the part of the body already read, and then the rest as it
// arrives, each client read decoded (a chunked body) and written on to the worker's
// connection on the same wake-up. The worker's unsent bytes are bounded: past OutputLimit
// the client is no longer read (EPOLLIN off, a hang-up still seen) until the worker has
// taken half of them. Until the request is forwarded (an admission queue, a pause) the client
// is not read either. Such a request can be sent only once: its body is not kept.
//
// Failures of the client's body end the attempt as the client's, not the worker's: a broken
// chunked encoding (400), a body past MaxBodySize (413), a client that sends nothing for
// ReadTimeout (408) close the worker's connection and reach the Forwarder's UpstreamDone as
// a *ParseError, to be answered; once the answer is being relayed the client's connection is
// closed instead. An exchange that ends before the body has arrived whole (the worker
// answered early, the handler refused the request) closes its client's connection with a
// lingering close, and the worker's connection is not reused.

// streamRead is the most a streamed body's client read takes at once (Loop.bodyBuf).
const streamRead = 64 << 10

// Streamed reports whether the request's body is being streamed: Body holds only its head.
func (x *Exchange) Streamed() bool { return x.streamed }

// startStreamed serves the request whose head c.in holds as streamed, when its body is past
// StreamBodyOver, that much of it has arrived, and StreamBody accepts it. It reports whether
// it did (or refused the request).
func (c *clientConn) startStreamed() bool {
	cfg := &c.l.s.cfg
	x := &c.x
	r := &x.req
	over, head := cfg.StreamBodyOver, r.HeadLen()
	if cfg.StreamBody == nil || head == 0 || len(c.in)-head < over {
		return false
	}
	if !r.Chunked() && r.ContentLength() <= over {
		return false
	}
	if !cfg.StreamBody(r) {
		return false
	}
	body := c.in[head:]
	x.reqDec = bodyDecoder{mode: bodyLength, remaining: r.ContentLength() - len(body)}
	x.reqChunked = r.Chunked()
	if x.reqChunked {
		x.reqDec = bodyDecoder{mode: bodyChunked}
		var used int
		var done bool
		var err error
		c.scratch, used, done, err = x.reqDec.decode(body, c.scratch[:0])
		switch {
		case err != nil:
			c.reject(http1.ErrBadChunk)
			return true
		case done || used < len(body):
			return false // the parser finds it whole: not streamed
		case len(c.scratch) > cfg.MaxBodySize:
			c.reject(http1.ErrBodyTooLarge)
			return true
		}
		body = c.scratch
	}
	r.SetBody(body)
	c.continued = false
	c.l.timers.disarm(&c.t)
	c.reqLen, c.state = len(c.in), stateBusy
	if !r.KeepAlive() || c.l.drained {
		c.closeAfter = true
	}
	x.begin()
	x.streamed, x.bodyIn, x.reqBodyN = true, true, len(body)
	cfg.Handler.Serve(x)
	return true
}

// forwarding reports whether the exchange has a worker connection its body can go to.
func (x *Exchange) forwarding() bool {
	return x.up != nil && (x.phase == phaseWaiting || x.phase == phaseHolding || x.phase == phaseRelaying)
}

// readBody reads once more of a streamed body and passes it on to the worker.
func (c *clientConn) readBody() {
	x := &c.x
	if !x.forwarding() {
		c.pauseReads() // until the request is forwarded (send resumes)
		return
	}
	l := c.l
	if l.bodyBuf == nil {
		l.bodyBuf = make([]byte, streamRead)
	}
	buf := l.bodyBuf
	if x.reqDec.mode == bodyLength {
		buf = buf[:min(len(buf), x.reqDec.remaining)] // nothing of a pipelined request
	}
	n := c.readClient(buf)
	if n == 0 {
		return
	}
	x.pumpBody(buf[:n])
}

// pumpBody decodes p, the next bytes of the client's body, onto the worker's connection.
func (x *Exchange) pumpBody(p []byte) {
	c, up := x.c, x.up
	cfg := &c.l.s.cfg
	if up.sent > 0 && up.sent >= len(up.out)/2 { // keep the buffer from creeping
		n := copy(up.out, up.out[up.sent:])
		up.out, up.sent = up.out[:n], 0
	}
	var mark, used int
	var done bool
	var err error
	if x.reqChunked {
		up.out, mark = beginChunk(up.out)
	}
	start := len(up.out)
	up.out, used, done, err = x.reqDec.decode(p, up.out)
	x.reqBodyN += len(up.out) - start
	if x.reqChunked {
		up.out = endChunk(up.out, mark)
	}
	switch {
	case err != nil:
		x.clientBodyFailed(http1.ErrBadChunk)
		return
	case x.reqBodyN > cfg.MaxBodySize:
		x.clientBodyFailed(http1.ErrBodyTooLarge)
		return
	case done:
		x.bodyIn = false
		c.l.timers.disarm(&c.t)
		if x.reqChunked {
			up.out = append(up.out, "0\r\n\r\n"...)
		}
		if rest := p[used:]; len(rest) > 0 { // a pipelined request after a chunked body
			c.in = append(c.in, rest...)
		}
	default:
		c.l.timers.arm(&c.t, c.l.now+int64(cfg.ReadTimeout), timerRead)
	}
	if !up.connecting { // else the connect's completion writes what waits
		if err := up.write(); err != nil {
			x.upstreamFailed(err)
			return
		}
	}
	if x.bodyIn && up.pending() > cfg.OutputLimit {
		c.pauseReads() // the worker is slower than the client: it catches up first
	}
}

// pending is how many bytes wait to be sent to the worker (sealed or not, over TLS).
func (u *upstreamConn) pending() int {
	n := len(u.out) - u.sent
	if u.tls != nil {
		n += len(u.tls.wire.out) - u.tls.wire.sent
	}
	return n
}

// bodyDrained is told that the worker's connection took some of a streamed body: the client
// is read again once the worker has taken half of what waited.
func (x *Exchange) bodyDrained(up *upstreamConn) {
	if x.bodyIn && x.up == up && x.c.readPaused && up.pending() <= x.c.l.s.cfg.OutputLimit/2 {
		x.c.resumeReads()
	}
}

// clientBodyFailed ends an exchange whose client's streamed body failed: the worker's
// connection is closed (the engine sees its request cancelled) and the handler answers pe,
// or the connection is closed when the answer is already being relayed.
func (x *Exchange) clientBodyFailed(pe *ParseError) {
	c := x.c
	x.bodyIn = false
	c.l.timers.disarm(&c.t)
	c.closeAfter, c.linger = true, true
	switch x.phase {
	case phaseWaiting, phaseHolding:
		if x.up != nil {
			x.up.close()
			x.up = nil
		}
		x.upPaused = false
		c.l.timers.disarm(&x.t)
		c.l.timers.disarm(&x.tw)
		x.phase = phaseServing
		x.fw.UpstreamDone(x, pe)
		if x.phase == phaseServing { // the handler did not answer
			x.phase = phaseDone
			c.close(nil)
		}
	default: // relaying: the answer cannot be replaced; the client's fault ends it
		c.close(ErrClientGone)
	}
}

// pauseReads stops reading the client, watching only for a hang-up.
func (c *clientConn) pauseReads() {
	if !c.readPaused {
		c.readPaused = true
		c.setEvents()
	}
}

func (c *clientConn) resumeReads() {
	if c.readPaused {
		c.readPaused = false
		c.setEvents()
	}
}
