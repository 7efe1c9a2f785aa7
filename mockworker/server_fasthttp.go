package mockworker

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// fasthttpServer serves each worker with its own fasthttp.Server: one goroutine per
// connection, streams written from fasthttp's body-stream goroutine.
type fasthttpServer struct {
	done    <-chan struct{}
	servers []*fasthttp.Server
	lns     []net.Listener
	wg      sync.WaitGroup
	bufs    sync.Pool // *[]byte response scratch
}

func newFastHTTPServer(done <-chan struct{}) *fasthttpServer {
	return &fasthttpServer{done: done}
}

func (s *fasthttpServer) serve(ws []*Worker, lns []net.Listener) error {
	s.lns = lns
	for i, w := range ws {
		srv := &fasthttp.Server{
			Handler:               s.handler(w),
			Name:                  "mockworker",
			NoDefaultServerHeader: true,
			NoDefaultDate:         true,
			NoDefaultContentType:  true,
			CloseOnShutdown:       true,
			Logger:                quietFastHTTPLogger{},
		}
		s.servers = append(s.servers, srv)
		ln := lns[i]
		s.wg.Go(func() { _ = srv.Serve(ln) })
	}
	return nil
}

func (s *fasthttpServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	// Closing the listeners ourselves also stops a Serve that had not yet started when
	// Shutdown ran (fasthttp's Shutdown only closes listeners Serve has registered).
	for _, ln := range s.lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, srv := range s.servers {
		if err := srv.ShutdownWithContext(ctx); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *fasthttpServer) handler(w *Worker) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Response.Header
		h.Set(headerWorkerID, w.id)
		rid := ctx.Request.Header.Peek(headerRequestID)
		if len(rid) > 0 {
			h.SetBytesV(headerRequestID, rid)
		}
		ex := exchange{
			method:    ctx.Method(),
			path:      ctx.Path(),
			body:      ctx.PostBody(),
			fault:     ctx.Request.Header.Peek(faultHeader),
			requestID: rid,
			trace:     ctx.Request.Header.Peek(headerTraceparent),
		}
		bp, _ := s.bufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		r := w.handle(&ex, (*bp)[:0])
		s.send(ctx, w, &r)
		*bp = r.body[:0]
		s.bufs.Put(bp)
	}
}

// send writes r; it owns finishing a tracked reply unless a stream writer takes that over.
// fasthttp cannot tell that a client went away before it writes to it: a hanging request is
// held until Close and a non-streamed engine answer is computed to its end.
func (s *fasthttpServer) send(ctx *fasthttp.RequestCtx, w *Worker, r *reply) {
	streaming := false
	if r.tracked {
		defer func() {
			if !streaming {
				w.finish()
			}
		}()
	}
	closing := func() { closeUnavailable(ctx) }
	if r.fault.reset {
		resetConn(ctx.Conn())
		return
	}
	if r.fault.hang {
		<-s.done
		closing()
		return
	}
	if r.delay > 0 && !sleepUntil(s.done, time.Now().Add(r.delay)) {
		closing()
		return
	}
	if r.pd != nil && r.pd.fetches() && !w.resolvePD(r, s.done, nil) {
		closing()
		return
	}
	ctx.SetStatusCode(r.status)
	ctx.SetContentType(r.contentType)
	if r.answer == nil {
		ctx.SetBody(r.body)
		return
	}
	limit, cut := r.tokenLimit()
	if !r.stream {
		s.sendWhole(ctx, w, r, limit, cut)
		return
	}
	streaming = true
	if cut {
		s.sendCut(ctx, w, *r, limit)
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	// The writer runs after the handler returns: it gets its own copy of the reply.
	ctx.SetBodyStreamWriter(s.streamWriter(w, *r, limit))
}

// closeUnavailable answers 503 and closes the connection: the fleet is closing.
func closeUnavailable(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	ctx.Error(errClosed.Error(), fasthttp.StatusServiceUnavailable)
}

// sendWhole answers r unstreamed once its first limit tokens are out; a cut answer resets the
// connection instead.
func (s *fasthttpServer) sendWhole(ctx *fasthttp.RequestCtx, w *Worker, r *reply, limit int, cut bool) {
	if r.fault.slowTTFT > 0 && !sleepUntil(s.done, time.Now().Add(r.fault.slowTTFT)) {
		closeUnavailable(ctx)
		return
	}
	src := w.startSource(r)
	have := 0
	for have < limit {
		avail, ok := src.await(have, s.done, nil)
		if !ok {
			src.abandon()
			closeUnavailable(ctx)
			return
		}
		have = min(avail, limit)
	}
	if cut {
		src.abandon()
		resetConn(ctx.Conn())
		return
	}
	r.answer.cachedTokens = src.cached()
	ctx.SetBody(r.answer.appendBody(r.body[:0]))
}

// streamWriter writes sr's first limit tokens as events, as they come; it finishes the
// request when it ends.
func (s *fasthttpServer) streamWriter(w *Worker, sr reply, limit int) func(*bufio.Writer) {
	done, a := s.done, sr.answer
	return func(bw *bufio.Writer) {
		defer w.finish()
		if sr.fault.slowTTFT > 0 && !sleepUntil(done, time.Now().Add(sr.fault.slowTTFT)) {
			return
		}
		src := w.startSource(&sr)
		var buf []byte
		have := 0
		for have < limit {
			avail, ok := src.await(have, done, nil)
			if !ok {
				src.abandon()
				return
			}
			avail = min(avail, limit)
			a.cachedTokens = src.cached()
			buf = buf[:0]
			for i := have; i < avail; i++ {
				buf = a.appendEvent(buf, i)
			}
			have = avail
			if _, err := bw.Write(buf); err != nil {
				src.abandon()
				return
			}
			if err := bw.Flush(); err != nil {
				src.abandon() // the client went away
				return
			}
		}
	}
}

// sendCut writes a stream that an abort-after fault cuts after limit tokens. fasthttp would
// always end a body stream properly, so the connection is hijacked and the answer written
// raw: headers, limit chunks, then a close with no terminating chunk.
func (s *fasthttpServer) sendCut(ctx *fasthttp.RequestCtx, w *Worker, r reply, limit int) {
	rid := append([]byte(nil), ctx.Request.Header.Peek(headerRequestID)...)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer w.finish()
		defer c.Close()
		if _, err := c.Write(w.appendHead(nil, &r, rid, false, false)); err != nil {
			return
		}
		if r.fault.slowTTFT > 0 && !sleepUntil(s.done, time.Now().Add(r.fault.slowTTFT)) {
			return
		}
		src := w.startSource(&r)
		defer src.abandon()
		var buf []byte
		for have := 0; have < limit; {
			avail, ok := src.await(have, s.done, nil)
			if !ok {
				return
			}
			avail = min(avail, limit)
			r.answer.cachedTokens = src.cached()
			buf = buf[:0]
			for i := have; i < avail; i++ {
				buf = appendChunk(buf, r.answer, i)
			}
			have = avail
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
}

// resetConn closes c with a TCP reset (SO_LINGER 0) when it is a TCP connection (under TLS
// too).
func resetConn(c net.Conn) {
	raw := c
	if tc, ok := c.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// quietFastHTTPLogger drops fasthttp's log lines (injected resets make it complain).
type quietFastHTTPLogger struct{}

func (quietFastHTTPLogger) Printf(string, ...any) {}
