package evloop

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// hostPool is one loop's connections to one worker address: the idle ones, newest last.
type hostPool struct {
	l     *loop
	addr  string
	sa    unix.Sockaddr
	err   error // the address could not be resolved
	idle  []*upstreamConn
	count *atomic.Int32 // connections to addr over all loops
	// A pool of TLS connections (tls.go): their configuration, and sa as host:port.
	tls      *tls.Config
	dialAddr string
	// A worker named by host name (not behind TLS, whose dials resolve off the loop) is
	// looked up off the loop (resolve): expires is when its address must be looked up
	// again, resolving is set while a lookup runs, and waiters are the connections waiting
	// for the first address (or the one after a failure). A stale address serves while its
	// successor is looked up, and stays when that lookup fails.
	host, port string
	expires    int64
	resolving  bool
	waiters    []*upstreamConn
	// live counts this loop's connections to addr; used is when a request last asked for
	// addr. A pool with neither for UpstreamIdleTimeout goes (sweepPools).
	live int
	used int64
	// addrGen counts the address changes: a connection to an older address is not reused.
	addrGen uint32
}

// dnsRetry is how soon a failed lookup is tried again (at most the TTL): requests meanwhile
// fail at once, as a worker that refuses connections does.
const dnsRetry = time.Second

// Timer kinds of an upstream connection.
const (
	timerConnect = iota
	timerUpIdle
)

// upstreamOwner is what a busy upstream connection carries: an exchange's forward or a Call.
type upstreamOwner interface {
	// onUpstreamData is told about the bytes read into u.in.
	onUpstreamData(u *upstreamConn)
	// upstream is the connection the owner's current attempt uses.
	upstream() *upstreamConn
	// upstreamFailed ends the owner's current attempt with err; the owner closes or drops its
	// connection.
	upstreamFailed(err error)
	// failSoon fails the attempt after the current event (see Exchange.failSoon).
	failSoon(err error)
}

// upstreamConn is one connection to a worker, owned by a loop.
type upstreamConn struct {
	pool       *hostPool
	fd         int
	in         []byte
	out        []byte
	sent       int
	owner      upstreamOwner // the exchange's forward or the Call it carries; nil while idle
	connecting bool
	paused     bool
	events     uint32
	leftover   bool // bytes after the answer: the connection cannot be reused
	closed     bool
	again      bool // queued to be read again (loop.readAgain)
	peerClosed bool // EPOLLRDHUP seen: every read is followed by another until the end
	t          timer
	tls        *tlsConn // a worker behind TLS (tls.go); out and in are its plaintext
	addrGen    uint32   // the pool's addrGen when it connected
}

const upstreamIn = 64 << 10

// upstream returns an idle connection to addr (over TLS with cfg when set), or a new one.
func (l *loop) upstream(addr string, cfg *tls.Config) (*upstreamConn, error) {
	pools := l.pools
	if cfg != nil {
		pools = l.tlsPools
	}
	p := pools[addr]
	if p == nil {
		p = l.newPool(pools, addr, cfg)
	}
	p.used = l.now
	if p.host != "" && !p.resolving && l.now >= p.expires {
		l.resolve(p)
	}
	if p.err != nil && !p.resolving {
		return nil, &UpstreamError{Err: p.err, Dial: true}
	}
	for n := len(p.idle); n > 0; n = len(p.idle) {
		u := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if !u.closed {
			l.timers.disarm(&u.t)
			return u, nil
		}
	}
	if p.count.Add(1) > int32(l.s.cfg.UpstreamMaxConns) {
		p.count.Add(-1)
		return nil, &UpstreamError{Err: errNoFreeConns}
	}
	p.live++
	if p.tls != nil {
		return l.dialTLS(p), nil
	}
	if p.sa == nil { // the lookup under way: the connection (and its request) waits for it
		u := &upstreamConn{pool: p, fd: -1, connecting: true, in: make([]byte, 0, upstreamIn)}
		u.t = unarmed(u)
		l.timers.arm(&u.t, l.now+int64(l.s.cfg.DialTimeout), timerConnect)
		p.waiters = append(p.waiters, u)
		return u, nil
	}
	u, err := l.dial(p)
	if err != nil {
		p.live--
		p.count.Add(-1)
		return nil, &UpstreamError{Err: err, Dial: true}
	}
	return u, nil
}

// resolve looks p's host name up on a goroutine, never on the loop (a slow resolver would
// stall every connection of the loop), and posts the answer back (dnsDone).
func (l *loop) resolve(p *hostPool) {
	p.resolving = true
	lookup, timeout := l.s.cfg.LookupHost, l.s.cfg.DialTimeout
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		d := dnsDone{p: p}
		ips, err := lookup(ctx, p.host)
		switch {
		case err != nil:
			d.err = err
		case len(ips) == 0:
			d.err = &net.DNSError{Err: "no addresses", Name: p.host}
		default:
			d.ap, d.err = netip.ParseAddrPort(net.JoinHostPort(ips[0].Unmap().String(), p.port))
		}
		l.post(d)
	}()
}

// dnsDone is a lookup's answer, run on the pool's loop.
type dnsDone struct {
	p   *hostPool
	ap  netip.AddrPort
	err error
}

func (d dnsDone) run() {
	p := d.p
	l := p.l
	p.resolving = false
	if d.err != nil {
		p.expires = l.now + int64(min(dnsRetry, l.s.cfg.DNSTTL))
		if p.sa == nil {
			p.err = d.err
		}
	} else {
		p.err = nil
		if p.sa == nil || !sameAddr(p.sa, d.ap) {
			p.setAddr(d.ap)
			p.addrGen++
			for i, u := range p.idle { // they lead to the old address
				p.idle[i] = nil
				u.close()
			}
			p.idle = p.idle[:0]
		}
		p.expires = l.now + int64(l.s.cfg.DNSTTL)
	}
	waiters := p.waiters
	p.waiters = nil
	for _, u := range waiters {
		if u.closed { // its owner gave up (the connect timer, the client left)
			continue
		}
		if p.sa == nil {
			l.timers.disarm(&u.t)
			u.connecting = false
			u.fail(&UpstreamError{Err: p.err, Dial: true})
			continue
		}
		if err := l.connect(u); err != nil {
			l.timers.disarm(&u.t)
			u.connecting = false
			u.fail(&UpstreamError{Err: err, Dial: true})
			continue
		}
		if !u.connecting {
			u.flush() // connected at once: the request that waited goes out
		}
	}
}

// sameAddr reports whether sa is ap.
func sameAddr(sa unix.Sockaddr, ap netip.AddrPort) bool {
	a := ap.Addr().Unmap()
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Is4() && sa.Addr == a.As4() && sa.Port == int(ap.Port())
	case *unix.SockaddrInet6:
		return !a.Is4() && sa.Addr == a.As16() && sa.Port == int(ap.Port())
	}
	return false
}

// setAddr makes ap the pool's socket address.
func (p *hostPool) setAddr(ap netip.AddrPort) {
	if a := ap.Addr().Unmap(); a.Is4() {
		p.sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	} else {
		p.sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
}

// sweepPools drops the pools no request asked for during a whole UpstreamIdleTimeout and
// with no connection left on this loop (their idle connections close after that timeout):
// the workers that went, whose pools and shared counters would otherwise stay for the
// process's life. It runs every UpstreamIdleTimeout.
func (l *loop) sweepPools() {
	idle := int64(l.s.cfg.UpstreamIdleTimeout)
	for _, pools := range [2]map[string]*hostPool{l.pools, l.tlsPools} {
		for addr, p := range pools {
			if p.live == 0 && !p.resolving && l.now-p.used >= idle {
				delete(pools, addr)
				l.s.releaseUpstreamCount(addr)
			}
		}
	}
	l.timers.arm(&l.sweepT, l.now+idle, 0)
}

// poolSweep is the timer of sweepPools.
type poolSweep struct{ l *loop }

func (p poolSweep) onTimer(uint8) { p.l.sweepPools() }

// newPool makes the pool of addr: an IP literal is its address at once; a host name is
// looked up off the loop when a request first asks for it (upstream, resolve), and again
// every DNSTTL; behind TLS the handshake's dial resolves it, off the loop too.
func (l *loop) newPool(pools map[string]*hostPool, addr string, cfg *tls.Config) *hostPool {
	p := &hostPool{l: l, addr: addr, count: l.s.upstreamCount(addr), tls: cfg}
	pools[addr] = p
	if f := l.s.cfg.ResolveAddr; f != nil {
		addr = f(addr)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		host, port, serr := net.SplitHostPort(addr)
		switch {
		case serr != nil:
			p.err = serr
		case cfg != nil:
			p.dialAddr = addr
		default:
			p.host, p.port = host, port
		}
		return p
	}
	p.setAddr(ap)
	if cfg != nil {
		p.dialAddr = ap.String()
	}
	return p
}

// dial starts a non-blocking connect; the request waits in out until it completes.
func (l *loop) dial(p *hostPool) (*upstreamConn, error) {
	u := &upstreamConn{pool: p, fd: -1}
	u.t = unarmed(u)
	if err := l.connect(u); err != nil {
		return nil, err
	}
	return u, nil
}

// connect opens u's socket to its pool's address and starts connecting it.
func (l *loop) connect(u *upstreamConn) error {
	p := u.pool
	domain := unix.AF_INET
	if _, ok := p.sa.(*unix.SockaddrInet6); ok {
		domain = unix.AF_INET6
	}
	fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	err = unix.Connect(fd, p.sa)
	switch err {
	case nil:
		u.connecting, u.events = false, baseEvents
	case unix.EINPROGRESS:
		u.connecting, u.events = true, baseEvents|writeEvents
		l.timers.arm(&u.t, l.now+int64(l.s.cfg.DialTimeout), timerConnect)
	default:
		_ = unix.Close(fd)
		return err
	}
	if err := l.add(fd, u.events, u); err != nil {
		_ = unix.Close(fd)
		return err
	}
	u.fd, u.addrGen = fd, p.addrGen
	if cap(u.in) == 0 {
		u.in = make([]byte, 0, upstreamIn)
	}
	return nil
}

// send writes an attempt's request: head and body in one write when they fit a buffer copy.
func (u *upstreamConn) send(head, body []byte) {
	u.leftover = false
	u.out = append(u.out[:0], head...)
	u.out = append(u.out, body...)
	u.sent = 0
	if u.connecting {
		return
	}
	// A failed write is reported after the current event (failSoon), not from inside the
	// handler's Forward call.
	if err := u.write(); err != nil {
		u.owner.failSoon(err)
	}
}

// flush writes pending output on a writable event.
func (u *upstreamConn) flush() {
	if err := u.write(); err != nil {
		u.fail(err)
		return
	}
	if x, ok := u.owner.(*Exchange); ok && x.bodyIn {
		x.bodyDrained(u)
	}
}

func (u *upstreamConn) write() error {
	if u.tls != nil {
		return u.writeTLS()
	}
	if err := writeOut(u.fd, u.out, &u.sent); err != 0 {
		return &UpstreamError{Err: err}
	}
	if len(u.out) == u.sent {
		u.out, u.sent = u.out[:0], 0
	}
	u.setEvents()
	return nil
}

func (u *upstreamConn) setEvents() {
	ev := uint32(unix.EPOLLRDHUP | unix.EPOLLET)
	if !u.paused {
		ev |= readEvents
	}
	if u.connecting || u.pending() > 0 {
		ev |= writeEvents
	}
	if ev != u.events && u.fd >= 0 { // a TLS handshake has no socket on the loop yet
		u.events = ev
		u.pool.l.mod(u.fd, ev)
	}
}

func (u *upstreamConn) pauseReads(paused bool) {
	if u.paused != paused && !u.closed {
		u.paused = paused
		u.setEvents()
	}
}

func (u *upstreamConn) onEvent(ev uint32) {
	if u.closed {
		return
	}
	if ev == evAgain {
		if !u.paused && !u.connecting { // a paused connection is read again when it resumes
			u.read()
		}
		return
	}
	if ev&unix.EPOLLRDHUP != 0 {
		u.peerClosed = true
	}
	if u.connecting {
		if ev&(writeEvents|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		u.connecting = false
		u.pool.l.timers.disarm(&u.t)
		if errno, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || errno != 0 {
			if err == nil {
				err = unix.Errno(errno)
			}
			u.fail(&UpstreamError{Err: err, Dial: true})
			return
		}
		u.flush()
		return
	}
	if ev&writeEvents != 0 {
		u.flush()
		if u.closed {
			return
		}
	}
	if ev&(readEvents|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		u.read()
	}
}

func (u *upstreamConn) onTimer(kind uint8) {
	switch kind {
	case timerConnect:
		if u.connecting {
			u.fail(&UpstreamError{Err: errDialTimeout, Dial: true})
		}
	case timerUpIdle:
		if u.owner == nil {
			u.close()
		}
	}
}

// read reads once and hands the bytes to the attempt.
func (u *upstreamConn) read() {
	if u.tls != nil {
		u.readTLS()
		return
	}
	if u.owner == nil {
		// An idle connection is readable only when the worker closed it (or misbehaves).
		var probe [64]byte
		if n, err := rawRead(u.fd, probe[:]); err == unix.EAGAIN && n <= 0 {
			return
		}
		u.close()
		return
	}
	if len(u.in) == cap(u.in) {
		u.in = grow(u.in, 2*cap(u.in))
	}
	n, err := rawRead(u.fd, u.in[len(u.in):cap(u.in)])
	if err != 0 {
		if err == unix.EAGAIN || err == unix.EINTR {
			return
		}
		u.fail(&UpstreamError{Err: err})
		return
	}
	if n == 0 {
		u.fail(&UpstreamError{Err: errEOF})
		return
	}
	if n == cap(u.in)-len(u.in) || u.peerClosed {
		u.pool.l.readAgain(u)
	}
	u.in = u.in[:len(u.in)+n]
	u.owner.onUpstreamData(u)
}

// fail ends the attempt u carries with err; an idle connection, or one its owner no longer
// uses, is only closed.
func (u *upstreamConn) fail(err error) {
	if o := u.owner; o != nil && o.upstream() == u {
		o.upstreamFailed(err)
		return
	}
	u.close()
}

// release returns the connection to its pool after an answer, or closes it.
func (u *upstreamConn) release(reusable bool) {
	u.owner = nil
	if !reusable || u.closed || u.pool.l.drained || u.addrGen != u.pool.addrGen {
		u.close()
		return
	}
	if u.paused {
		u.paused = false
		u.setEvents()
	}
	u.in = u.in[:0]
	p := u.pool
	p.idle = append(p.idle, u)
	l := p.l
	l.timers.arm(&u.t, l.now+int64(l.s.cfg.UpstreamIdleTimeout), timerUpIdle)
}

// close closes the connection; an attempt it carried has been told by its caller.
func (u *upstreamConn) close() {
	if u.closed {
		return
	}
	u.closed = true
	u.owner = nil
	l := u.pool.l
	l.timers.remove(&u.t) // the connection is dropped: its heap entry must not keep it
	if u.tls != nil {
		u.tls.cancel() // a handshake still running ends; tlsReady closes its socket
	}
	if u.fd >= 0 {
		l.remove(u.fd)
	}
	u.fd = -1
	u.pool.count.Add(-1)
	u.pool.live--
}
