package evloop

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Workers behind TLS (Target.TLS).
//
// The handshake runs once per connection on a goroutine of its own, over a blocking socket
// (crypto/tls cannot resume a handshake that met a "would block": a handshake error is
// final); the loop then takes the socket over (a duplicate of its descriptor) with the
// tls.Conn, and runs the record layer itself. Under the tls.Conn is then memory, not the
// socket (tlsWire): the loop reads the socket once per readiness event into wire.raw and
// lets tls.Conn.Read decrypt the whole records read, one at a time; tls.Conn.Write seals
// into wire.out, which the loop writes as it writes a plain connection's output.
//
// The wire hands TLS whole records only, one per Read, and the loop calls tls.Conn.Read only
// while a whole record waits: TLS then never holds a partial record, so the loop knows when
// it has nothing left to decrypt without a Read that would find nothing (crypto/tls
// allocates its atLeastReader for every record it starts to read from an empty buffer: one
// allocation per record, and this saves the one a final empty Read would cost).
//
// Why errWouldBlock (what the wire's Read answers with no whole record) is safe (Go 1.26, crypto/tls/conn.go, readRecordOrCCS): an error from
// the underlying Read that is a net.Error whose Temporary() is true is returned without
// poisoning the read side (c.in.err stays nil), and the bytes of a record read so far stay
// in c.rawInput, so the next Read carries on where this one stopped. Writes never fail
// (they append to memory): a write error would poison the write side for good.
//
// The request waits in the connection's out buffer while the handshake runs (connecting is
// set), as it waits for a plain connection's connect; the handshake is bounded by
// Config.DialTimeout (the connect timer) and a connection closed while it runs cancels it.

// tlsRawIn is the ciphertext buffer: the largest record (TLS 1.2's 16 KiB + 2 KiB of
// overhead and its header) fits it with room to spare, so a partial record kept for the next
// read never fills it.
const tlsRawIn = 32 << 10

// tlsMaxPlaintext is the most plaintext one record carries: decrypt leaves at least this much
// room in in, so that Read always takes a record's plaintext whole.
const tlsMaxPlaintext = 16 << 10

// tlsRecordHeader is the length of a TLS record's header (type, version, length).
const tlsRecordHeader = 5

// tlsConn is the TLS side of an upstream connection.
type tlsConn struct {
	conn   *tls.Conn
	wire   tlsWire
	cancel context.CancelFunc // interrupts the handshake
}

// tlsWire is the net.Conn under a worker connection's tls.Conn: the dialled socket during
// the handshake (on its goroutine), memory once the loop owns the connection.
type tlsWire struct {
	nc   net.Conn // the handshake's socket; nil once the loop owns the connection
	raw  []byte   // ciphertext read from the socket, from off on not yet taken by TLS
	off  int      // (raw[off:] is whole records, maybe followed by the start of one)
	cur  int      // the end of the record Read is handing over (off == cur between records)
	eof  bool     // the worker closed its side: Read returns io.EOF once raw is taken
	out  []byte   // sealed records to write, from sent on
	sent int
}

// wouldBlock is what tlsWire.Read returns when the loop has no more ciphertext: a
// temporary net.Error, which tls.Conn does not remember (see above).
type wouldBlock struct{}

func (wouldBlock) Error() string   { return "evloop: no more TLS input until the socket is readable" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

var errWouldBlock net.Error = wouldBlock{}

func (w *tlsWire) Read(p []byte) (int, error) {
	if w.nc != nil {
		return w.nc.Read(p)
	}
	if w.off == w.cur { // between records: hand over the next one if it is whole
		end := w.recordEnd()
		if end < 0 {
			if w.eof {
				return 0, io.EOF
			}
			return 0, errWouldBlock
		}
		w.cur = end
	}
	// A record larger than p goes over in several Reads (crypto/tls reads until it has the
	// whole record): off stays inside it until then.
	n := copy(p, w.raw[w.off:w.cur])
	w.off += n
	return n, nil
}

// recordEnd is the end in raw of the whole record that starts at off, or -1 when raw holds
// no whole record from off.
func (w *tlsWire) recordEnd() int {
	rest := w.raw[w.off:]
	if len(rest) < tlsRecordHeader {
		return -1
	}
	end := w.off + tlsRecordHeader + (int(rest[3])<<8 | int(rest[4]))
	if end > len(w.raw) {
		return -1
	}
	return end
}

func (w *tlsWire) Write(p []byte) (int, error) {
	if w.nc != nil {
		return w.nc.Write(p)
	}
	w.out = append(w.out, p...)
	return len(p), nil
}

// Close interrupts the handshake (tls.Conn.HandshakeContext closes its conn when the
// context ends); on the loop the upstream connection closes the socket.
func (w *tlsWire) Close() error {
	if w.nc != nil {
		return w.nc.Close()
	}
	return nil
}

var tlsWireAddr = &net.TCPAddr{}

func (w *tlsWire) LocalAddr() net.Addr  { return tlsWireAddr }
func (w *tlsWire) RemoteAddr() net.Addr { return tlsWireAddr }

// The deadlines are the handshake's (its socket's); the loop keeps its own timers.
func (w *tlsWire) SetDeadline(t time.Time) error {
	if w.nc != nil {
		return w.nc.SetDeadline(t)
	}
	return nil
}

func (w *tlsWire) SetReadDeadline(t time.Time) error {
	if w.nc != nil {
		return w.nc.SetReadDeadline(t)
	}
	return nil
}

func (w *tlsWire) SetWriteDeadline(t time.Time) error {
	if w.nc != nil {
		return w.nc.SetWriteDeadline(t)
	}
	return nil
}

// dialTLS starts a connection to a TLS worker: the handshake runs on a goroutine and hands
// the connection to the loop (tlsReady); the request waits in out until then.
func (l *loop) dialTLS(p *hostPool) *upstreamConn {
	u := &upstreamConn{pool: p, fd: -1, connecting: true}
	u.t = unarmed(u)
	u.in = make([]byte, 0, upstreamIn)
	t := &tlsConn{}
	t.wire.raw = make([]byte, 0, tlsRawIn)
	t.conn = tls.Client(&t.wire, p.tls)
	ctx, cancel := context.WithTimeout(context.Background(), l.s.cfg.DialTimeout)
	t.cancel = cancel
	u.tls = t
	l.timers.arm(&u.t, l.now+int64(l.s.cfg.DialTimeout), timerConnect)
	go handshakeTLS(ctx, l, u, p.dialAddr)
	return u
}

// tlsReady hands a finished handshake to its loop: fd is the connection's socket (-1 when
// err is set).
type tlsReady struct {
	u   *upstreamConn
	fd  int
	err error
}

// handshakeTLS dials addr and runs u's TLS handshake, then posts the outcome to l. It
// touches only u.tls's conn and wire until then (the loop leaves them alone while u is
// connecting).
func handshakeTLS(ctx context.Context, l *loop, u *upstreamConn, addr string) {
	t := u.tls
	defer t.cancel()
	fd := -1
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		t.wire.nc = nc
		if err = t.conn.HandshakeContext(ctx); err != nil {
			err = fmt.Errorf("cannot complete the TLS handshake with the worker: %w", err)
		} else {
			fd, err = takeFD(nc)
		}
		t.wire.nc = nil
		_ = nc.Close() // the loop's duplicate keeps the connection open
	}
	l.post(tlsReady{u: u, fd: fd, err: err})
}

// takeFD duplicates nc's socket for the loop, non-blocking. Closing nc afterwards takes it
// out of Go's netpoller (which deregisters it before it closes the descriptor) and leaves the
// connection open on the duplicate.
func takeFD(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("evloop: the worker's connection has no file descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// discard closes the socket of a handshake that finished after its loop stopped.
func (r tlsReady) discard() {
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
	}
}

// run installs the handshake's outcome on the loop: the connection writes the request that
// waited, or fails its owner as a connect that failed.
func (r tlsReady) run() {
	u := r.u
	if u.closed { // the owner gave up while the handshake ran
		if r.fd >= 0 {
			_ = unix.Close(r.fd)
		}
		return
	}
	l := u.pool.l
	l.timers.disarm(&u.t)
	u.connecting = false
	if r.err != nil {
		u.fail(&UpstreamError{Err: r.err, Dial: true})
		return
	}
	u.fd, u.events = r.fd, baseEvents
	if err := l.add(u.fd, u.events, u); err != nil {
		_ = unix.Close(u.fd)
		u.fd = -1
		u.fail(&UpstreamError{Err: err, Dial: true})
		return
	}
	u.flush()
}

// writeTLS seals what waits in out and writes the sealed records.
func (u *upstreamConn) writeTLS() error {
	t := u.tls
	if len(u.out) > u.sent {
		if _, err := t.conn.Write(u.out[u.sent:]); err != nil {
			return &UpstreamError{Err: err}
		}
		u.out, u.sent = u.out[:0], 0
	}
	w := &t.wire
	if err := writeOut(u.fd, w.out, &w.sent); err != 0 {
		return &UpstreamError{Err: err}
	}
	switch {
	case len(w.out) == w.sent:
		w.out, w.sent = w.out[:0], 0
	case w.sent >= len(w.out)/2: // keep a streamed body's backlog from creeping
		n := copy(w.out, w.out[w.sent:])
		w.out, w.sent = w.out[:n], 0
	}
	u.setEvents()
	return nil
}

// readTLS reads the socket once and decrypts the whole records read into in.
func (u *upstreamConn) readTLS() {
	w := &u.tls.wire
	if w.off > 0 { // the start of a record waits for its rest
		w.raw, w.cur = w.raw[:copy(w.raw, w.raw[w.off:])], w.cur-w.off
		w.off = 0
	}
	n, errno := rawRead(u.fd, w.raw[len(w.raw):cap(w.raw)])
	switch {
	case errno == unix.EAGAIN || errno == unix.EINTR:
		return
	case errno != 0:
		u.fail(&UpstreamError{Err: errno})
		return
	case n == 0:
		w.eof = true
	default:
		if n == cap(w.raw)-len(w.raw) || u.peerClosed {
			u.pool.l.readAgain(u)
		}
		w.raw = w.raw[:len(w.raw)+n]
	}
	got, err := u.decrypt()
	if err == nil && len(w.out) > w.sent { // TLS answered on its own (a KeyUpdate)
		if werr := u.writeTLS(); werr != nil {
			err = werr
		}
	}
	if u.owner == nil {
		// An idle connection: TLS's own records (session tickets) are taken in stride; an
		// answer nobody asked for, or the end, closes it.
		if got > 0 || err != nil {
			u.close()
		}
		u.in = u.in[:0]
		return
	}
	if got > 0 {
		u.owner.onUpstreamData(u)
	}
	if err != nil && !u.closed {
		u.fail(err)
	}
}

// decrypt lets TLS take the whole records read and appends their plaintext to in: how
// many bytes, and the error that ends the connection (nil while it stays usable).
func (u *upstreamConn) decrypt() (int, error) {
	w := &u.tls.wire
	total := 0
	for w.eof || w.off < w.cur || w.recordEnd() >= 0 {
		if cap(u.in)-len(u.in) < tlsMaxPlaintext {
			u.in = grow(u.in, 2*cap(u.in))
		}
		n, err := u.tls.conn.Read(u.in[len(u.in):cap(u.in)])
		u.in = u.in[:len(u.in)+n]
		total += n
		switch {
		case err == nil:
		case err == errWouldBlock:
			return total, nil
		case errors.Is(err, io.EOF):
			return total, &UpstreamError{Err: errEOF}
		default:
			return total, &UpstreamError{Err: err}
		}
	}
	return total, nil
}
