package evloop

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smg-go/smg/internal/http1"
)

// Client connection states.
const (
	stateIdle   = iota // waiting for (the rest of) a request
	stateBusy          // an exchange is running
	stateClosed        // closed; recycled once no goroutine holds its exchange
)

// Timer kinds of a client connection.
const (
	timerRead   = iota // a request has started arriving and must be complete by then
	timerIdle          // keep-alive connection without a request
	timerLinger        // a refused connection's lingering close ends
)

// lingerTimeout bounds a lingering close. When the server refuses a request before reading all
// of it (a head past MaxHeaderSize, a body past MaxBodySize, a malformed request), the client
// may still be sending; closing a socket with unread input makes the kernel answer with a
// reset, which can destroy the answer before the client read it. Like nginx's
// lingering_close, such a connection is
// half-closed once the answer is sent and its input discarded until the client closes its
// side or lingerTimeout passes (a time bound, like nginx's lingering_time: a byte bound would
// reset exactly the clients that send the most).
const lingerTimeout = 2 * time.Second

// ErrClientGone ends an exchange whose client closed its connection or reset it.
var ErrClientGone = errors.New("the client closed the connection")

const (
	initialIn = 4 << 10
	// Sockets are watched edge-triggered (readAgain in loop.go says how nothing is missed).
	baseEvents  = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET
	readEvents  = unix.EPOLLIN
	writeEvents = unix.EPOLLOUT
)

// clientConn is one client connection, owned by its loop.
type clientConn struct {
	l          *loop
	fd         int
	in         []byte // received, unparsed or being served
	reqLen     int    // bytes of in the running exchange's request occupies
	out        []byte // to send
	sent       int    // bytes of out already sent
	state      uint8
	events     uint32
	readPaused bool
	dirty      bool
	again      bool // queued to be read again (loop.readAgain)
	peerClosed bool // EPOLLRDHUP seen: every read is followed by another until the end
	closeAfter bool // close once out is sent (no keep-alive, refused request, draining)
	continued  bool // "100 Continue" was sent for the request being read
	resuming   bool // queued to parse a pipelined request
	linger     bool // refused: close with a lingering close once the answer is sent
	lingering  bool // half-closed, discarding input until the client closes or the timer
	t          timer
	scratch    []byte // decoded chunked request body
	reserved   int    // bytes of in taken from Config.Reserve
	// outReserved is the Config.HeldReserve budget of a held answer copied into out
	// (DeliverHeld, DeliverCall): returned once out is sent.
	outReserved int
	x           Exchange
}

func (l *loop) open(fd int) {
	c := takeFree(&l.free)
	if c == nil {
		c = &clientConn{l: l}
		c.t = unarmed(c)
		c.x.init(c)
	}
	c.fd, c.state, c.events = fd, stateIdle, baseEvents
	if err := l.add(fd, baseEvents, c); err != nil {
		_ = unix.Close(fd)
		l.s.conns.Add(-1)
		l.free = append(l.free, c)
		return
	}
	l.conns++
	l.timers.arm(&c.t, l.now+int64(l.s.cfg.IdleTimeout), timerIdle)
}

func (c *clientConn) onEvent(ev uint32) {
	if c.state == stateClosed {
		return
	}
	if ev == evAgain {
		switch {
		case c.lingering:
			c.discard()
		case !c.readPaused: // a paused connection is read again when it resumes (setEvents)
			c.read()
		}
		return
	}
	if ev&unix.EPOLLRDHUP != 0 {
		c.peerClosed = true
	}
	if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		c.close(ErrClientGone)
		return
	}
	if ev&writeEvents != 0 {
		c.flush()
	}
	if c.lingering {
		c.discard()
		return
	}
	if ev&(readEvents|unix.EPOLLRDHUP) != 0 && c.state != stateClosed {
		if c.readPaused { // only EPOLLRDHUP is watched: the client hung up
			c.close(ErrClientGone)
			return
		}
		c.read()
	}
}

func (c *clientConn) onTimer(kind uint8) {
	switch kind {
	case timerIdle:
		if c.state == stateIdle {
			c.close(nil)
		}
	case timerRead:
		switch {
		case c.state == stateIdle:
			c.reject(&ParseError{Status: 408, Reason: "timed out reading the request"})
		case c.state == stateBusy && c.x.bodyIn:
			c.x.clientBodyFailed(&ParseError{Status: 408, Reason: "timed out reading the request body"})
		}
	case timerLinger:
		c.close(nil)
	}
}

// startLinger half-closes a refused connection whose answer is sent and discards what the
// client still sends, for at most lingerTimeout.
func (c *clientConn) startLinger() {
	c.linger = false
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		c.close(nil)
		return
	}
	c.lingering, c.readPaused = true, false
	c.setEvents()
	c.l.timers.arm(&c.t, c.l.now+int64(lingerTimeout), timerLinger)
}

// discard reads and drops what a lingering connection's client sends; its end (or an error)
// closes the connection.
func (c *clientConn) discard() {
	var buf [4096]byte
	n, err := unix.Read(c.fd, buf[:])
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if err != nil || n == 0 {
		c.close(nil)
		return
	}
	if n == len(buf) || c.peerClosed {
		c.l.readAgain(c)
	}
}

// read reads once: the socket was reported readable, so one read takes what is there and
// the next epoll_wait says when there is more (no read until EAGAIN).
func (c *clientConn) read() {
	if c.state == stateBusy && c.x.bodyIn {
		c.readBody() // the rest of a streamed body (stream.go)
		return
	}
	cfg := &c.l.s.cfg
	if len(c.in) == cap(c.in) {
		if c.state == stateBusy {
			// A pipelined request fills the buffer while the exchange runs: stop reading
			// until it ends, watching only for a hang-up.
			c.readPaused = true
			c.setEvents()
			return
		}
		limit := cfg.MaxHeaderSize + cfg.MaxBodySize + 4096
		if cap(c.in) >= limit {
			c.reject(http1.ErrBodyTooLarge)
			return
		}
		size := min(max(2*cap(c.in), initialIn), limit)
		if need := c.x.req.Need(); need > cap(c.in) && c.state == stateIdle {
			size = min(size, need) // the head declared the length: no more than that
		}
		if cfg.Reserve != nil && size > initialIn {
			delta := size - max(cap(c.in), initialIn)
			if !cfg.Reserve(delta) {
				c.reject(errBodyMemory)
				return
			}
			c.reserved += delta
		}
		c.in = grow(c.in, size)
	}
	n := c.readClient(c.in[len(c.in):cap(c.in)])
	if n == 0 {
		return
	}
	c.in = c.in[:len(c.in)+n]
	if c.state == stateIdle {
		if c.closeAfter { // answered, closing: nothing more is served (the rest of a body)
			c.in = c.in[:0]
			return
		}
		c.parse()
	}
}

// grow returns b with capacity n, its bytes kept.
func grow(b []byte, n int) []byte {
	nb := make([]byte, len(b), n)
	copy(nb, b)
	return nb
}

// parse starts an exchange when c.in holds a whole request.
func (c *clientConn) parse() {
	cfg := &c.l.s.cfg
	x := &c.x
	n, err := http1.ParseRequest(c.in, &x.req, &c.scratch, cfg.MaxHeaderSize, cfg.MaxBodySize)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			pe = http1.ErrBadRequestLine
		}
		c.reject(pe)
		return
	}
	if x.req.HeadLen() > 0 && x.req.MissingHost() {
		c.reject(http1.ErrBadHost)
		return
	}
	if n == 0 {
		if c.startStreamed() {
			return
		}
		if x.req.ExpectContinue() && !c.continued && x.req.NumHeaders() > 0 {
			c.continued = true
			c.out = append(c.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
			c.markDirty()
		}
		if c.t.kind != timerRead || !c.t.armed() {
			c.l.timers.arm(&c.t, c.l.now+int64(cfg.ReadTimeout), timerRead)
		}
		return
	}
	c.continued = false
	c.l.timers.disarm(&c.t)
	c.reqLen, c.state = n, stateBusy
	if !x.req.KeepAlive() || c.l.drained {
		c.closeAfter = true
	}
	x.begin()
	cfg.Handler.Serve(x)
}

// reject answers a request the server refuses, through the handler, and closes after.
func (c *clientConn) reject(pe *ParseError) {
	c.l.timers.disarm(&c.t)
	c.state, c.closeAfter, c.linger = stateBusy, true, true
	c.reqLen = len(c.in)
	c.x.begin()
	c.x.req = Request{}
	c.l.s.cfg.Handler.Reject(&c.x, pe.Status, pe.Reason)
	if c.x.phase != phaseDone { // the handler did not answer: close without one
		c.x.phase = phaseDone
		c.close(nil)
	}
}

// exchangeDone readies the connection for its next request once an answer is complete.
func (c *clientConn) exchangeDone() {
	if c.state != stateBusy {
		return
	}
	if c.x.bodyIn {
		// The answer is complete before the client's streamed body: the rest of the body is
		// discarded by a lingering close.
		c.x.bodyIn = false
		c.closeAfter, c.linger = true, true
		c.l.timers.disarm(&c.t)
	}
	c.state = stateIdle
	c.markDirty()
	if c.closeAfter {
		return // flush closes it once out is sent
	}
	rest := copy(c.in, c.in[c.reqLen:])
	c.in, c.reqLen = c.in[:rest], 0
	if c.reserved > 0 {
		// The request that grew the buffer has ended: its share of the body budget is
		// returned now, not when the keep-alive connection closes, and a buffer past 64 KiB
		// goes with it. One up to 64 KiB is kept unaccounted, as every connection may hold
		// a read buffer of --max-header-size (64 KiB): reallocating it per request would
		// cost the streamed-body path its zero allocations.
		c.l.s.cfg.Release(c.reserved)
		c.reserved = 0
		if cap(c.in) > 64<<10 && rest <= initialIn {
			in := make([]byte, rest, initialIn)
			copy(in, c.in)
			c.in = in
		}
	}
	if c.readPaused {
		c.readPaused = false
		c.setEvents()
	}
	if rest > 0 && !c.resuming {
		c.resuming = true
		c.l.soon = append(c.l.soon, c)
		return
	}
	c.l.timers.arm(&c.t, c.l.now+int64(c.l.s.cfg.IdleTimeout), timerIdle)
}

// runSoon parses a pipelined request once the previous exchange has ended.
func (c *clientConn) runSoon() {
	c.resuming = false
	if c.state == stateIdle && len(c.in) > 0 {
		c.parse()
	}
}

func (c *clientConn) markDirty() {
	if !c.dirty && c.state != stateClosed {
		c.dirty = true
		c.l.dirty = append(c.l.dirty, c)
	}
}

// pending is how many bytes of output wait to be sent.
func (c *clientConn) pending() int { return len(c.out) - c.sent }

// flush writes the pending output once. What the socket does not take waits for EPOLLOUT;
// past OutputLimit the worker's answer stops being read.
func (c *clientConn) flush() {
	if c.state == stateClosed {
		return
	}
	if err := writeOut(c.fd, c.out, &c.sent); err != 0 {
		c.close(ErrClientGone)
		return
	}
	limit := c.l.s.cfg.OutputLimit
	if c.pending() == 0 {
		c.out, c.sent = c.out[:0], 0
		if c.outReserved > 0 {
			c.releaseOut()
		}
		if c.events&writeEvents != 0 {
			c.setEvents()
		}
		if c.closeAfter && c.state == stateIdle && !c.lingering {
			if c.linger {
				c.startLinger()
				return
			}
			c.close(nil)
			return
		}
	} else {
		if c.sent > len(c.out)/2 { // keep the buffer from creeping
			n := copy(c.out, c.out[c.sent:])
			c.out, c.sent = c.out[:n], 0
		}
		if c.events&writeEvents == 0 {
			c.setEvents()
		}
		if c.pending() > limit {
			c.x.pauseUpstream()
		}
	}
	if c.pending() <= limit/2 {
		c.x.resumeUpstream()
	}
	if s := c.x.detached; s != nil {
		s.drained(c.pending())
	}
}

// setEvents registers the events the connection's state calls for.
func (c *clientConn) setEvents() {
	ev := uint32(unix.EPOLLRDHUP | unix.EPOLLET)
	if !c.readPaused {
		ev |= readEvents
	}
	if c.pending() > 0 {
		ev |= writeEvents
	}
	if ev != c.events {
		c.events = ev
		c.l.mod(c.fd, ev)
	}
}

// close closes the connection; a running exchange learns that its client is gone.
func (c *clientConn) close(err error) {
	if c.state == stateClosed {
		return
	}
	busy := c.state == stateBusy
	c.state = stateClosed
	c.l.timers.disarm(&c.t)
	if s := c.x.detached; s != nil {
		s.clientGone() // before the fd is closed: the stream's writer may be writing to it
	}
	c.l.remove(c.fd)
	c.fd = -1
	c.l.conns--
	c.l.s.conns.Add(-1)
	if busy {
		if err == nil {
			err = ErrClientGone
		}
		c.x.abort(err)
	}
	if c.x.detached == nil {
		c.recycle()
	}
}

// recycle returns a closed connection to its loop's free list.
func (c *clientConn) recycle() {
	c.in, c.out, c.sent, c.reqLen = c.in[:0], c.out[:0], 0, 0
	if c.reserved > 0 {
		c.l.s.cfg.Release(c.reserved)
		c.reserved = 0
	}
	if cap(c.in) > 64<<10 {
		c.in = nil
	}
	c.releaseOut()
	c.readPaused, c.closeAfter, c.continued, c.resuming = false, false, false, false
	c.peerClosed = false
	c.linger, c.lingering = false, false
	c.x.reset()
	c.l.free = append(c.l.free, c)
}

// releaseOut returns the budget of a held answer that out carried, and drops a large out:
// a keep-alive connection does not keep an answer's memory while it idles.
func (c *clientConn) releaseOut() {
	if c.outReserved > 0 {
		if f := c.l.s.cfg.HeldRelease; f != nil {
			f(c.outReserved)
		}
		c.outReserved = 0
	}
	if cap(c.out) > 256<<10 {
		c.out = nil
	}
}

// readClient reads what the client's socket holds into buf. It returns 0 when nothing is
// there yet (EAGAIN: the loop waits for readiness again) and when the client is gone, in
// which case the connection is closed.
func (c *clientConn) readClient(buf []byte) int {
	n, err := rawRead(c.fd, buf)
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return 0
	case err != 0 || n == 0:
		c.close(ErrClientGone)
		return 0
	}
	if n == len(buf) || c.peerClosed {
		c.l.readAgain(c)
	}
	return n
}
