package mockworker

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// http2Preface is how every HTTP/2 (and so gRPC) connection opens.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// sniffTimeout bounds how long a new connection may take to show which protocol it speaks.
const sniffTimeout = 10 * time.Second

// portSplitter shares a gRPC worker's port between gRPC and a small HTTP/1.1 side for the
// routes a test drives a fleet with (admin configuration, health, loads, metrics, info): a
// connection that opens with the HTTP/2 preface goes to gRPC, any other to HTTP.
type portSplitter struct {
	ln          net.Listener
	grpc, http1 *connQueue
	mu          sync.Mutex
	sniffing    map[net.Conn]struct{} // closed by close: a silent client holds no goroutine
	closed      bool
	wg          sync.WaitGroup
}

func newPortSplitter(ln net.Listener) *portSplitter {
	s := &portSplitter{ln: ln, grpc: newConnQueue(ln.Addr()), http1: newConnQueue(ln.Addr()), sniffing: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	return s
}

func (s *portSplitter) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.grpc.Close()
			s.http1.Close()
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			continue
		}
		s.sniffing[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() { s.sniff(c) })
	}
}

// sniff reads until the bytes stop matching the HTTP/2 preface (or match all of it) and hands
// the connection, those bytes replayed, to its side.
func (s *portSplitter) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	buf := make([]byte, 0, len(http2Preface))
	isH2 := true
	for isH2 && len(buf) < len(http2Preface) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		isH2 = bytes.HasPrefix([]byte(http2Preface), buf)
		if err != nil {
			s.drop(c)
			_ = c.Close()
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	s.drop(c)
	pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(buf), c)}
	q := s.http1
	if isH2 {
		q = s.grpc
	}
	if !q.put(pc) {
		_ = c.Close()
	}
}

func (s *portSplitter) drop(c net.Conn) {
	s.mu.Lock()
	delete(s.sniffing, c)
	s.mu.Unlock()
}

// close stops accepting, cuts the connections still being sniffed and waits for its goroutines.
func (s *portSplitter) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.sniffing {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.grpc.Close()
	s.http1.Close()
	s.wg.Wait()
}

// connQueue is a net.Listener fed by the splitter.
type connQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// prefixConn replays the sniffed bytes before the rest of the connection.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// grpcHTTPRoutes are the HTTP routes a gRPC worker keeps: generation is gRPC's.
var grpcHTTPRoutes = map[string]bool{
	"/health": true, "/health_generate": true, "/v1/models": true, "/model_info": true,
	"/get_model_info": true, "/v1/loads": true, "/metrics": true, "/admin/config": true, "/admin/trace": true,
	"/get_server_info": true, "/flush_cache": true,
}

// adminHandler serves grpcHTTPRoutes with the HTTP worker's own handler; every other path
// answers 404 naming the gRPC service.
func adminHandler(w *Worker) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !grpcHTTPRoutes[r.URL.Path] {
			http.Error(rw, "this mockworker serves generation over gRPC only (--protocol grpc); HTTP has "+
				"/health, /v1/loads, /metrics, /admin/config and the info routes", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		ex := exchange{method: []byte(r.Method), path: []byte(r.URL.Path), body: body}
		rep := w.handle(&ex, nil)
		if rep.tracked {
			w.finish() // none of these routes generates; kept exact all the same
		}
		rw.Header().Set("Content-Type", rep.contentType)
		rw.Header().Set(headerWorkerID, w.id)
		rw.Header().Set("Content-Length", strconv.Itoa(len(rep.body)))
		rw.WriteHeader(rep.status)
		_, _ = rw.Write(rep.body)
	})
}
