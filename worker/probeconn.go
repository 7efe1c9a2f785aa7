package worker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// probeConn is the one connection a worker keeps between probes (health checks, load polls):
// a probe of every worker every few seconds would otherwise dial a connection each time.
// It is a bare net.Conn, not a HostClient's pool: an idle HostClient connection costs a
// cleaner goroutine per worker, an idle net.Conn only its file descriptor.
type probeConn struct {
	mu     sync.Mutex
	idle   net.Conn // nil: none kept
	closed bool     // the worker left the registry: nothing is kept any more
}

// take returns the kept connection, or nil.
func (p *probeConn) take() net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.idle
	p.idle = nil
	return c
}

// keep keeps c for the next probe, or closes it when one is kept already (two probes ran at
// once) or the worker is gone.
func (p *probeConn) keep(c net.Conn) {
	p.mu.Lock()
	if p.idle == nil && !p.closed {
		p.idle, c = c, nil
	}
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// close closes the kept connection and keeps none from now on.
func (p *probeConn) close() {
	p.mu.Lock()
	c := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Probe sends req (a GET of one of the worker's routes: its URI names the worker) and reads
// the answer into resp, all within timeout, on the worker's probe connection: the
// connection is kept open between probes, at most one per worker, so that a worker probed
// every few seconds is not dialled every time. A kept connection the worker closed meanwhile
// (an engine's idle timeout) is seen closed by a non-blocking peek before anything is
// written, or else by its failed answer, and replaced by a new one. No
// goroutine waits on a kept connection; a removed worker's is closed.
//
// The health checker and the load monitor probe through it; requests are not routed
// through it.
func (w *Worker) Probe(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if c := w.probe.take(); c != nil && !idleClosed(c) {
		err := w.exchange(c, req, resp, deadline)
		if err == nil || isTimeout(err) {
			return err
		}
		// Most likely closed by the worker while idle: once more on a new connection.
	}
	c, err := w.dialProbe(deadline)
	if err != nil {
		return err
	}
	return w.exchange(c, req, resp, deadline)
}

// exchange writes req on c and reads resp, then keeps c for the next probe when the answer
// leaves it reusable, else closes it.
func (w *Worker) exchange(c net.Conn, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		_ = c.Close()
		return err
	}
	bw := probeWriters.Get().(*bufio.Writer)
	bw.Reset(c)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	probeWriters.Put(bw)
	if err != nil {
		_ = c.Close()
		return err
	}
	br := probeReaders.Get().(*bufio.Reader)
	br.Reset(c)
	err = resp.ReadLimitBody(br, w.Client.MaxResponseBodySize)
	// Bytes beyond the answer mean the worker does not speak HTTP/1.1 as it should: the next
	// answer would not be the next request's.
	reusable := err == nil && br.Buffered() == 0 && !resp.ConnectionClose() && !req.ConnectionClose()
	br.Reset(nil)
	probeReaders.Put(br)
	if !reusable {
		_ = c.Close()
		return err
	}
	w.probe.keep(c)
	return nil
}

// dialProbe dials the worker as its HostClient does (TLS inside for an https worker), within
// the probe's deadline.
func (w *Worker) dialProbe(deadline time.Time) (net.Conn, error) {
	timeout := time.Until(deadline)
	dial := w.dial
	if dial == nil {
		dial = func(addr string) (net.Conn, error) { return workerDialer.DialTimeout(addr, timeout) }
	}
	c, err := wrapDial(dial, w.tlsConfig, timeout)(w.Host)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", w.URL, err)
	}
	return c, nil
}

// idleClosed reports whether the kept connection c can no longer carry a request: the worker
// closed it while idle (engines behind uvicorn do after 5 s) or sent bytes nobody asked for.
// One non-blocking peek; it then closes c. A TLS connection is not looked at: its first
// request finds out.
func idleClosed(c net.Conn) bool {
	wc, ok := c.(*conn)
	if !ok {
		return false
	}
	tc, ok := wc.Conn.(*net.TCPConn)
	if !ok {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	var peekErr error
	if err := raw.Read(func(fd uintptr) bool {
		_, _, peekErr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait: EAGAIN is the answer "open and quiet"
	}); err != nil {
		return false
	}
	if errors.Is(peekErr, syscall.EAGAIN) {
		return false // open, and nothing to read
	}
	_ = c.Close() // the worker closed it (0 bytes), sent bytes nobody asked for, or failed
	return true
}

// isTimeout reports whether err is a deadline that passed: a slow worker, not a closed
// connection, so not worth a second connection within the same probe.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool } // fasthttp.ErrTimeout is not a net.Error
	return errors.As(err, &te) && te.Timeout()
}

// probeReaders and probeWriters are the buffers of probes under way; a kept connection has
// none.
var (
	probeReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	probeWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1024) }}
)

// closeIdle closes the worker's idle connections, its HostClient's and its probe connection,
// when it leaves the registry.
func (w *Worker) closeIdle() {
	w.Client.CloseIdleConnections()
	w.probe.close()
}
