package mockworker

import (
	"bufio"
	"context"
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
	wg      sync.WaitGroup
	bufs    sync.Pool // *[]byte response scratch
}

func newFastHTTPServer(done <-chan struct{}) *fasthttpServer {
	return &fasthttpServer{done: done}
}

func (s *fasthttpServer) serve(ws []*Worker, lns []net.Listener) error {
	for i, w := range ws {
		srv := &fasthttp.Server{
			Handler:               s.handler(w),
			Name:                  "mockworker",
			NoDefaultServerHeader: true,
			NoDefaultDate:         true,
			NoDefaultContentType:  true,
			CloseOnShutdown:       true,
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
	for _, srv := range s.servers {
		errs = append(errs, srv.ShutdownWithContext(ctx))
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
func (s *fasthttpServer) send(ctx *fasthttp.RequestCtx, w *Worker, r *reply) {
	streaming := false
	if r.tracked {
		defer func() {
			if !streaming {
				w.finish()
			}
		}()
	}
	if r.delay > 0 && !r.hang && !sleepUntil(s.done, time.Now().Add(r.delay)) {
		ctx.SetConnectionClose()
		ctx.Error(errClosed.Error(), fasthttp.StatusServiceUnavailable)
		return
	}
	if r.hang {
		// fasthttp cannot tell that the client went away; hold until the fleet closes.
		<-s.done
		ctx.SetConnectionClose()
		ctx.Error(errClosed.Error(), fasthttp.StatusServiceUnavailable)
		return
	}
	ctx.SetStatusCode(r.status)
	if r.contentType != "" {
		ctx.SetContentType(r.contentType)
	}
	if r.stream == nil {
		ctx.SetBody(r.body)
		return
	}
	streaming = true
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	a, interval, done := r.stream, w.cfg.TokenInterval, s.done
	ctx.SetBodyStreamWriter(func(bw *bufio.Writer) {
		defer w.finish()
		var buf []byte
		start := time.Now()
		for i := range a.outputTokens {
			if interval > 0 && !sleepUntil(done, start.Add(time.Duration(i+1)*interval)) {
				return
			}
			buf = a.appendEvent(buf[:0], i)
			if _, err := bw.Write(buf); err != nil {
				return
			}
			if interval > 0 {
				if err := bw.Flush(); err != nil {
					return
				}
			}
		}
	})
}
