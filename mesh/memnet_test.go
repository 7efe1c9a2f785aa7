package mesh

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
)

// memNet is an in-memory network of nodes driven by a fake clock: Ping and PingReq are
// synchronous calls, stream messages are queued and delivered by flush, so a run is a
// deterministic function of the seeds. Every message goes through the wire codec, so nodes
// never share memory.
type memNet struct {
	t     testing.TB
	mu    sync.Mutex
	clock *clock.Fake

	nodes map[string]*Node // by address
	dead  map[string]bool  // process stopped
	// frozen: process frozen (freeze); also in dead, since it delivers nothing.
	frozen map[string]bool
	// firstProbe is when a frozen node was first probed (a ping naming it, direct or a
	// helper's), by address.
	firstProbe map[string]time.Time
	cut        map[[2]string]bool
	// lossy, when set, drops the direct Ping from one address to another.
	lossy func(from, to string) bool
	// loss is the fraction of datagrams dropped at random (setLoss): each leg of a Ping or
	// PingReq (request, answer) is lost on its own, as a UDP packet would be. Stream
	// messages ride a TCP connection, so loss delays them there but never drops them: here
	// they are never dropped.
	loss    float64
	lossRnd *rand.Rand
	// sent counts the encoded bytes each address sent: probes, answers and stream messages.
	sent map[string]int64
	// afterTick, when set, runs after each node's tick within a round.
	afterTick func()
	// tune, when set, adjusts the settings and collaborators of the nodes add makes.
	tune func(*Config, *Deps)

	queue   []delivery
	streams []*memStream
	trees   map[string]Trees // by address, for nodes made by add
}

type delivery struct {
	to     *memStream
	msg    []byte
	closed bool
}

var errUnreachable = errors.New("unreachable")

func newMemNet(t testing.TB) *memNet {
	return &memNet{t: t, clock: clock.NewFake(), nodes: map[string]*Node{}, dead: map[string]bool{}, frozen: map[string]bool{}, firstProbe: map[string]time.Time{}, cut: map[[2]string]bool{},
		trees: map[string]Trees{}, sent: map[string]int64{}}
}

func addrOf(i int) string { return fmt.Sprintf("10.0.%d.%d:39527", i/250, i%250+1) }

// nodeConfig is DefaultConfig for a node named name that peers dial at addr (IP:port) and
// that bootstraps from seeds.
func nodeConfig(t testing.TB, name, addr string, seeds ...string) Config {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ServerName, cfg.AdvertiseHost, cfg.Port, cfg.PeerURLs = name, ap.Addr().String(), int(ap.Port()), seeds
	return cfg
}

// testDeps is DefaultDeps with a quiet logger; each test sets the collaborators it drives.
func testDeps() Deps {
	d := DefaultDeps()
	d.Logger = testutil.Quiet
	return d
}

// add starts a node named name at addr with the given seeds.
func (m *memNet) add(name, addr string, seed uint64, seeds ...string) *Node {
	m.t.Helper()
	cfg := nodeConfig(m.t, name, addr, seeds...)
	deps := testDeps()
	deps.Transport = &memTransport{net: m, addr: addr}
	deps.Clock, deps.RandSeed = m.clock, seed
	deps.Spawn = func(f func()) { f() }
	deps.Trees = m.trees[addr]
	if m.tune != nil {
		m.tune(&cfg, &deps)
	}
	deps.Transport.(*memTransport).clock = deps.Clock
	n, err := NewNode(cfg, deps)
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.nodes[addr] = n
	delete(m.dead, addr)
	delete(m.frozen, addr)
	m.mu.Unlock()
	return n
}

// kill stops the node at addr: it no longer answers, and its streams break.
func (m *memNet) kill(addr string) {
	m.mu.Lock()
	m.dead[addr] = true
	delete(m.nodes, addr)
	m.mu.Unlock()
	m.breakStreams()
}

// vanish stops the node at addr silently, as a host that loses power or its network does:
// it no longer answers, and what its peers send on their streams to it is lost, but no
// stream breaks.
func (m *memNet) vanish(addr string) {
	m.mu.Lock()
	m.dead[addr] = true
	delete(m.nodes, addr)
	m.mu.Unlock()
}

// freeze stops the node at addr as SIGSTOP does: its connections stay open, so a call to it
// waits until its context ends rather than failing, and what its peers send on their
// streams to it is lost. The caller stops its rounds.
func (m *memNet) freeze(addr string) {
	m.mu.Lock()
	m.dead[addr], m.frozen[addr] = true, true
	delete(m.firstProbe, addr)
	delete(m.nodes, addr)
	m.mu.Unlock()
}

// hangIfFrozen waits until ctx ends and returns its error when addr is frozen, else nil. A
// probe, a call naming the frozen node as its target, is timed on clk.
func (m *memNet) hangIfFrozen(ctx context.Context, addr string, probe bool, clk clock.Clock) error {
	m.mu.Lock()
	frozen := m.frozen[addr]
	if _, seen := m.firstProbe[addr]; frozen && probe && !seen {
		m.firstProbe[addr] = clk.Now()
	}
	m.mu.Unlock()
	if !frozen {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// partition cuts every link between the two groups of addresses.
func (m *memNet) partition(as, bs []string) {
	m.mu.Lock()
	for _, a := range as {
		for _, b := range bs {
			m.cut[pair(a, b)] = true
		}
	}
	m.mu.Unlock()
	m.breakStreams()
}

// setLoss drops each datagram with probability p from now on, deterministically for seed.
func (m *memNet) setLoss(p float64, seed uint64) {
	m.mu.Lock()
	m.loss, m.lossRnd = p, rand.New(rand.NewPCG(seed, 0x1055))
	m.mu.Unlock()
}

// lost reports whether the next datagram is dropped.
func (m *memNet) lost() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loss > 0 && m.lossRnd.Float64() < m.loss
}

// bytesSent returns the bytes addr has sent so far.
func (m *memNet) bytesSent(addr string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[addr]
}

func (m *memNet) heal() {
	m.mu.Lock()
	clear(m.cut)
	m.mu.Unlock()
}

func (m *memNet) reachable(from, to string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.dead[from] && !m.dead[to] && m.nodes[to] != nil && !m.cut[pair(from, to)]
}

func (m *memNet) node(addr string) *Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[addr]
}

// breakStreams closes every stream whose link is now cut or whose end is dead.
func (m *memNet) breakStreams() {
	m.mu.Lock()
	var broken []*memStream
	for _, s := range m.streams {
		if !s.closed && (m.dead[s.local] || m.dead[s.remote] || m.cut[pair(s.local, s.remote)]) {
			broken = append(broken, s)
		}
	}
	m.mu.Unlock()
	for _, s := range broken {
		s.Close()
	}
}

// round advances the clock by one second, ticks every live node in address order and
// delivers the stream messages until none is left.
func (m *memNet) round() {
	m.mu.Lock()
	m.clock.Advance(time.Second)
	addrs := make([]string, 0, len(m.nodes))
	for a := range m.nodes {
		addrs = append(addrs, a)
	}
	m.mu.Unlock()
	sort.Strings(addrs)
	for _, a := range addrs {
		if n := m.node(a); n != nil {
			n.Tick(context.Background())
			m.flush()
			if m.afterTick != nil {
				m.afterTick()
			}
		}
	}
}

func (m *memNet) flush() {
	for i := 0; ; i++ {
		if i > 1_000_000 {
			m.t.Fatal("stream messages never stop")
		}
		m.mu.Lock()
		if len(m.queue) == 0 {
			m.mu.Unlock()
			return
		}
		d := m.queue[0]
		m.queue = m.queue[1:]
		m.mu.Unlock()
		if d.closed {
			d.to.h.StreamClosed(d.to)
			continue
		}
		m.mu.Lock()
		closed := d.to.closed
		m.mu.Unlock()
		if closed || !m.reachable(d.to.remote, d.to.local) {
			continue // the stream ended, or its receiving end vanished
		}
		var msg wire.Sync
		if err := wire.Decode(d.msg, &msg); err != nil {
			m.t.Fatal(err)
		}
		d.to.h.StreamMessage(d.to, &msg)
	}
}

type memTransport struct {
	net   *memNet
	addr  string
	clock clock.Clock // the node's
}

// carry sends msg from the router at from through the wire encoding, as the gRPC transport
// does, and counts its bytes.
func carry[T any](m *memNet, from string, msg *T) *T {
	b, err := wire.Encode(nil, msg)
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.sent[from] += int64(len(b))
	m.mu.Unlock()
	out := new(T)
	if err := wire.Decode(b, out); err != nil {
		m.t.Fatal(err)
	}
	return out
}

func (t *memTransport) Ping(ctx context.Context, addr string, msg *wire.Ping) (*wire.Ack, error) {
	if err := t.net.hangIfFrozen(ctx, addr, msg.Target != "", t.clock); err != nil {
		return nil, err
	}
	if !t.net.reachable(t.addr, addr) || (t.net.lossy != nil && t.net.lossy(t.addr, addr)) {
		return nil, errUnreachable
	}
	in := carry(t.net, t.addr, msg)
	if t.net.lost() {
		return nil, errUnreachable
	}
	ack := carry(t.net, addr, t.net.node(addr).HandlePing(ctx, in))
	if !t.net.reachable(addr, t.addr) || t.net.lost() {
		return nil, errUnreachable
	}
	return ack, nil
}

func (t *memTransport) PingReq(ctx context.Context, addr string, msg *wire.PingReq) (*wire.Ack, error) {
	if err := t.net.hangIfFrozen(ctx, addr, false, t.clock); err != nil {
		return nil, err
	}
	if !t.net.reachable(t.addr, addr) {
		return nil, errUnreachable
	}
	in := carry(t.net, t.addr, msg)
	if t.net.lost() {
		return nil, errUnreachable
	}
	ack := carry(t.net, addr, t.net.node(addr).HandlePingReq(ctx, in))
	if t.net.lost() {
		return nil, errUnreachable
	}
	return ack, nil
}

func (t *memTransport) OpenSync(_ context.Context, addr string, h Handler) (Stream, error) {
	if !t.net.reachable(t.addr, addr) {
		return nil, errUnreachable
	}
	local := &memStream{net: t.net, local: t.addr, remote: addr, h: h}
	remote := &memStream{net: t.net, local: addr, remote: t.addr, h: t.net.node(addr)}
	local.peer, remote.peer = remote, local
	t.net.mu.Lock()
	t.net.streams = append(t.net.streams, local, remote)
	t.net.mu.Unlock()
	return local, nil
}

type memStream struct {
	net           *memNet
	local, remote string
	h             Handler
	peer          *memStream
	closed        bool // guarded by net.mu
	// full, when set, makes Send report ErrStreamBusy.
	full bool
	// deliverOnly, when set, silently loses the messages it rejects.
	deliverOnly func(*wire.Sync) bool
}

func (s *memStream) Send(msg *wire.Sync) error {
	b, err := wire.Encode(nil, msg)
	if err != nil {
		return err
	}
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.closed {
		return ErrStreamClosed
	}
	if s.full {
		return ErrStreamBusy
	}
	if s.deliverOnly != nil && !s.deliverOnly(msg) {
		return nil
	}
	s.net.queue = append(s.net.queue, delivery{to: s.peer, msg: b})
	s.net.sent[s.local] += int64(len(b))
	return nil
}

func (s *memStream) Close() {
	s.net.mu.Lock()
	defer s.net.mu.Unlock()
	if s.closed {
		return
	}
	s.closed, s.peer.closed = true, true
	s.net.queue = append(s.net.queue, delivery{to: s, closed: true}, delivery{to: s.peer, closed: true})
}
