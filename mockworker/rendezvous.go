package mockworker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fastjson"

	"github.com/smg-go/smg/internal/jsonx"
)

// The KV rendezvous: a prefill fleet's listener on Host:BootstrapPort where its workers
// publish the KV records of the prompts they computed and decode workers (of any fleet or
// process) claim them, the mock's stand-in for SGLang's bootstrap server and vLLM's
// NIXL/Mooncake side channel.
//
// A decode fleet keeps one long-lived TCP connection per rendezvous address and multiplexes
// every claim over it. The connection opens as HTTP, so that a decode pointed at something
// else (a worker's HTTP port, say) is told "not a rendezvous" at once rather than timing out:
//
//	→ GET /kv HTTP/1.1\r\nHost: H:P\r\nConnection: Upgrade\r\nUpgrade: mockworker-kv/1\r\n\r\n
//	← HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: mockworker-kv/1\r\n\r\n
//
// then carries lines, pipelined in both directions and answered in any order:
//
//	→ claim ID WAIT_MS KEY     claim KEY (a Go-quoted string), waiting up to WAIT_MS for it
//	→ cancel ID                the decode gave up on claim ID (no answer)
//	← ID ok RECORD             the record (one line of JSON, kvRecord); the key is now claimed
//	← ID timeout               no record came within WAIT_MS
//	← ID claimed               the key was already claimed (a room serves one request)
//	← ID closing               the prefill fleet closed while the claim waited
//	← ID error TEXT            a line the rendezvous could not read
//
// ID is the decode's number for the claim (a uint64). A claim that waits costs the
// rendezvous a map entry and a runtime timer, no goroutine; each side has one reader and one
// writer goroutine per connection, and the writer sends everything queued since its last
// write in one system call, so that answers to pipelined claims share writes (the mock pair
// is benchmarked on one core: docs/benchmarks-mockworker.md, "PD pair").

// kvRecord describes the KV a prefill computed.
type kvRecord struct {
	Fingerprint  string // promptFingerprint in hex
	PromptTokens int
	EngineID     string // vLLM
	BlockIDs     []int  // vLLM
	Worker       string // the prefill worker's id
}

// appendJSON writes r as one line of JSON (no newline).
func (r *kvRecord) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"fingerprint":"`...)
	dst = jsonx.AppendEscaped(dst, r.Fingerprint)
	dst = append(dst, `","prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.PromptTokens), 10)
	dst = append(dst, `,"engine_id":"`...)
	dst = jsonx.AppendEscaped(dst, r.EngineID)
	dst = append(dst, `","block_ids":[`...)
	for i, id := range r.BlockIDs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	dst = append(dst, `],"worker":"`...)
	dst = jsonx.AppendEscaped(dst, r.Worker)
	return append(dst, `"}`...)
}

// parseKVRecord reads appendJSON's output.
func parseKVRecord(p *fastjson.Parser, b []byte) (kvRecord, error) {
	v, err := p.ParseBytes(b)
	if err != nil {
		return kvRecord{}, err
	}
	r := kvRecord{
		Fingerprint:  string(v.GetStringBytes("fingerprint")),
		PromptTokens: v.GetInt("prompt_tokens"),
		EngineID:     string(v.GetStringBytes("engine_id")),
		Worker:       string(v.GetStringBytes("worker")),
	}
	if ids := v.GetArray("block_ids"); len(ids) > 0 {
		r.BlockIDs = make([]int, len(ids))
		for i, id := range ids {
			r.BlockIDs[i] = id.GetInt()
		}
	}
	return r, nil
}

const (
	kvUpgrade   = "mockworker-kv/1"
	kvHandshake = "Connection: Upgrade\r\nUpgrade: " + kvUpgrade + "\r\n\r\n"
	kvMaxLine   = 1 << 20 // a record with many vLLM block ids still fits
)

var (
	errKeyInUse   = errors.New("the key was already published: every request needs its own bootstrap_room")
	errKeyClaimed = errors.New("already claimed by another decode (a room or transfer serves one request)")
	errRVClosing  = errors.New("the prefill fleet is closing")
)

// connWriter queues lines for a connection; its run goroutine writes all that is queued in
// one system call. Producers (readers, publishing workers) never block on the network.
type connWriter struct {
	nc     net.Conn
	mu     sync.Mutex
	cond   sync.Cond
	out    []byte
	closed bool
}

func newConnWriter(nc net.Conn) *connWriter {
	w := &connWriter{nc: nc}
	w.cond.L = &w.mu
	return w
}

// begin locks the queue and returns it to append to; end stores it and wakes the writer.
func (w *connWriter) begin() []byte { w.mu.Lock(); return w.out }
func (w *connWriter) end(b []byte) {
	w.out = b
	w.mu.Unlock()
	w.cond.Signal()
}

// shut makes run write what is queued, close the connection and return.
func (w *connWriter) shut() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Signal()
	_ = w.nc.SetWriteDeadline(time.Now().Add(time.Second)) // a peer that stopped reading
}

func (w *connWriter) run() {
	defer w.nc.Close() // which also ends the connection's reader
	var buf []byte
	for {
		w.mu.Lock()
		for len(w.out) == 0 && !w.closed {
			w.cond.Wait()
		}
		if len(w.out) == 0 {
			w.mu.Unlock()
			return
		}
		buf, w.out = w.out, buf[:0]
		w.mu.Unlock()
		if _, err := w.nc.Write(buf); err != nil {
			return
		}
	}
}

// kvEntry is a key's state: a placeholder that claims wait on, then a published record,
// then claimed. Guarded by rendezvous.mu.
type kvEntry struct {
	rec       kvRecord
	published bool
	claimed   bool
	waiters   []*kvWaiter
	expires   time.Time // published entries: dropped then, claimed or not
}

// kvWaiter is a claim waiting for its key. Guarded by rendezvous.mu.
type kvWaiter struct {
	c     *rvConn
	id    uint64
	key   string
	timer *time.Timer // answers timeout
}

// rvConn is a decode fleet's connection to the rendezvous.
type rvConn struct {
	*connWriter
	waiting map[uint64]*kvWaiter // guarded by rendezvous.mu
}

// rendezvous is a prefill fleet's KV record store and its server.
type rendezvous struct {
	ttl     time.Duration
	done    <-chan struct{} // the fleet's: stops the sweeper
	mu      sync.Mutex
	entries map[string]*kvEntry
	conns   map[*rvConn]struct{}
	closed  bool
	ln      net.Listener
	serving sync.WaitGroup // the accept loop, the sweeper, each connection's two goroutines
}

// startRendezvous listens on addr and serves until close.
func startRendezvous(addr string, ttl time.Duration, done <-chan struct{}) (*rendezvous, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	rv := &rendezvous{ttl: ttl, done: done, entries: map[string]*kvEntry{}, conns: map[*rvConn]struct{}{}, ln: ln}
	rv.serving.Go(rv.accept)
	rv.serving.Go(rv.sweep)
	return rv, nil
}

// port is the bound port.
func (rv *rendezvous) port() int { return rv.ln.Addr().(*net.TCPAddr).Port }

// close answers every waiting claim "closing", closes the listener and the connections (after
// their queued answers) and waits for the goroutines. The fleet's done channel must be
// closed already (it stops the sweeper).
func (rv *rendezvous) close() error {
	err := rv.ln.Close()
	rv.mu.Lock()
	rv.closed = true
	for key, e := range rv.entries {
		for _, w := range e.waiters {
			rv.answer(w, "closing", nil)
		}
		e.waiters = nil
		if !e.published {
			delete(rv.entries, key)
		}
	}
	for c := range rv.conns {
		c.shut()
	}
	rv.mu.Unlock()
	rv.serving.Wait()
	return err
}

func (rv *rendezvous) accept() {
	for {
		nc, err := rv.ln.Accept()
		if err != nil {
			return // closed
		}
		c := &rvConn{connWriter: newConnWriter(nc), waiting: map[uint64]*kvWaiter{}}
		rv.mu.Lock()
		if rv.closed {
			rv.mu.Unlock()
			_ = nc.Close()
			return
		}
		rv.conns[c] = struct{}{}
		rv.serving.Go(c.run)
		rv.serving.Go(func() { rv.serveConn(c) })
		rv.mu.Unlock()
	}
}

// serveConn reads a connection's handshake, then its claims and cancels until it closes.
func (rv *rendezvous) serveConn(c *rvConn) {
	defer func() {
		rv.mu.Lock()
		for _, w := range c.waiting {
			rv.drop(w)
		}
		delete(rv.conns, c)
		rv.mu.Unlock()
		c.shut()
	}()
	br := bufio.NewReaderSize(c.nc, 4096)
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if head, err := readHead(br); err != nil || !bytes.HasPrefix(head, []byte("GET ")) || !hasUpgrade(head) {
		const msg = "a mockworker KV rendezvous: ask for Upgrade: " + kvUpgrade + "\n"
		b := c.begin()
		b = append(b, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(msg)), 10)
		c.end(append(b, "\r\n\r\n"+msg...))
		return
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	b := c.begin()
	c.end(append(b, "HTTP/1.1 101 Switching Protocols\r\n"+kvHandshake...))
	var line []byte
	for {
		var err error
		if line, err = readLine(br, line[:0]); err != nil {
			return
		}
		rv.handleLine(c, line)
	}
}

// readHead reads an HTTP header block (at most 64 KiB).
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for len(head) < 64<<10 {
		l, err := br.ReadSlice('\n')
		head = append(head, l...)
		if err != nil {
			return head, err
		}
		if len(l) <= 2 && (len(l) == 1 || l[0] == '\r') {
			return head, nil
		}
	}
	return head, errors.New("header block too large")
}

// hasUpgrade reports whether an HTTP head asks for (or agrees to) the rendezvous protocol.
func hasUpgrade(head []byte) bool {
	for l := range strings.SplitSeq(string(head), "\n") {
		name, value, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "upgrade") && strings.TrimSpace(value) == kvUpgrade {
			return true
		}
	}
	return false
}

// readLine reads one line (without its newline) into dst, up to kvMaxLine bytes.
func readLine(br *bufio.Reader, dst []byte) ([]byte, error) {
	for {
		l, err := br.ReadSlice('\n')
		dst = append(dst, l...)
		switch {
		case err == nil:
			return dst[:len(dst)-1], nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return dst, err
		case len(dst) > kvMaxLine:
			return dst, errors.New("line too long")
		}
	}
}

// handleLine serves one "claim" or "cancel" line.
func (rv *rendezvous) handleLine(c *rvConn, line []byte) {
	verb, rest, _ := bytes.Cut(line, []byte{' '})
	idField, rest, _ := bytes.Cut(rest, []byte{' '})
	id, err := strconv.ParseUint(string(idField), 10, 64)
	if err != nil {
		rv.protocolError(c, id, "bad claim id "+strconv.Quote(string(idField)))
		return
	}
	switch string(verb) {
	case "claim":
		waitField, keyField, _ := bytes.Cut(rest, []byte{' '})
		ms, err1 := strconv.ParseInt(string(waitField), 10, 64)
		key, err2 := strconv.Unquote(string(keyField))
		if err1 != nil || ms < 0 || err2 != nil {
			rv.protocolError(c, id, "want: claim ID WAIT_MS \"KEY\"")
			return
		}
		rv.claim(c, id, key, min(time.Duration(ms)*time.Millisecond, maxWait))
	case "cancel":
		rv.mu.Lock()
		if w := c.waiting[id]; w != nil {
			rv.drop(w)
		}
		rv.mu.Unlock()
	default:
		rv.protocolError(c, id, "unknown verb "+strconv.Quote(string(verb)))
	}
}

func (rv *rendezvous) protocolError(c *rvConn, id uint64, msg string) {
	b := c.begin()
	b = strconv.AppendUint(b, id, 10)
	b = append(b, " error "...)
	b = append(b, msg...)
	c.end(append(b, '\n'))
}

// answer queues claim w's answer. Called with rv.mu held.
func (rv *rendezvous) answer(w *kvWaiter, status string, rec *kvRecord) {
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(w.c.waiting, w.id)
	b := w.c.begin()
	b = strconv.AppendUint(b, w.id, 10)
	b = append(b, ' ')
	b = append(b, status...)
	if rec != nil {
		b = append(b, ' ')
		b = rec.appendJSON(b)
	}
	w.c.end(append(b, '\n'))
}

// drop removes waiting claim w without an answer, and its key's placeholder if nobody else
// waits on it. Called with rv.mu held.
func (rv *rendezvous) drop(w *kvWaiter) {
	w.timer.Stop()
	delete(w.c.waiting, w.id)
	e := rv.entries[w.key]
	if e == nil {
		return
	}
	if i := slices.Index(e.waiters, w); i >= 0 {
		e.waiters = slices.Delete(e.waiters, i, i+1)
	}
	if len(e.waiters) == 0 && !e.published {
		delete(rv.entries, w.key)
	}
}

// claim answers claim id for key at once when the key is published (or cannot be), else
// registers it until publish, its timer or close answers it.
func (rv *rendezvous) claim(c *rvConn, id uint64, key string, wait time.Duration) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	w := &kvWaiter{c: c, id: id, key: key}
	e := rv.entries[key]
	switch {
	case rv.closed:
		rv.answer(w, "closing", nil)
	case e != nil && e.published && e.claimed:
		rv.answer(w, "claimed", nil)
	case e != nil && e.published:
		e.claimed = true
		rv.answer(w, "ok", &e.rec)
	case wait == 0:
		rv.answer(w, "timeout", nil)
	default:
		if e == nil {
			e = &kvEntry{}
			rv.entries[key] = e
		}
		e.waiters = append(e.waiters, w)
		c.waiting[id] = w
		w.timer = time.AfterFunc(wait, func() { rv.expire(w) })
	}
}

// expire answers a waiting claim whose wait ended.
func (rv *rendezvous) expire(w *kvWaiter) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if w.c.waiting[w.id] != w {
		return // answered or cancelled meanwhile
	}
	rv.drop(w)
	rv.answer(w, "timeout", nil)
}

// size is the number of keys held: placeholders, records and claimed records not yet expired.
func (rv *rendezvous) size() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.entries)
}

// publish stores rec under key and answers the claims waiting for it: the first gets it.
func (rv *rendezvous) publish(key string, rec kvRecord) error {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	e := rv.entries[key]
	if e == nil {
		e = &kvEntry{}
		rv.entries[key] = e
	}
	if e.published {
		return errKeyInUse
	}
	e.rec, e.published, e.expires = rec, true, time.Now().Add(rv.ttl)
	for _, w := range e.waiters {
		if !e.claimed {
			e.claimed = true
			rv.answer(w, "ok", &e.rec)
		} else {
			rv.answer(w, "claimed", nil)
		}
	}
	e.waiters = nil
	return nil
}

// published reports whether key holds a record (claimed or not).
func (rv *rendezvous) published(key string) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	e := rv.entries[key]
	return e != nil && e.published
}

// sweep drops expired records, claimed or not, so that an unclaimed KV does not leak.
func (rv *rendezvous) sweep() {
	everyTick(min(max(rv.ttl/4, 10*time.Millisecond), time.Second), rv.done, rv.dropExpired)
}

// dropExpired drops the records expired at now.
func (rv *rendezvous) dropExpired(now time.Time) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for k, e := range rv.entries {
		if e.published && now.After(e.expires) {
			delete(rv.entries, k)
		}
	}
}

// everyTick calls f with the time of every tick of period until stop is closed.
func everyTick(period time.Duration, stop <-chan struct{}, f func(now time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// maxWait bounds the wait a decode may ask for.
const maxWait = 10 * time.Minute

// kvGrace is how long past its wait a claim gives the rendezvous to answer before the decode
// reports a timeout itself (a rendezvous that stopped answering).
const kvGrace = 2 * time.Second

// kvClient is a decode fleet's client of rendezvous servers: one connection per address.
type kvClient struct {
	mu     sync.Mutex
	conns  map[string]*kvConn
	closed bool
	stop   chan struct{} // closed by close: ends the watchdog
	wg     sync.WaitGroup
}

// kvConn is a decode fleet's connection to one rendezvous.
type kvConn struct {
	addr   string
	dialed chan struct{} // closed when the handshake ended; err is then set
	err    error
	*connWriter
	// Guarded by connWriter.mu:
	pending map[uint64]*kvFetch
	nextID  uint64
	broken  error // set when the connection failed: later fetches get a new one
}

// kvFetch is one claim in flight.
type kvFetch struct {
	id       uint64
	deadline time.Time
	ready    chan struct{} // closed when rec, res and err are set
	rec      kvRecord
	res      pdResult
	err      error
}

func newKVClient() *kvClient {
	c := &kvClient{conns: map[string]*kvConn{}, stop: make(chan struct{})}
	c.wg.Go(c.watchdog)
	return c
}

// close drops every connection and waits for the client's goroutines.
func (c *kvClient) close() {
	c.mu.Lock()
	c.closed = true
	conns := make([]*kvConn, 0, len(c.conns))
	for _, kc := range c.conns {
		conns = append(conns, kc)
	}
	c.mu.Unlock()
	close(c.stop)
	for _, kc := range conns {
		<-kc.dialed
		if kc.err == nil {
			_ = kc.nc.Close()
		}
	}
	c.wg.Wait()
}

// conn returns the connection to addr, dialing it on first use or after a failure.
func (c *kvClient) conn(addr string) (*kvConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed
	}
	kc := c.conns[addr]
	if kc != nil {
		c.mu.Unlock()
		<-kc.dialed
		return kc, kc.err
	}
	kc = &kvConn{addr: addr, dialed: make(chan struct{}), pending: map[uint64]*kvFetch{}}
	c.conns[addr] = kc
	c.mu.Unlock()
	br, err := kc.dial()
	c.mu.Lock()
	kc.err = err
	switch {
	case err != nil:
		delete(c.conns, addr)
	case c.closed:
		_ = kc.nc.Close()
		kc.err = errClosed
	default:
		c.wg.Go(kc.run)
		c.wg.Go(func() { c.read(kc, br) })
	}
	c.mu.Unlock()
	close(kc.dialed)
	return kc, kc.err
}

// dial connects to the rendezvous and upgrades the connection.
func (kc *kvConn) dial() (*bufio.Reader, error) {
	nc, err := net.DialTimeout("tcp", kc.addr, kvGrace)
	if err != nil {
		return nil, err
	}
	kc.connWriter = newConnWriter(nc)
	_ = nc.SetDeadline(time.Now().Add(kvGrace))
	if _, err := nc.Write([]byte("GET /kv HTTP/1.1\r\nHost: " + kc.addr + "\r\n" + kvHandshake)); err != nil {
		nc.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 16<<10)
	head, err := readHead(br)
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 101 ")) || !hasUpgrade(head) {
		nc.Close()
		status, _, _ := bytes.Cut(head, []byte{'\r'})
		if len(head) == 0 && err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s is not a mockworker KV rendezvous (it answered %q)", kc.addr, clip(string(status)))
	}
	_ = nc.SetDeadline(time.Time{})
	return br, nil
}

// read delivers the answers of kc's claims until the connection ends, then fails the claims
// still pending and forgets the connection.
func (c *kvClient) read(kc *kvConn, br *bufio.Reader) {
	var (
		p    fastjson.Parser
		line []byte
		err  error
	)
	for {
		if line, err = readLine(br, line[:0]); err != nil {
			break
		}
		idField, rest, _ := bytes.Cut(line, []byte{' '})
		status, payload, _ := bytes.Cut(rest, []byte{' '})
		id, _ := strconv.ParseUint(string(idField), 10, 64)
		kc.mu.Lock()
		f := kc.pending[id]
		delete(kc.pending, id)
		kc.mu.Unlock()
		if f == nil {
			continue // cancelled, or timed out by the watchdog
		}
		switch string(status) {
		case "ok":
			if f.rec, f.err = parseKVRecord(&p, payload); f.err != nil {
				f.res, f.err = pdUnreachable, fmt.Errorf("bad record from %s: %w", kc.addr, f.err)
			}
		case "timeout":
			f.res = pdTimeout
		case "claimed":
			f.res, f.err = pdMismatch, errKeyClaimed
		case "closing":
			f.res, f.err = pdUnreachable, errRVClosing
		default:
			f.res, f.err = pdUnreachable, fmt.Errorf("the rendezvous at %s answered %q", kc.addr, clip(string(rest)))
		}
		close(f.ready)
	}
	c.mu.Lock()
	if c.conns[kc.addr] == kc {
		delete(c.conns, kc.addr)
	}
	c.mu.Unlock()
	kc.mu.Lock()
	kc.broken = fmt.Errorf("lost the connection to %s: %w", kc.addr, err)
	for id, f := range kc.pending {
		delete(kc.pending, id)
		f.res, f.err = pdUnreachable, kc.broken
		close(f.ready)
	}
	kc.mu.Unlock()
	kc.shut()
}

// watchdog times out claims that a rendezvous left unanswered past their wait and kvGrace.
func (c *kvClient) watchdog() {
	everyTick(kvGrace/8, c.stop, c.timeOutClaims)
}

// timeOutClaims fails the claims whose deadline passed at now.
func (c *kvClient) timeOutClaims(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, kc := range c.conns {
		select {
		case <-kc.dialed:
		default:
			// Still dialing: its connWriter (and the mutex in it) does not exist yet,
			// and it has no claims to time out.
			continue
		}
		if kc.err != nil {
			continue
		}
		kc.mu.Lock()
		for id, f := range kc.pending {
			if now.After(f.deadline) {
				delete(kc.pending, id)
				f.res, f.err = pdTimeout, fmt.Errorf("no answer from %s", kc.addr)
				close(f.ready)
			}
		}
		kc.mu.Unlock()
	}
}

// fetch claims key at the rendezvous addr, waiting up to wait for its prefill. err explains
// a mismatch (a claimed key) or an unreachable rendezvous.
func (c *kvClient) fetch(addr, key string, wait time.Duration, done, gone <-chan struct{}) (kvRecord, pdResult, error) {
	kc, err := c.conn(addr)
	if err != nil {
		if errors.Is(err, errClosed) {
			return kvRecord{}, pdClosed, err
		}
		return kvRecord{}, pdUnreachable, err
	}
	f := &kvFetch{deadline: time.Now().Add(wait + kvGrace), ready: make(chan struct{})}
	b := kc.begin()
	if kc.broken != nil {
		kc.mu.Unlock()
		return kvRecord{}, pdUnreachable, kc.broken
	}
	kc.nextID++
	f.id = kc.nextID
	kc.pending[f.id] = f
	b = append(b, "claim "...)
	b = strconv.AppendUint(b, f.id, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, wait.Milliseconds(), 10)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, key)
	kc.end(append(b, '\n'))
	select {
	case <-f.ready:
		return f.rec, f.res, f.err
	case <-done:
	case <-gone:
	}
	b = kc.begin()
	if kc.pending[f.id] == f {
		delete(kc.pending, f.id)
		b = append(b, "cancel "...)
		b = strconv.AppendUint(b, f.id, 10)
		b = append(b, '\n')
	}
	kc.end(b)
	return kvRecord{}, pdClosed, errClosed
}
