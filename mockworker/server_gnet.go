package mockworker

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"

	"github.com/smg-go/smg/internal/http1"
)

// gnetServer serves every worker of a fleet from one set of gnet event loops. Connections are
// accepted by one goroutine per worker's net.Listener (so that port 0 works and each worker
// knows its address) and enrolled into a gnet client engine, which then owns their I/O.
//
// Instant answers are written from the event loop in the OnTraffic call that read the request,
// all pipelined answers of one read in a single write. A delayed, hanging or paced answer
// moves to a goroutine that writes with AsyncWrite; the connection reads no further request
// until that answer is complete (HTTP/1.1 answers in order).
type gnetServer struct {
	gnet.BuiltinEventEngine
	done    <-chan struct{}
	loops   int
	cli     *gnet.Client
	lns     []net.Listener
	accepts sync.WaitGroup // accept goroutines
	async   sync.WaitGroup // delayed, hanging and paced answers
}

// gnetConn is the per-connection state, touched only by the event loop except gone.
type gnetConn struct {
	w         *Worker
	busy      bool          // an async answer is in progress
	continued bool          // "100 Continue" was sent for the request being read
	gone      chan struct{} // closed by OnClose
	out       []byte        // answers of the current OnTraffic call
	chunked   []byte        // decoded chunked request body
	scratch   []byte        // response body scratch
	// need is the size of the request being read once its head named a Content-Length: until
	// that much is buffered there is nothing to parse. Peek(-1) copies the whole inbound
	// buffer into one slice when it spans gnet's ring and list buffers, so parsing on every
	// read event made receiving a large body quadratic (a 48 MiB body took 25 s).
	need int
}

func newGnetServer(done <-chan struct{}, loops int) *gnetServer {
	return &gnetServer{done: done, loops: loops}
}

func (s *gnetServer) serve(ws []*Worker, lns []net.Listener) error {
	cli, err := gnet.NewClient(s,
		gnet.WithNumEventLoop(s.loops),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(quietLogger{}),
		gnet.WithLogLevel(logging.ErrorLevel))
	if err != nil {
		return err
	}
	if err := cli.Start(); err != nil {
		return err
	}
	s.cli, s.lns = cli, lns
	for i, ln := range lns {
		w := ws[i]
		s.accepts.Go(func() { s.accept(ln, w) })
	}
	return nil
}

func (s *gnetServer) accept(ln net.Listener, w *Worker) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by close()
		}
		st := &gnetConn{w: w, gone: make(chan struct{})}
		// EnrollContext duplicates the socket into the event loop and closes c.
		if _, err := s.cli.EnrollContext(c, st); err != nil {
			_ = c.Close()
		}
	}
}

func (s *gnetServer) close() error {
	var errs []error
	for _, ln := range s.lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.accepts.Wait()
	// Stop the event loops before waiting for the async answers: only the loops start them,
	// and a WaitGroup must not gain members while Wait runs. They return promptly: done is
	// closed, and their connections are gone.
	errs = append(errs, s.cli.Stop())
	s.async.Wait()
	return errors.Join(errs...)
}

// OnClose releases the goroutine of an async answer on this connection, if any.
func (s *gnetServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	if st, ok := c.Context().(*gnetConn); ok {
		close(st.gone)
	}
	return gnet.None
}

// OnTraffic answers every complete request buffered on c.
func (s *gnetServer) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*gnetConn)
	action := s.drain(c, st)
	if len(st.out) > 0 {
		_, _ = c.Write(st.out)
		st.out = st.out[:0]
	}
	return action
}

func (s *gnetServer) drain(c gnet.Conn, st *gnetConn) gnet.Action {
	var req httpRequest
	for !st.busy {
		if c.InboundBuffered() < st.need {
			return gnet.None
		}
		buf, _ := c.Peek(-1)
		if len(buf) == 0 {
			return gnet.None
		}
		n, err := parseHTTPRequest(buf, &req, &st.chunked)
		if err != nil {
			var pe *http1.Error
			errors.As(err, &pe)
			st.out = st.w.appendPlain(st.out, pe.Status, pe.Reason, nil)
			return gnet.Close
		}
		if n == 0 {
			st.need = req.need
			if req.expectContinue && !st.continued {
				st.continued = true
				st.out = append(st.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
			}
			return gnet.None
		}
		st.continued, st.need = false, 0
		ex := exchange{method: req.method, path: req.path, body: req.body, fault: req.fault, requestID: req.requestID, trace: req.trace}
		r := st.w.handle(&ex, st.scratch[:0])
		head := string(req.method) == "HEAD"
		if r.fault.reset {
			// SO_LINGER 0: close sends a TCP reset and drops what is unsent.
			st.w.finish()
			_ = c.SetLinger(0)
			st.out = st.out[:0]
			return gnet.Close
		}
		if r.waits(st.w.cfg.TokenInterval) {
			st.busy = true
			a := &asyncAnswer{s: s, c: c, st: st, r: r, keepAlive: req.keepAlive, head: head,
				requestID: append([]byte(nil), req.requestID...)}
			if r.answer == nil {
				a.r.body = append([]byte(nil), r.body...)
			}
			_, _ = c.Discard(n)
			s.async.Go(a.run)
			return gnet.None
		}
		cut := s.appendInstant(st, &r, req.requestID, req.keepAlive, head)
		if r.tracked {
			st.w.finish()
		}
		st.scratch = r.body[:0]
		_, _ = c.Discard(n)
		if cut || !req.keepAlive {
			return gnet.Close
		}
	}
	return gnet.None
}

// appendInstant renders an answer that is ready now into st.out. It reports whether the
// connection must then be cut (an abort-after fault).
func (s *gnetServer) appendInstant(st *gnetConn, r *reply, requestID []byte, keepAlive, head bool) (cut bool) {
	if r.answer == nil {
		st.out = st.w.appendHead(st.out, r, requestID, keepAlive, head)
		if !head {
			st.out = append(st.out, r.body...)
		}
		return false
	}
	a := r.answer
	if r.fault.abort && r.fault.abortAfter < a.outputTokens {
		if !r.stream {
			return true // a non-streamed answer is cut before its first byte
		}
		st.out = st.w.appendHead(st.out, r, requestID, keepAlive, head)
		for i := range r.fault.abortAfter {
			st.out = appendChunk(st.out, a, i)
		}
		return true
	}
	if !r.stream {
		r.body = a.appendBody(r.body[:0])
		r.answer = nil
		return s.appendInstant(st, r, requestID, keepAlive, head)
	}
	st.out = st.w.appendHead(st.out, r, requestID, keepAlive, head)
	if !head {
		for i := range a.outputTokens {
			st.out = appendChunk(st.out, a, i)
		}
		st.out = append(st.out, "0\r\n\r\n"...)
	}
	return false
}

// appendHead writes the status line and headers of r. A stream uses chunked encoding, every
// other answer a Content-Length.
func (w *Worker) appendHead(dst []byte, r *reply, requestID []byte, keepAlive, head bool) []byte {
	dst = http1.AppendStatusLine(dst, r.status)
	dst = append(dst, "Content-Type: "...)
	dst = append(dst, r.contentType...)
	if r.stream {
		dst = append(dst, "\r\nTransfer-Encoding: chunked\r\nCache-Control: no-cache"...)
	} else {
		dst = append(dst, "\r\nContent-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(r.body)), 10)
	}
	dst = append(dst, "\r\n"+headerWorkerID+": "...)
	dst = append(dst, w.id...)
	if len(requestID) > 0 {
		dst = append(dst, "\r\n"+headerRequestID+": "...)
		dst = append(dst, requestID...)
	}
	if !keepAlive {
		dst = append(dst, "\r\nConnection: close"...)
	}
	return append(dst, "\r\n\r\n"...)
}

// appendPlain writes a complete plain-text answer (parser errors, closing worker).
func (w *Worker) appendPlain(dst []byte, status int, msg string, requestID []byte) []byte {
	r := reply{status: status, contentType: contentText, body: []byte(msg)}
	dst = w.appendHead(dst, &r, requestID, false, false)
	return append(dst, msg...)
}

// appendChunk writes token i's server-sent event(s) as one HTTP chunk.
func appendChunk(dst []byte, a *answer, i int) []byte {
	// Reserve a fixed-width size field so the event is rendered once, in place.
	const width = 6 // 16 MiB of hex; an event is far smaller
	mark := len(dst)
	dst = append(dst, "000000\r\n"...)
	dst = a.appendEvent(dst, i)
	size := len(dst) - mark - width - 2
	for j := width - 1; j >= 0; j-- {
		dst[mark+j] = "0123456789abcdef"[size&0xf]
		size >>= 4
	}
	return append(dst, "\r\n"...)
}

// asyncAnswer is an answer that waits: delayed, hanging, paced, slow to its first token or
// computed by the engine model. It runs on its own goroutine and writes with AsyncWrite; its
// last write's callback, on the event loop, clears busy and resumes reading pipelined
// requests.
type asyncAnswer struct {
	s         *gnetServer
	c         gnet.Conn
	st        *gnetConn
	r         reply // r.body is the answer's own copy
	requestID []byte
	keepAlive bool
	head      bool // a HEAD request: headers only
	finished  bool // Worker.finish was called
}

func (a *asyncAnswer) run() {
	if a.r.tracked {
		// finish runs before the last write (see end) or, when the answer is abandoned, here.
		defer func() {
			if !a.finished {
				a.st.w.finish()
			}
		}()
	}
	r, w := &a.r, a.st.w
	done, gone := a.s.done, a.st.gone
	if r.fault.hang {
		select {
		case <-done:
		case <-gone:
		}
		return
	}
	if r.delay > 0 && !sleepUntilOr(done, gone, time.Now().Add(r.delay)) {
		return
	}
	if r.pd != nil && r.pd.fetches() && !w.resolvePD(r, done, gone) {
		return
	}
	if r.answer == nil {
		out := w.appendHead(nil, r, a.requestID, a.keepAlive, a.head)
		if !a.head {
			out = append(out, r.body...)
		}
		a.end(out, false)
		return
	}
	if r.stream {
		// Headers go at once, as a real engine's do; tokens follow.
		if err := a.c.AsyncWrite(w.appendHead(nil, r, a.requestID, a.keepAlive, a.head), nil); err != nil {
			return
		}
	}
	if r.fault.slowTTFT > 0 && !sleepUntilOr(done, gone, time.Now().Add(r.fault.slowTTFT)) {
		return
	}
	src := w.startSource(r)
	limit, cut := r.tokenLimit()
	out, ok := a.relayTokens(src, limit)
	if !ok {
		src.abandon()
		return
	}
	ans := r.answer
	switch {
	case cut:
		src.abandon() // the engine stops computing a sequence nobody reads
		a.end(out, true)
	case r.stream:
		if !a.head {
			out = append(out, "0\r\n\r\n"...)
		}
		a.end(out, false)
	default:
		ans.cachedTokens = src.cached()
		body := ans.appendBody(nil)
		r.body = body
		out = w.appendHead(nil, r, a.requestID, a.keepAlive, a.head)
		if !a.head {
			out = append(out, body...)
		}
		a.end(out, false)
	}
}

// relayTokens waits for the answer's first limit tokens, writing a streamed answer's chunks
// as they come; it returns the chunks not written yet. ok is false when the wait or a write
// failed: the client or the fleet went away.
func (a *asyncAnswer) relayTokens(src tokenSource, limit int) (out []byte, ok bool) {
	r := &a.r
	have := 0
	for have < limit {
		avail, ok := src.await(have, a.s.done, a.st.gone)
		if !ok {
			return nil, false
		}
		avail = min(avail, limit)
		if r.stream && !a.head {
			r.answer.cachedTokens = src.cached()
			for i := have; i < avail; i++ {
				out = appendChunk(out, r.answer, i)
			}
		}
		have = avail
		if have < limit && len(out) > 0 {
			if err := a.c.AsyncWrite(out, nil); err != nil {
				return nil, false
			}
			out = nil
		}
	}
	return out, true
}

// end finishes the request and writes the answer's last bytes; on the event loop it then
// closes the connection (cut, or no keep-alive) or resumes reading. The request finishes
// first so that a client holding the complete answer never sees it counted as active.
func (a *asyncAnswer) end(last []byte, cut bool) {
	if a.r.tracked {
		a.finished = true
		a.st.w.finish()
	}
	_ = a.c.AsyncWrite(last, func(c gnet.Conn, err error) error {
		if err != nil {
			return nil
		}
		if cut || !a.keepAlive {
			return c.Close()
		}
		a.st.busy = false
		if c.InboundBuffered() > 0 {
			return c.Wake(nil)
		}
		return nil
	})
}

// quietLogger drops gnet's log lines: the fleet reports its own errors.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(string, ...any) {}
