package evloop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smg-go/smg/internal/clock"
)

// Config configures the event loops.
type Config struct {
	// Loops is the number of event loops, each on its own goroutine. Default GOMAXPROCS. A
	// waiting loop holds its P (wait.go): the process should run with SchedulerProcs(Loops)
	// (with fewer, the loops wait in Go's netpoller, at a system call or two more a wake-up).
	Loops int
	// MaxHeaderSize bounds a request head; a larger one gets 431. Default 64 KiB.
	MaxHeaderSize int
	// MaxBodySize bounds a request body; a larger one gets 413. Required.
	MaxBodySize int
	// ReadTimeout bounds reading one request. Default 60 s.
	ReadTimeout time.Duration
	// IdleTimeout closes keep-alive client connections idle this long. Default 120 s.
	IdleTimeout time.Duration
	// MaxConns caps client connections; past it the loop that accepts closes its oldest idle
	// keep-alive connection for the new one, or, with none idle, the new connection gets 503
	// and is closed. Default DefaultMaxConns(): at most 65,536, below RLIMIT_NOFILE.
	MaxConns int
	// OutputLimit bounds what a client connection may have unsent: past it the worker's
	// answer is no longer read until the client has taken half of it. Default 256 KiB.
	OutputLimit int
	// MaxHeldBody bounds an answer read whole before it is sent (a Forwarder's UpstreamHead
	// false, a Call): past it the attempt fails with ErrAnswerTooLarge, at the head when the
	// worker declares a longer Content-Length. Default 256 MiB.
	MaxHeldBody int
	// HeldReserve and HeldRelease, when set, account the buffers of answers read whole, and
	// their copies waiting in a client's output, against a budget shared with the caller: an
	// answer whose buffer cannot grow fails with ErrAnswerMemory. The budget is returned
	// when the answer is sent or its request ends, not when the connection closes.
	HeldReserve func(n int) bool
	HeldRelease func(n int)
	// UpstreamMaxConns caps the connections to one worker address, over all loops
	// (--max-connections-per-worker). Default 2048.
	UpstreamMaxConns int
	// UpstreamIdleTimeout closes idle connections to workers. Default 90 s.
	UpstreamIdleTimeout time.Duration
	// DialTimeout bounds connecting to a worker, and looking its host name up. Default 5 s.
	DialTimeout time.Duration
	// DNSTTL is how long a worker's looked-up address is used before it is looked up again
	// (the old one serves meanwhile); a failed lookup is retried after at most 1 s. Default
	// 30 s (nginx's resolver honours the record's TTL, Envoy's refreshes every 5 s; Go's
	// resolver does not report the TTL).
	DNSTTL time.Duration
	// LookupHost, when set, replaces the system resolver for workers' host names (tests).
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
	// WatchInterval is how often a HeadWatcher or CallWatcher is asked whether to keep
	// waiting for a worker's response head. Default 250 ms.
	WatchInterval time.Duration
	// StreamFailureTail ends a relayed chunked answer whose worker failed mid-body (an SSE
	// error event): the client gets a complete response instead of a cut connection.
	StreamFailureTail []byte
	// StreamBody, when set, accepts the requests whose body, when larger than StreamBodyOver
	// (0: any body), is served before it has arrived whole: Serve gets such a request once
	// the first StreamBodyOver bytes of its body are in (Exchange.Streamed; Body is that
	// head, decoded when chunked), and its Forward relays the rest to the worker as it
	// arrives (stream.go).
	StreamBody     func(r *Request) bool
	StreamBodyOver int
	// Handler serves the requests. Required.
	Handler Handler
	// Reserve and Release, when set, account the memory of request buffers past their
	// first 4 KiB against a budget shared with the caller: a request whose buffer cannot
	// grow gets 503 (Handler.Reject) and its connection closes.
	Reserve func(n int) bool
	Release func(n int)
	// ResolveAddr, when set, maps a Target.Addr to the address actually connected to (tests
	// stand workers with made-up addresses on loopback ports).
	ResolveAddr func(addr string) string
	// OnPanic is told about a panic in a Handler or Forwarder callback (with the stack
	// still unwinding: debug.Stack works); the connection concerned is closed.
	OnPanic func(p any)
	// Clock is the loops' time: the deadlines and timers they keep, Exchange.Now and
	// Exchange.Nanos. Default clock.Real; a clock.Fake makes a test's Advance fire them
	// (a waiting loop looks at a clock other than the system's every few milliseconds).
	Clock clock.Clock
}

// DefaultConfig returns the defaults above; the caller sets Handler and MaxBodySize. A zero
// setting is refused by Validate, not read as "the default".
func DefaultConfig() Config {
	return Config{
		Loops: runtime.GOMAXPROCS(0), MaxHeaderSize: 64 << 10, ReadTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, MaxConns: DefaultMaxConns(), OutputLimit: 256 << 10, MaxHeldBody: 256 << 20,
		UpstreamMaxConns: 2048, UpstreamIdleTimeout: 90 * time.Second, DialTimeout: 5 * time.Second, DNSTTL: 30 * time.Second,
		WatchInterval: 250 * time.Millisecond, Clock: clock.Real{},
	}
}

// DefaultMaxConns is the default cap on client connections: 65,536, or, when the process
// may open fewer descriptors (RLIMIT_NOFILE, read now), half of them less 64: every client
// connection may need a worker connection beside it, and 128 stay for listeners, probes,
// the mesh and logs. So the cap answers before accept runs out of descriptors (EMFILE).
func DefaultMaxConns() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= 2*65536+128 {
		return 65536
	}
	return max((int(rl.Cur)-128)/2, 16)
}

// Validate reports a configuration the server cannot run with.
func (c *Config) Validate() error {
	switch {
	case c.Handler == nil:
		return errors.New("evloop: Config.Handler is required")
	case c.Clock == nil:
		return errors.New("evloop: Config.Clock is required: start from evloop.DefaultConfig() (clock.Real)")
	case c.MaxBodySize <= 0:
		return errors.New("evloop: Config.MaxBodySize must be positive (--max-payload-size)")
	case c.Loops <= 0 || c.MaxHeaderSize <= 0 || c.MaxConns <= 0 || c.OutputLimit <= 0 || c.MaxHeldBody <= 0 || c.UpstreamMaxConns <= 0:
		return fmt.Errorf("evloop: Loops %d, MaxHeaderSize %d, MaxConns %d, OutputLimit %d, MaxHeldBody %d and UpstreamMaxConns %d must all be positive: start from evloop.DefaultConfig()",
			c.Loops, c.MaxHeaderSize, c.MaxConns, c.OutputLimit, c.MaxHeldBody, c.UpstreamMaxConns)
	case c.ReadTimeout <= 0 || c.IdleTimeout <= 0 || c.UpstreamIdleTimeout <= 0 || c.DialTimeout <= 0 || c.WatchInterval <= 0 || c.DNSTTL <= 0:
		return fmt.Errorf("evloop: ReadTimeout %v, IdleTimeout %v, UpstreamIdleTimeout %v, DialTimeout %v, WatchInterval %v and DNSTTL %v must all be positive: start from evloop.DefaultConfig()",
			c.ReadTimeout, c.IdleTimeout, c.UpstreamIdleTimeout, c.DialTimeout, c.WatchInterval, c.DNSTTL)
	}
	return nil
}

// Server serves HTTP/1.1 on event loops.
type Server struct {
	cfg      Config
	loops    []*loop
	next     atomic.Uint32 // round-robin cursor of accepted connections
	conns    atomic.Int64  // client connections open
	lnfd     int
	serving  chan struct{}
	done     chan struct{}
	draining atomic.Bool
	stopOnce sync.Once
	err      error
	// origin is the time of the clock's Nanos 0: the loops keep times as Nanos readings.
	origin time.Time
	// systemClock is set when Clock is clock.Real, which the kernel's waits follow.
	systemClock bool
	// upstreamConns counts connections per worker address over all loops.
	upstreamMu    sync.Mutex
	upstreamConns map[string]*upstreamCounter
}

// upstreamCounter is the connection count of one worker address, shared by the loops'
// pools of it (pools counts them: the entry goes with the last).
type upstreamCounter struct {
	n     atomic.Int32
	pools int
}

// New returns a server; Serve starts it.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	_, system := cfg.Clock.(clock.Real)
	return &Server{cfg: cfg, lnfd: -1, serving: make(chan struct{}), done: make(chan struct{}), upstreamConns: map[string]*upstreamCounter{},
		origin: clock.OriginOf(cfg.Clock), systemClock: system}, nil
}

// Serve serves the connections of ln until Shutdown. The listener stays the caller's to
// close; the loops accept from a duplicate of its socket.
func (s *Server) Serve(ln net.Listener) error {
	tl, ok := ln.(interface{ File() (*os.File, error) })
	if !ok {
		return fmt.Errorf("evloop: cannot serve a %T: the event loops need a TCP listener", ln)
	}
	f, err := tl.File()
	if err != nil {
		return fmt.Errorf("evloop: cannot take the listener's socket: %w", err)
	}
	s.lnfd, err = unix.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("evloop: cannot duplicate the listener's socket: %w", err)
	}
	if err := unix.SetNonblock(s.lnfd, true); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i := range s.cfg.Loops {
		l, err := newLoop(s, i)
		if err != nil {
			for _, l := range s.loops {
				l.closeFDs()
			}
			return err
		}
		s.loops = append(s.loops, l)
	}
	liveLoops.Add(int32(len(s.loops)))
	for _, l := range s.loops {
		wg.Go(l.run)
	}
	close(s.serving)
	wg.Wait()
	liveLoops.Add(-int32(len(s.loops)))
	_ = unix.Close(s.lnfd)
	close(s.done)
	return s.err
}

// Shutdown stops accepting connections, closes idle ones, lets every exchange in progress
// finish (streams included) until ctx ends, then stops the loops.
func (s *Server) Shutdown(ctx context.Context) error {
	select {
	case <-s.serving:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.draining.Store(true)
	for _, l := range s.loops {
		l.post(taskFunc(l.drain))
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for s.conns.Load() > 0 {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-tick.C:
		}
	}
	s.stopOnce.Do(func() {
		for _, l := range s.loops {
			l.post(taskFunc(l.stop))
		}
	})
	<-s.done
	return err
}

// OpenConnections counts the client connections open.
func (s *Server) OpenConnections() int64 { return s.conns.Load() }

// Loops returns the number of event loops.
func (s *Server) Loops() int { return s.cfg.Loops }

// upstreamCount returns the shared connection count of a worker address for a new pool.
func (s *Server) upstreamCount(addr string) *atomic.Int32 {
	s.upstreamMu.Lock()
	defer s.upstreamMu.Unlock()
	c := s.upstreamConns[addr]
	if c == nil {
		c = new(upstreamCounter)
		s.upstreamConns[addr] = c
	}
	c.pools++
	return &c.n
}

// releaseUpstreamCount is told that a pool of addr went (sweepPools).
func (s *Server) releaseUpstreamCount(addr string) {
	s.upstreamMu.Lock()
	defer s.upstreamMu.Unlock()
	if c := s.upstreamConns[addr]; c != nil {
		if c.pools--; c.pools <= 0 {
			delete(s.upstreamConns, addr)
		}
	}
}

// pollable is what a registered file descriptor belongs to.
type pollable interface {
	onEvent(events uint32)
}

// task is work posted to a loop from another goroutine.
type task interface{ run() }

type taskFunc func()

func (f taskFunc) run() { f() }

// discard releases what a task that will not run holds (a worker connection's socket).
func discard(t task) {
	if d, ok := t.(interface{ discard() }); ok {
		d.discard()
	}
}

// soon is work a loop runs after the event at hand, so that callbacks never re-enter the
// code that raised them.
type soon interface{ runSoon() }

// loop is one event loop: an epoll instance, the connections registered with it, their
// timers, and the tasks other goroutines post to it. Everything but the task queue is
// touched by the loop's goroutine only.
type loop struct {
	s    *Server
	idx  int
	epfd int
	evfd int
	// waitTS is the timeout of the blocking epoll_pwait2 (wait); a field, so that the
	// kernel is handed no pointer to the stack.
	waitTS    unix.Timespec
	lastYield int64 // when the loop last went through the Go scheduler (wait.go)
	// parks: the process has no P to spare for a loop waiting in the kernel, so the loop
	// waits in Go's netpoller instead (wait.go, park); decided at each yield.
	parks bool
	// park's state: epfd as a file of Go's netpoller (made at the first park), the park's
	// deadline (monotonic ns, 0 for none) and what the poll inside it found.
	poll        *os.File
	pollRaw     syscall.RawConn
	parkedUntil int64
	pollFn      func(uintptr) bool // l.pollOnce
	polled      int
	pollErr     unix.Errno
	events      [128]unix.EpollEvent
	fds         []pollable // by file descriptor
	timers      timerHeap
	now         int64 // monotonic ns, refreshed once per wake-up
	soon        []soon
	dirty       []*clientConn // client connections with output to flush after this wake-up
	again       []rereadable  // sockets to read again before the loop waits (readAgain)
	againNext   []rereadable
	pools       map[string]*hostPool
	conns       int // client connections of this loop
	free        []*clientConn
	calls       []*Call // released calls, for reuse
	bodyBuf     []byte  // a streamed request body is read through it (stream.go)
	// tlsPools are the pools of workers behind TLS (Target.TLS, tls.go).
	tlsPools map[string]*hostPool
	// callX and callGen are the exchange and request of the Call whose CallDone runs.
	callX   *Exchange
	callGen uint64
	// sched is a lone goroutine's wake-up (a pending task): the eventfd is written once.
	mu       sync.Mutex
	tasks    []task
	spare    []task
	signaled atomic.Bool
	dead     bool        // the loop stopped and closed its descriptors (guarded by mu)
	gone     atomic.Bool // dead, for the acceptors of other loops
	stopping bool
	drained  bool
	// While accept finds no descriptor (EMFILE, ENFILE), the loop stops watching the
	// listener for acceptPause, which doubles while it lasts (acceptExhausted).
	acceptPaused bool
	acceptPause  time.Duration
	acceptT      timer
	sweepT       timer // sweepPools
}

// nanos reads the loops' clock (Config.Clock).
func (s *Server) nanos() int64 { return s.cfg.Clock.Nanos() }

// timeOf is the time of n, a reading of the loops' clock.
func (s *Server) timeOf(n int64) time.Time { return s.origin.Add(time.Duration(n)) }

// nanosOf is t as a reading of the loops' clock.
func (s *Server) nanosOf(t time.Time) int64 { return int64(t.Sub(s.origin)) }

func newLoop(s *Server, idx int) (*loop, error) {
	l := &loop{s: s, idx: idx, epfd: -1, evfd: -1, pools: map[string]*hostPool{}, tlsPools: map[string]*hostPool{}}
	l.acceptT = unarmed(acceptResume{l})
	l.sweepT = unarmed(poolSweep{l})
	var err error
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("evloop: epoll_create1: %w", err)
	}
	if l.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		l.closeFDs()
		return nil, fmt.Errorf("evloop: eventfd: %w", err)
	}
	if err := l.add(l.evfd, unix.EPOLLIN, wakeup{l}); err != nil {
		l.closeFDs()
		return nil, err
	}
	// Every loop accepts; EPOLLEXCLUSIVE wakes one of them per connection, which then deals
	// the connection to the loops in turn.
	if err := l.add(s.lnfd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE, acceptor{l}); err != nil {
		l.closeFDs()
		return nil, err
	}
	l.now = l.s.nanos()
	l.timers.arm(&l.sweepT, l.now+int64(s.cfg.UpstreamIdleTimeout), 0)
	return l, nil
}

func (l *loop) closeFDs() {
	l.mu.Lock()
	l.dead = true // post writes the eventfd no more: its number may be reused
	l.gone.Store(true)
	pending := l.tasks
	l.tasks = nil
	l.mu.Unlock()
	for _, t := range pending {
		discard(t)
	}
	if l.evfd >= 0 {
		_ = unix.Close(l.evfd)
	}
	switch {
	case l.poll != nil:
		_ = l.poll.Close() // closes epfd
	case l.epfd >= 0:
		_ = unix.Close(l.epfd)
	}
}

func (l *loop) add(fd int, events uint32, p pollable) error {
	for fd >= len(l.fds) {
		l.fds = append(l.fds, nil)
	}
	l.fds[fd] = p
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := rawEpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != 0 {
		l.fds[fd] = nil
		return fmt.Errorf("evloop: epoll_ctl add: %w", err)
	}
	return nil
}

func (l *loop) mod(fd int, events uint32) {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	_ = rawEpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &ev)
}

// remove unregisters and closes fd.
func (l *loop) remove(fd int) {
	_ = rawEpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if fd < len(l.fds) {
		l.fds[fd] = nil
	}
	_ = unix.Close(fd)
}

// post hands t to the loop from any goroutine. A task posted after the loop stopped is
// dropped (discarded first if it holds something: a worker connection's socket).
func (l *loop) post(t task) {
	l.mu.Lock()
	if l.dead {
		l.mu.Unlock()
		discard(t)
		return
	}
	l.tasks = append(l.tasks, t)
	l.mu.Unlock()
	if l.signaled.CompareAndSwap(false, true) {
		var one = [8]byte{1}
		_, _ = rawWrite(l.evfd, one[:])
	}
}

func (l *loop) run() {
	for {
		n, err := l.wait()
		l.now = l.s.nanos()
		if err != nil {
			l.s.err = fmt.Errorf("evloop: epoll_wait: %w", err)
			l.stop()
		}
		for i := range n {
			ev := &l.events[i]
			if fd := int(ev.Fd); fd < len(l.fds) && l.fds[fd] != nil {
				l.dispatch(l.fds[fd], ev.Events)
			}
		}
		l.readAgainNow()
		l.timers.fire(l)
		l.runSoon()
		l.flush()
		if l.stopping {
			l.closeAll()
			return
		}
	}
}

// dispatch hands an event to its connection. A panic in a handler callback costs that
// connection, not the loop and every other connection on it.
func (l *loop) dispatch(p pollable, events uint32) {
	defer func() {
		if r := recover(); r != nil {
			l.soon = l.soon[:0]
			if f := l.s.cfg.OnPanic; f != nil {
				f(r)
			}
			// The exchange is ended as if its client had left, so that its forwarder still
			// settles what it holds; a second panic there is contained too.
			func() {
				defer func() { _ = recover() }()
				if x := l.callX; x != nil {
					// CallDone panicked: the request that made the call is ended, if its
					// connection still serves it.
					l.callX = nil
					if x.gen == l.callGen && x.c.state == stateBusy {
						x.c.close(nil)
					}
				}
				switch c := p.(type) {
				case *clientConn:
					c.close(nil)
				case *upstreamConn:
					switch o := c.owner.(type) {
					case *Exchange:
						o.c.close(nil)
					case *Call:
						o.upstreamFailed(&UpstreamError{Err: errPanicked})
					}
					c.close()
				}
			}()
		}
	}()
	p.onEvent(events)
	l.runSoon()
}

func (l *loop) runSoon() {
	for len(l.soon) > 0 {
		s := l.soon[0]
		copy(l.soon, l.soon[1:])
		l.soon[len(l.soon)-1] = nil
		l.soon = l.soon[:len(l.soon)-1]
		s.runSoon()
	}
}

// evAgain is the event a socket queued by readAgain is dispatched with: a bit epoll reports
// on no event (EPOLLET is a registration flag only).
const evAgain = unix.EPOLLET

// readAgain queues p, whose last read may have left bytes (or the end) in its socket, to be
// read once more before the loop waits again.
//
// Sockets are registered edge-triggered, as nginx registers them: epoll then forgets a
// socket once it has reported it, where level-triggered it puts it back on its ready list
// and polls it again in the next epoll_wait, which then runs a socket poll per event of the
// previous wake-up, the empty poll before a park included (measured: ~3% of the JSON closed
// loop's CPU in those polls; docs/benchmarks-history.md). A socket reads once per event as before
// (no read until EAGAIN); a read that filled its buffer, or one after the peer's FIN was
// reported, may have left something no new edge will announce, so the socket is read again
// before the loop waits, by this queue: what level-triggered epoll would have reported next.
// A socket that is paused (its buffers full) is not read; resuming it modifies its epoll
// registration, which reports it again if it is readable.
func (l *loop) readAgain(p rereadable) {
	if q := p.queuedAgain(); !*q {
		*q = true
		l.again = append(l.again, p)
	}
}

// rereadable is a socket readAgain can queue: its flag says whether it is queued.
type rereadable interface {
	pollable
	queuedAgain() *bool
}

func (c *clientConn) queuedAgain() *bool   { return &c.again }
func (u *upstreamConn) queuedAgain() *bool { return &u.again }

// readAgainNow reads the queued sockets once each; those their read queues again wait for
// the next wake-up, after the events that came meanwhile.
func (l *loop) readAgainNow() {
	if len(l.again) == 0 {
		return
	}
	batch := l.again
	l.again = l.againNext[:0]
	for i, p := range batch {
		batch[i] = nil
		*p.queuedAgain() = false
		l.dispatch(p, evAgain)
	}
	l.againNext = batch[:0]
}

// flush writes the output of every client connection that gained some in this wake-up: one
// write per connection and wake-up, however many worker reads fed it.
func (l *loop) flush() {
	for i, c := range l.dirty {
		c.dirty = false
		c.flush()
		l.dirty[i] = nil
	}
	l.dirty = l.dirty[:0]
}

func (l *loop) runTasks() {
	l.signaled.Store(false)
	l.mu.Lock()
	tasks := l.tasks
	l.tasks, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	for i, t := range tasks {
		t.run()
		tasks[i] = nil
		l.runSoon()
	}
	l.mu.Lock()
	if l.spare == nil {
		l.spare = tasks[:0]
	}
	l.mu.Unlock()
}

// wakeup is the loop's eventfd: other goroutines write it after posting a task.
type wakeup struct{ l *loop }

func (w wakeup) onEvent(uint32) {
	var buf [8]byte
	_, _ = rawRead(w.l.evfd, buf[:])
	w.l.runTasks()
}

// acceptor is the listening socket as one loop sees it.
type acceptor struct{ l *loop }

func (a acceptor) onEvent(uint32) {
	l := a.l
	fd, _, err := unix.Accept4(l.s.lnfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	if err != nil {
		switch err {
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			l.acceptExhausted()
		}
		return // EAGAIN: another loop took it
	}
	l.acceptPause = 0
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	s := l.s
	if s.draining.Load() {
		_, _ = unix.Write(fd, refusedAnswer)
		_ = unix.Close(fd)
		return
	}
	overCap := s.conns.Add(1) > int64(s.cfg.MaxConns)
	target := s.loops[int(s.next.Add(1))%len(s.loops)]
	if target.gone.Load() { // a loop that stopped (epoll failed) adopts nothing: serve it here
		target = l
	}
	// Past the cap the loop that adopts the connection makes room by closing one of its own
	// idle ones: shedding always on the accepting loop would empty it while the others fill,
	// until it had nothing left to shed and refused clients that idle connections blocked.
	adopt := adoption{target, fd, overCap}
	if target == l {
		adopt.run()
		return
	}
	target.post(adopt)
}

// acceptExhausted handles an accept that found no descriptor for a pending connection. The
// listener stays readable (it is watched level-triggered), so returning would wake the loop
// again at once and spin at 100% CPU serving nobody. Like nginx, which reuses idle keep-alive
// connections when its own run out, the loop closes its oldest idle connection, whose
// descriptor the next accept takes; with none idle, it stops watching the listener for a
// pause that doubles from 5 ms to 1 s while accept keeps failing (the backoff of Go's
// net/http), so the loops keep serving the connections they have.
func (l *loop) acceptExhausted() {
	if l.shedIdle() || l.acceptPaused || l.drained {
		return
	}
	l.acceptPaused = true
	_ = rawEpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.s.lnfd, nil)
	l.acceptPause = min(max(2*l.acceptPause, 5*time.Millisecond), time.Second)
	l.timers.arm(&l.acceptT, l.now+int64(l.acceptPause), 0)
}

// acceptResume watches the listener again after an accept pause.
type acceptResume struct{ l *loop }

func (a acceptResume) onTimer(uint8) {
	l := a.l
	if !l.acceptPaused {
		return
	}
	l.acceptPaused = false
	if l.drained || l.stopping {
		return
	}
	_ = l.add(l.s.lnfd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE, acceptor{l})
}

// shedIdle closes the loop's oldest idle keep-alive connection (no request under way, no
// byte of one received, none waiting in the socket) and reports whether there was one. A
// client of such a connection sees it closed between requests, which HTTP/1.1 clients
// retry on a new connection; a request already sent but not yet read is never dropped.
func (l *loop) shedIdle() bool {
	var oldest *clientConn
	for _, p := range l.fds {
		c, ok := p.(*clientConn)
		if !ok || c.state != stateIdle || len(c.in) > 0 || c.closeAfter || c.lingering || c.t.kind != timerIdle || !c.t.armed() {
			continue
		}
		if (oldest == nil || c.t.due < oldest.t.due) && !inputWaiting(c.fd) {
			oldest = c
		}
	}
	if oldest == nil {
		return false
	}
	oldest.close(nil)
	return true
}

// inputWaiting reports whether the client has sent bytes the loop has not read yet (its
// read event is still queued in this wake-up).
func inputWaiting(fd int) bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == nil && n > 0
}

var refusedAnswer = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 56\r\nConnection: close\r\n\r\nThe gateway is at its connection limit or shutting down.")

// adoption moves an accepted connection to the loop that serves it. overCap: the server
// was past MaxConns when it came; the loop closes one of its idle connections for it, or
// refuses it.
type adoption struct {
	l       *loop
	fd      int
	overCap bool
}

func (a adoption) run() {
	if a.overCap && !a.l.shedIdle() {
		a.l.s.conns.Add(-1)
		_, _ = unix.Write(a.fd, refusedAnswer)
		_ = unix.Close(a.fd)
		return
	}
	a.l.open(a.fd)
}

// discard closes a connection dealt to a loop that stopped before adopting it: its
// descriptor would otherwise leak, and the server's count with it.
func (a adoption) discard() {
	_ = unix.Close(a.fd)
	a.l.s.conns.Add(-1)
}

// drain stops accepting and closes idle connections; busy ones close after their answer.
func (l *loop) drain() {
	if l.drained {
		return
	}
	l.drained = true
	l.timers.disarm(&l.acceptT)
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.s.lnfd, nil)
	for _, p := range l.fds {
		if c, ok := p.(*clientConn); ok && c.state == stateIdle && len(c.in) == 0 {
			c.close(nil)
		}
	}
}

func (l *loop) stop() { l.stopping = true }

// closeAll closes every connection when the loop stops.
func (l *loop) closeAll() {
	for _, p := range l.fds {
		switch c := p.(type) {
		case *clientConn:
			c.close(ErrShutdown)
		case *upstreamConn:
			if call, ok := c.owner.(*Call); ok {
				call.upstreamFailed(ErrShutdown) // its handler settles what the call holds
			}
			c.close()
		}
	}
	l.runSoon()
	l.closeFDs()
}

// errPanicked fails a Call whose connection's event handler panicked.
var errPanicked = errors.New("the gateway's handler panicked while reading the answer")

// ErrShutdown ends the exchanges and calls still running when the server stops.
var ErrShutdown = errors.New("the gateway is shutting down")
