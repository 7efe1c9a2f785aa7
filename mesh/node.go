package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/smg-go/smg/mesh/wire"
)

// Node is one router's side of the mesh protocol: SWIM membership, the CRDT store and its
// per-peer sync, and cache-tree deltas and repair. It does no I/O of its own: the Transport
// does, and Tick runs one gossip round. See the package documentation.
type Node struct {
	cfg  Config
	deps Deps
	name string // cfg.ServerName
	addr string // cfg.AdvertiseAddr(): the IP:port peers dial
	log  *slog.Logger
	met  *nodeMetrics

	mu      sync.Mutex
	rnd     *rand.Rand
	self    wire.Member
	peers   map[string]*peer
	order   []string // probe order: shuffled round-robin over peers
	next    int
	seeds   []*seed
	round   uint64
	pending bool // a status change to broadcast

	lamport  uint64
	store    *Store
	local    map[string]wire.Entry // this router's own keys: the owner's intent
	streams  map[string]*syncState
	opening  map[string]bool
	onChange []func()

	gc tombstoneGC

	trees      treeSync
	lastRepair RepairStatus // the last repair that completed
	lastStatus string       // the membership table logStatus logged last
}

type seed struct {
	addr      string
	next      time.Time
	backoff   time.Duration
	contacted bool
}

// syncState is one pair's sync stream as this side sees it.
type syncState struct {
	stream      Stream
	inbound     bool
	acked       map[string]wire.Version // the newest version of each key the peer acknowledged
	lastTraffic time.Time
	lastSent    time.Time
}

// NewNode returns a node that knows only itself and its bootstrap peers. cfg names it
// (ServerName, AdvertiseAddr), lists the peers (PeerURLs) and sets the protocol's timing and
// sizes; it is validated as an enabled mesh's. deps.Transport carries its messages and is
// required; the other collaborators default as Deps says.
func NewNode(cfg Config, deps Deps) (*Node, error) {
	cfg.Enable = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Transport == nil {
		return nil, fmt.Errorf("mesh node %s needs a transport: set mesh.Deps.Transport (mesh.Start sets its gRPC one)", cfg.ServerName)
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		deps:    deps,
		name:    cfg.ServerName,
		addr:    cfg.AdvertiseAddr(),
		log:     deps.Logger.With("mesh_node", cfg.ServerName),
		rnd:     rand.New(rand.NewPCG(deps.RandSeed, 0x5eed)),
		peers:   map[string]*peer{},
		store:   NewStore(),
		local:   map[string]wire.Entry{},
		streams: map[string]*syncState{},
		opening: map[string]bool{},
		gc:      tombstoneGC{deletedAt: map[string]time.Time{}},
	}
	n.self = wire.Member{Name: n.name, Addr: n.addr, Status: wire.StatusAlive}
	n.met = newNodeMetrics(deps.Metrics)
	n.store.collected, n.store.stale = n.met.tombstonesCollected, n.met.staleEntries
	n.trees.init(&n.cfg, &n.deps)
	for _, u := range cfg.PeerURLs {
		a, _ := ParsePeerURL(u) // Validate checked it
		if a != n.addr {
			n.seeds = append(n.seeds, &seed{addr: a})
		}
	}
	return n, nil
}

// seedAddrs returns the bootstrap peers' addresses.
func (n *Node) seedAddrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	addrs := make([]string, len(n.seeds))
	for i, s := range n.seeds {
		addrs[i] = s.addr
	}
	return addrs
}

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// Self returns this node's own membership row.
func (n *Node) Self() wire.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.self
}

// Members returns the membership table, this node first, then by name.
func (n *Node) Members() []wire.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tableLocked()
}

func (n *Node) tableLocked() []wire.Member {
	t := make([]wire.Member, 0, len(n.peers)+1)
	t = append(t, n.self)
	for _, p := range n.peers {
		t = append(t, p.Member)
	}
	sort.Slice(t[1:], func(i, j int) bool { return t[1+i].Name < t[1+j].Name })
	return t
}

// Tick runs one gossip round: retry bootstrap peers, expire suspicions, probe the next peer
// (and every ReconnectEvery rounds one DOWN peer), broadcast status changes, and run the sync
// streams. It blocks for the round's I/O; the runtime calls it from its own goroutine every
// Round, tests call it directly.
func (n *Node) Tick(ctx context.Context) {
	now := n.deps.Clock.Now()
	n.mu.Lock()
	n.round++
	n.expireSuspicionsLocked(now)
	n.forgetReplacedLocked()
	n.collectTombstonesLocked(now)
	seeds := n.dueSeedsLocked(now)
	target := n.nextTargetLocked(now)
	var reconnect string
	if n.round%uint64(n.cfg.ReconnectEvery) == 0 {
		reconnect = n.reconnectTargetLocked(now)
	}
	n.mu.Unlock()

	for _, s := range seeds {
		n.contactSeed(ctx, s)
	}
	if target != "" {
		n.probe(ctx, target)
	}
	if reconnect != "" {
		n.probe(ctx, reconnect)
	}
	n.broadcast(ctx)
	n.syncRound(ctx)
	n.logStatus()
}

func (n *Node) dueSeedsLocked(now time.Time) []*seed {
	// Lost contact with everyone: go back to the bootstrap list.
	if len(n.seeds) > 0 && !n.anyProbeableLocked() {
		for _, s := range n.seeds {
			s.contacted = false
		}
	}
	var due []*seed
	for _, s := range n.seeds {
		if !s.contacted && !now.Before(s.next) {
			due = append(due, s)
		}
	}
	return due
}

func (n *Node) anyProbeableLocked() bool {
	for _, p := range n.peers {
		if p.probeable() {
			return true
		}
	}
	return false
}

func (n *Node) contactSeed(ctx context.Context, s *seed) {
	ack, err := n.call(ctx, func(ctx context.Context) (*wire.Ack, error) {
		return n.deps.Transport.Ping(ctx, s.addr, n.pingMsg(""))
	})
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.deps.Clock.Now()
	if err == nil && ack.OK {
		s.contacted, s.backoff = true, 0
		n.mergeLocked(ack.Members, now)
		n.log.Info("joined mesh through bootstrap peer", "peer", s.addr, "members", len(n.peers)+1)
		return
	}
	s.backoff = nextBackoff(s.backoff, n.cfg.BackoffBase, n.cfg.BackoffMax)
	s.next = now.Add(s.backoff)
	n.log.Warn("cannot reach mesh bootstrap peer; retrying", "peer", s.addr, "retry_in", s.backoff, "err", errString(err, ack))
}

func errString(err error, ack *wire.Ack) string {
	if err != nil {
		return err.Error()
	}
	if ack != nil && !ack.OK {
		return "peer answered for another name"
	}
	return ""
}

func nextBackoff(cur, base, max time.Duration) time.Duration {
	if cur == 0 {
		return base
	}
	return min(2*cur, max)
}

// nextTargetLocked returns the next peer to probe, skipping peers in redial backoff:
//  1. a SUSPECTED peer, the one suspected longest, so that a dead router's second failed
//     probe (DOWN) comes the round after its suspicion reaches this router rather than when
//     the round-robin reaches it (up to N-1 rounds);
//  2. an ALIVE peer whose sync stream broke (a killed process's connections are reset at
//     once), so that its first failed probe does not wait for the round-robin either;
//  3. otherwise a shuffled round-robin over ALIVE and SUSPECTED peers (memberlist's order,
//     which bounds the time before every peer is probed, where picking at random each round
//     does not).
func (n *Node) nextTargetLocked(now time.Time) string {
	var first *peer
	for _, name := range n.order {
		p := n.peers[name]
		if p == nil || p.probing || now.Before(p.nextDial) {
			continue
		}
		switch {
		case p.Status == wire.StatusSuspected:
			if first == nil || first.Status != wire.StatusSuspected || p.suspectAt.Before(first.suspectAt) {
				first = p
			}
		case p.Status == wire.StatusAlive && p.probeSoon && first == nil:
			first = p
		}
	}
	if first != nil {
		first.probing, first.probeSoon = true, false
		return first.Name
	}
	for tries := 0; tries <= len(n.order); tries++ {
		if n.next >= len(n.order) {
			n.rnd.Shuffle(len(n.order), func(i, j int) { n.order[i], n.order[j] = n.order[j], n.order[i] })
			n.next = 0
		}
		if len(n.order) == 0 {
			return ""
		}
		name := n.order[n.next]
		n.next++
		p := n.peers[name]
		if p != nil && p.probeable() && !p.probing && !now.Before(p.nextDial) {
			p.probing = true
			return name
		}
	}
	return ""
}

// reconnectTargetLocked picks one DOWN peer at random to probe, so that routers separated
// long enough to mark each other DOWN find each other again when the network heals: the
// spec's product never probes a DOWN router again.
func (n *Node) reconnectTargetLocked(now time.Time) string {
	var down []string
	for name, p := range n.peers {
		if p.Status == wire.StatusDown && !p.probing && !now.Before(p.nextDial) {
			down = append(down, name)
		}
	}
	if len(down) == 0 {
		return ""
	}
	sort.Strings(down)
	name := down[n.rnd.IntN(len(down))]
	n.peers[name].probing = true
	return name
}

func (n *Node) pingMsg(target string) *wire.Ping {
	n.mu.Lock()
	defer n.mu.Unlock()
	return &wire.Ping{From: n.name, Target: target, Members: n.tableLocked()}
}

func (n *Node) call(ctx context.Context, f func(context.Context) (*wire.Ack, error)) (*wire.Ack, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	return f(ctx)
}

// probe pings name directly, then indirectly through up to IndirectProbes ALIVE peers, and
// applies the outcome. The probe fails when nothing reached the target within Round, the
// protocol period (memberlist's probe interval), whatever RequestTimeout is: a frozen router
// (its connections open, nothing answering) is then suspected one round after it froze,
// where waiting out RequestTimeout would take ten.
func (n *Node) probe(ctx context.Context, name string) {
	n.mu.Lock()
	p := n.peers[name]
	target := p.Member
	n.mu.Unlock()

	// The calls carry the probe's deadline (gRPC sends it to the peer, so a helper gives up
	// with us); the probe itself ends on the node's clock, and cancels the calls still pending.
	pctx, cancel := context.WithTimeout(ctx, n.cfg.Round)
	defer cancel()
	deadline := n.deps.Clock.NewTimer(n.cfg.Round)
	defer deadline.Stop()
	timer := n.deps.Clock.NewTimer(n.cfg.ProbeTimeout)

	direct := make(chan *wire.Ack, 1) // the answer, or nil when the ping failed
	n.deps.Spawn(func() {
		ack, err := n.deps.Transport.Ping(pctx, target.Addr, n.pingMsg(name))
		if err != nil || !ack.OK {
			ack = nil
		}
		direct <- ack
	})
	var ok bool
	select {
	case ack := <-direct:
		timer.Stop()
		if ok = ack != nil; ok {
			n.merge(ack.Members)
		} else {
			ok = n.probeIndirect(pctx, target, nil, deadline.C())
		}
	case <-timer.C():
		// Unanswered within ProbeTimeout (memberlist's order): the helpers are asked while the
		// direct ping may still answer, until the probe's deadline.
		ok = n.probeIndirect(pctx, target, direct, deadline.C())
	}

	n.mu.Lock()
	now := n.deps.Clock.Now()
	p.probing = false
	if ok {
		p.backoff, p.nextDial = 0, time.Time{}
	} else {
		p.backoff = nextBackoff(p.backoff, n.cfg.BackoffBase, n.cfg.BackoffMax)
		p.nextDial = now.Add(p.backoff)
		// Apply the failure only to the claim we probed: the member may have refuted
		// meanwhile.
		if p.Incarnation == target.Incarnation {
			switch p.Status {
			case wire.StatusAlive:
				n.setStatusLocked(p, wire.StatusSuspected, now)
				n.pending = true
			case wire.StatusSuspected:
				n.setStatusLocked(p, wire.StatusDown, now)
				n.pending = true
			}
		}
	}
	open := ok && n.claimStreamLocked(p)
	addr := p.Addr
	n.mu.Unlock()
	if open {
		n.openStream(ctx, name, addr)
	}
}

// probeIndirect asks up to IndirectProbes ALIVE peers at once to ping target, and waits for
// the first that reached it, or for the direct ping when it is still pending, until all
// failed or deadline fires.
func (n *Node) probeIndirect(ctx context.Context, target wire.Member, direct <-chan *wire.Ack, deadline <-chan time.Time) bool {
	n.mu.Lock()
	var helpers []wire.Member
	for _, p := range n.peers {
		if p.Status == wire.StatusAlive && p.Name != target.Name {
			helpers = append(helpers, p.Member)
		}
	}
	sort.Slice(helpers, func(i, j int) bool { return helpers[i].Name < helpers[j].Name })
	n.rnd.Shuffle(len(helpers), func(i, j int) { helpers[i], helpers[j] = helpers[j], helpers[i] })
	if len(helpers) > n.cfg.IndirectProbes {
		helpers = helpers[:n.cfg.IndirectProbes]
	}
	table := n.tableLocked()
	n.mu.Unlock()
	// The helpers are asked at once, not one after another: a target that hangs rather than
	// refuses (a frozen process, a host gone without resetting its connections) holds each
	// request until the deadline, so in turn they would not fit in it.
	waiting := len(helpers)
	reached := make(chan bool, waiting+1) // buffered: the calls not waited for never block
	if direct != nil {
		// Pending only when Spawn runs work on its own goroutine: inline, the ping is done.
		waiting++
		n.deps.Spawn(func() {
			ack := <-direct
			if ack != nil {
				n.merge(ack.Members)
			}
			reached <- ack != nil
		})
	}
	for _, h := range helpers {
		n.deps.Spawn(func() {
			ack, err := n.deps.Transport.PingReq(ctx, h.Addr, &wire.PingReq{From: n.name, Target: target, Members: table})
			if err == nil {
				n.merge(ack.Members)
			}
			reached <- err == nil && ack.OK
		})
	}
	for range waiting {
		select {
		case ok := <-reached:
			if ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
	return false
}

// expireSuspicionsLocked declares DOWN the members suspected for longer than SuspectTimeout
// without refuting.
func (n *Node) expireSuspicionsLocked(now time.Time) {
	for _, p := range n.peers {
		if p.Status == wire.StatusSuspected && now.Sub(p.suspectAt) >= n.cfg.SuspectTimeout {
			n.setStatusLocked(p, wire.StatusDown, now)
			n.pending = true
		}
	}
}

// broadcast sends the membership table to every ALIVE or SUSPECTED peer after a status change
// (the spec broadcasts to ALIVE peers; the suspected one is included so that it can refute).
func (n *Node) broadcast(ctx context.Context) {
	n.mu.Lock()
	if !n.pending {
		n.mu.Unlock()
		return
	}
	n.pending = false
	var to []wire.Member
	for _, p := range n.peers {
		if p.probeable() {
			to = append(to, p.Member)
		}
	}
	sort.Slice(to, func(i, j int) bool { return to[i].Name < to[j].Name })
	msg := &wire.Ping{From: n.name, Members: n.tableLocked()}
	n.mu.Unlock()
	for _, m := range to {
		addr := m.Addr
		n.deps.Spawn(func() {
			ack, err := n.call(ctx, func(ctx context.Context) (*wire.Ack, error) {
				return n.deps.Transport.Ping(ctx, addr, msg)
			})
			if err == nil && ack.OK {
				n.merge(ack.Members)
			}
		})
	}
}

// claimStreamLocked reports whether this router opens the pair's sync stream with p now, and
// if so marks it opening: p is ALIVE, this router's name sorts first (the spec's opener), and
// the pair has no stream open or opening.
func (n *Node) claimStreamLocked(p *peer) bool {
	if p.Status != wire.StatusAlive || n.self.Status != wire.StatusAlive || n.name >= p.Name || n.streams[p.Name] != nil || n.opening[p.Name] {
		return false
	}
	n.opening[p.Name] = true
	return true
}

// HandlePing answers a probe: it adopts the newer rows of the sender's table and returns its
// own. It answers OK only when it is the router the sender meant. A successful ping from an
// ALIVE peer, either way, is what opens the pair's stream (by the router whose name sorts
// first): the stream opens when either router first reaches the other, not only when the
// opener's round-robin reaches the other, which at 50 routers takes up to 49 rounds.
func (n *Node) HandlePing(ctx context.Context, m *wire.Ping) *wire.Ack {
	n.mergeInbound(ctx, m.Members)
	n.mu.Lock()
	if m.Target != "" && m.Target != n.name {
		n.mu.Unlock()
		return &wire.Ack{From: n.name}
	}
	ack := &wire.Ack{From: n.name, OK: true, Members: n.tableLocked()}
	var open bool
	var addr string
	if p := n.peers[m.From]; p != nil {
		open, addr = n.claimStreamLocked(p), p.Addr
	}
	n.mu.Unlock()
	if open {
		// Not on the caller's goroutine: the answer must not wait for the stream.
		n.deps.Spawn(func() { n.openStream(context.WithoutCancel(ctx), m.From, addr) })
	}
	return ack
}

// HandlePingReq probes m.Target on the sender's behalf.
func (n *Node) HandlePingReq(ctx context.Context, m *wire.PingReq) *wire.Ack {
	n.mergeInbound(ctx, m.Members)
	// Bounded by the asker's deadline (it arrives with the call) and by ProbeTimeout, as
	// memberlist's helper is: a helper's answer past the asker's round is of no use.
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ProbeTimeout)
	defer cancel()
	ack, err := n.deps.Transport.Ping(ctx, m.Target.Addr, n.pingMsg(m.Target.Name))
	ok := err == nil && ack.OK
	if ok {
		n.merge(ack.Members)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return &wire.Ack{From: n.name, OK: ok, Members: n.tableLocked()}
}

func (n *Node) merge(ms []wire.Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mergeLocked(ms, n.deps.Clock.Now())
}

// mergeInbound merges the table of a router that called this one. A claim that this router
// is not ALIVE is refuted to every peer at once rather than in the next round: its peers
// probe a suspect first, and each of those probes that a lost packet fails would mark a live
// router DOWN.
func (n *Node) mergeInbound(ctx context.Context, ms []wire.Member) {
	n.mu.Lock()
	before := n.self.Incarnation
	n.mergeLocked(ms, n.deps.Clock.Now())
	refuted := n.self.Incarnation > before && n.pending
	n.mu.Unlock()
	if refuted {
		n.deps.Spawn(func() { n.broadcast(context.WithoutCancel(ctx)) })
	}
}

// mergeLocked adopts every row that overrides ours, and refutes any claim that this node is
// not ALIVE by raising its incarnation above the claim's.
func (n *Node) mergeLocked(ms []wire.Member, now time.Time) {
	for _, m := range ms {
		if m.Name == "" || m.Addr == "" {
			continue
		}
		if m.Name == n.name {
			n.refuteLocked(m)
			continue
		}
		p := n.peers[m.Name]
		if p == nil {
			if departed(m.Status) && n.addrTakenLocked(m.Addr) {
				continue // a router restarted under another name: forgotten (forgetReplacedLocked)
			}
			p = &peer{Member: m, since: now}
			if m.Status == wire.StatusSuspected {
				p.suspectAt = now
			}
			n.peers[m.Name] = p
			// A new peer goes to a random place in the probe order.
			i := n.rnd.IntN(len(n.order) + 1)
			n.order = append(n.order, "")
			copy(n.order[i+1:], n.order[i:])
			n.order[i] = m.Name
			if m.Status == wire.StatusAlive {
				n.trees.peerJoinedLocked()
			}
			continue
		}
		if !overrides(m, p.Member) {
			continue
		}
		old := p.Status
		p.Incarnation, p.Addr = m.Incarnation, m.Addr
		if m.Status != old {
			n.setStatusLocked(p, m.Status, now)
		}
	}
}

// forgetReplacedLocked removes the DOWN or LEAVING members whose address an ALIVE member or
// this router now holds: a router restarted there under another name (a random pod name, say),
// which will never answer under the old one again. Without it the table, the reconnect probes
// and the per-peer metric series would grow with every such restart. A router that truly comes
// back under the old name re-enters the table with its first message.
func (n *Node) forgetReplacedLocked() {
	for name, p := range n.peers {
		if !departed(p.Status) || !n.addrTakenLocked(p.Addr) {
			continue
		}
		delete(n.peers, name)
		if i := slices.Index(n.order, name); i >= 0 {
			n.order = slices.Delete(n.order, i, i+1)
			if n.next > i {
				n.next--
			}
		}
		if st := n.streams[name]; st != nil {
			n.deps.Spawn(st.stream.Close) // outside the lock: the transport calls StreamClosed
		}
		n.met.forget(name)
		n.log.Info("forgot a mesh member: another router now has its address", "member", name, "addr", p.Addr, "status", p.Status.String())
	}
}

// departed reports whether s is a status a router that holds it does not probe as a peer.
func departed(s wire.Status) bool { return s == wire.StatusDown || s == wire.StatusLeaving }

// addrTakenLocked reports whether addr is this router's or an ALIVE peer's.
func (n *Node) addrTakenLocked(addr string) bool {
	if addr == n.self.Addr {
		return true
	}
	for _, p := range n.peers {
		if p.Addr == addr && p.Status == wire.StatusAlive {
			return true
		}
	}
	return false
}

func (n *Node) refuteLocked(m wire.Member) {
	if n.self.Status == wire.StatusLeaving {
		return
	}
	if m.Status != wire.StatusAlive && m.Incarnation >= n.self.Incarnation {
		n.self.Incarnation = m.Incarnation + 1
		n.pending = true
		n.log.Info("refuting a claim about this router", "claimed", m.Status.String(), "incarnation", n.self.Incarnation)
	} else if m.Incarnation > n.self.Incarnation {
		n.self.Incarnation = m.Incarnation
	}
}

func (n *Node) setStatusLocked(p *peer, s wire.Status, now time.Time) {
	old := p.Status
	p.Status, p.since = s, now
	switch s {
	case wire.StatusSuspected:
		p.suspectAt = now
	case wire.StatusAlive:
		p.backoff, p.nextDial = 0, time.Time{}
		if old == wire.StatusDown || old == wire.StatusLeaving {
			n.trees.peerJoinedLocked()
		}
	case wire.StatusDown, wire.StatusLeaving:
		if st := n.streams[p.Name]; st != nil {
			// Close outside the lock: the transport calls StreamClosed.
			s := st.stream
			n.deps.Spawn(s.Close)
		}
	}
	n.met.statusChange(s)
	n.log.Info("mesh member status changed", "member", p.Name, "from", old.String(), "to", s.String(), "incarnation", p.Incarnation)
}

// AddSeed adds addr (IP:port) to the bootstrap list, as if it had been given in
// --mesh-peer-urls: the node contacts it, with backoff, until first contact, and SWIM takes
// over from there. Router discovery (Kubernetes) calls it for every router pod that turns
// Ready; an address already known is ignored.
func (n *Node) AddSeed(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == n.addr {
		return
	}
	for _, s := range n.seeds {
		if s.addr == addr {
			return
		}
	}
	for _, p := range n.peers {
		if p.Addr == addr && p.probeable() {
			return
		}
	}
	n.seeds = append(n.seeds, &seed{addr: addr})
}

// Leave announces LEAVING to every live peer and waits for the announcements (or ctx). Peers
// stop probing this router; its workers stay registered on them.
func (n *Node) Leave(ctx context.Context) {
	n.mu.Lock()
	n.self.Status = wire.StatusLeaving
	var to []string
	for _, p := range n.peers {
		if p.probeable() {
			to = append(to, p.Addr)
		}
	}
	msg := &wire.Ping{From: n.name, Members: n.tableLocked()}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, addr := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = n.call(ctx, func(ctx context.Context) (*wire.Ack, error) { return n.deps.Transport.Ping(ctx, addr, msg) })
		}()
	}
	wg.Wait()
}

// logStatus logs the membership table (the spec's "Status:" line): at INFO in the rounds it
// changed, so `grep 'Status:' | tail -n 1` (spec: Troubleshooting) shows the current table,
// and at DEBUG in the others, rather than every round at INFO.
func (n *Node) logStatus() {
	if !n.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	n.mu.Lock()
	t := n.tableLocked()
	b := make([]byte, 0, 32*len(t))
	b = append(b, "Status:"...)
	for _, m := range t {
		b = append(b, ' ')
		b = append(b, m.Name...)
		b = append(b, '@')
		b = append(b, m.Addr...)
		b = append(b, '=')
		b = append(b, m.Status.String()...)
		b = append(b, "/inc="...)
		b = appendUint(b, m.Incarnation)
	}
	line := string(b)
	changed := line != n.lastStatus
	n.lastStatus = line
	n.mu.Unlock()
	if changed {
		n.log.Info(line)
	} else {
		n.log.Debug(line)
	}
}

func appendUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}
