package mesh

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/mesh/wire"
)

// Deps are the collaborators of a Mesh or a Node: what they need from the rest of the router,
// and the seams tests use. Start from DefaultDeps: Metrics, Logger, Clock and Spawn are
// required; Transport is required by NewNode.
type Deps struct {
	// Transport carries a Node's messages. Start ignores it and uses its gRPC transport;
	// NewNode needs it (tests pass an in-memory one).
	Transport Transport
	// Registry is the worker registry to sync (*worker.Registry). Nil: no worker sync.
	Registry Registry
	// Trees is the cache-aware state to sync (a *RadixTrees). Nil: no tree sync.
	Trees Trees
	// Metrics receives the mesh metrics.
	Metrics *metrics.Set
	// Logger receives the mesh's log.
	Logger *slog.Logger
	// Clock drives the rounds, timeouts and rate limits.
	Clock clock.Clock
	// RandSeed seeds the probe order and peer choices. Every value, 0 included, is used as
	// given, so a test can replay a run; the routers of one mesh should not share a seed
	// (they would shuffle alike): DefaultDeps sets a random one.
	RandSeed uint64
	// Spawn runs fire-and-forget work such as status broadcasts (DefaultDeps: a goroutine
	// each). Tests run it inline, so that a run is deterministic.
	Spawn func(func())
	// Listener, when set, is used instead of listening on cfg.ListenAddr (tests pass a
	// listener on a free port).
	Listener net.Listener
}

// DefaultDeps returns the production collaborators: a private metrics set, slog.Default(),
// the system clock, a goroutine per spawned task and a random RandSeed. The caller sets
// Registry and Trees, and Metrics and Logger to share the router's.
func DefaultDeps() Deps {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return Deps{
		Metrics:  metrics.NewSet(),
		Logger:   slog.Default(),
		Clock:    clock.Real{},
		Spawn:    func(f func()) { go f() },
		RandSeed: binary.LittleEndian.Uint64(b[:]),
	}
}

// validate reports the first required collaborator left nil.
func (d *Deps) validate() error {
	var missing string
	switch {
	case d.Metrics == nil:
		missing = "Metrics"
	case d.Logger == nil:
		missing = "Logger"
	case d.Clock == nil:
		missing = "Clock"
	case d.Spawn == nil:
		missing = "Spawn"
	default:
		return nil
	}
	return fmt.Errorf("mesh.Deps.%s is nil: set it, or start from mesh.DefaultDeps(), which sets every collaborator", missing)
}

// Mesh is a running mesh: the node, its gRPC transport and the worker sync.
type Mesh struct {
	cfg     Config
	node    *Node
	tr      *GRPCTransport
	ws      *WorkerSync
	log     *slog.Logger
	addr    net.Addr
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
}

// Start validates cfg, listens on the mesh port, and starts the gossip rounds and the worker
// sync. It returns once the listener is bound. Close (after Leave, on SIGTERM) stops it.
func Start(ctx context.Context, cfg Config, deps Deps) (*Mesh, error) {
	cfg.Enable = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	var tlsConfig *tls.Config
	if cfg.TLSEnabled() {
		tc, err := LoadMutualTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA)
		if err != nil {
			return nil, err
		}
		tlsConfig = tc
	} else {
		log.Warn("mesh port is plaintext and unauthenticated: anything that reaches it can join the cluster and publish workers; set --mesh-tls-cert, --mesh-tls-key and --mesh-tls-ca", "port", cfg.Port)
	}
	l := deps.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", cfg.ListenAddr()); err != nil {
			return nil, fmt.Errorf("cannot listen on mesh address %s: %w", cfg.ListenAddr(), err)
		}
	}
	tr, err := NewGRPCTransport(cfg, tlsConfig, deps)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	deps.Transport = tr
	cfg.MaxSyncBytes = max(1, min(cfg.MaxSyncBytes, cfg.MaxMessage/2)) // the peer's codec refuses a larger message
	node, err := NewNode(cfg, deps)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	tr.SetHandler(node)
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &Mesh{cfg: cfg, node: node, tr: tr, log: log, addr: l.Addr(), cancel: cancel}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		if err := tr.Serve(l); err != nil {
			log.Error("mesh listener stopped", "err", err)
		}
	}()
	if deps.Registry != nil {
		m.ws = NewWorkerSync(node, deps.Registry, log)
		if cfg.RefusesPeerWorkers() {
			m.ws.refuseImports = true
			log.Warn("the mesh is plaintext and --api-key protects the worker API: peers' workers are not imported (they would bypass the key); set --mesh-tls-cert, --mesh-tls-key and --mesh-tls-ca, or --mesh-allow-insecure")
		}
		m.ws.Reconcile(ctx) // publish this router's workers before the first round
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.ws.Run(ctx) }()
	}
	go func() { defer m.wg.Done(); m.rounds(ctx) }()
	log.Info("mesh started", "name", cfg.ServerName, "listen", l.Addr().String(), "advertise", cfg.AdvertiseAddr(), "peers", node.seedAddrs(), "tls", cfg.TLSEnabled())
	return m, nil
}

// rounds runs one Tick per round. A round blocked on a dead peer's connect timeout runs on
// while the next starts; at most two overlap.
func (m *Mesh) rounds(ctx context.Context) {
	t := m.node.deps.Clock.NewTicker(m.node.cfg.Round)
	defer t.Stop()
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		select {
		case sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				m.node.Tick(ctx)
			}()
		default:
		}
	}
}

// Node is the protocol node.
func (m *Mesh) Node() *Node { return m.node }

// Addr is the listener's address.
func (m *Mesh) Addr() net.Addr { return m.addr }

// PublishTree queues a cache-aware routing decision for the peers (Node.PublishTree). Safe
// for concurrent use; never blocks.
func (m *Mesh) PublishTree(model string, kind wire.TreeKind, path []byte, workerURL string) {
	m.node.PublishTree(model, kind, path, workerURL)
}

// PublishTokens queues a cache-aware routing decision of the token tree (Node.PublishTokens).
// Safe for concurrent use; never blocks.
func (m *Mesh) PublishTokens(model string, tokens []uint32, workerURL string) {
	m.node.PublishTokens(model, tokens, workerURL)
}

// AddPeer asks the mesh to contact a router at addr (IP:port), such as one found by router
// discovery; see Node.AddSeed.
func (m *Mesh) AddPeer(addr string) { m.node.AddSeed(addr) }

// Leave announces LEAVING to the peers; call it on SIGTERM before draining.
func (m *Mesh) Leave(ctx context.Context) { m.node.Leave(ctx) }

// Close stops the rounds, the worker sync and the transport.
func (m *Mesh) Close() {
	m.closeMu.Do(func() {
		m.cancel()
		m.tr.Close()
		m.wg.Wait()
		m.log.Info("mesh stopped", "name", m.cfg.ServerName)
	})
}

// Status is the body of GET /mesh/status.
type Status struct {
	Name    string         `json:"name"`
	Members []MemberStatus `json:"members"`
	Streams []StreamStatus `json:"streams"`
	Repairs []RepairStatus `json:"repairs"`
	Keys    int            `json:"crdt_keys"`
	// Tombstones is how many of Keys are tombstones not yet collected.
	Tombstones int `json:"crdt_tombstones"`
}

// MemberStatus is one row of the membership table.
type MemberStatus struct {
	Name        string `json:"name"`
	Address     string `json:"address"`
	Status      string `json:"status"`
	Incarnation uint64 `json:"incarnation"`
	Self        bool   `json:"self,omitempty"`
}

// StreamStatus is one open sync stream.
type StreamStatus struct {
	Peer        string `json:"peer"`
	Direction   string `json:"direction"` // "inbound" (the peer opened it) or "outbound"
	Unacked     int    `json:"unacked_entries"`
	IdleSeconds int    `json:"idle_seconds"`
}

// Status reports the membership table, the open sync streams and the repairs in flight.
func (n *Node) Status() Status {
	now := n.deps.Clock.Now()
	st := Status{Name: n.name, Repairs: n.Repairs()}
	n.mu.Lock()
	for i, m := range n.tableLocked() {
		st.Members = append(st.Members, MemberStatus{Name: m.Name, Address: m.Addr, Status: m.Status.String(), Incarnation: m.Incarnation, Self: i == 0})
	}
	for name, s := range n.streams {
		dir := "outbound"
		if s.inbound {
			dir = "inbound"
		}
		unacked := 0
		n.store.Range(func(e *wire.Entry) {
			if v, ok := s.acked[e.Key]; !ok || versionNewer(e, v) {
				unacked++
			}
		})
		st.Streams = append(st.Streams, StreamStatus{Peer: name, Direction: dir, Unacked: unacked, IdleSeconds: int(now.Sub(s.lastTraffic).Seconds())})
	}
	st.Keys = n.store.Len()
	st.Tombstones = n.store.Tombstones()
	n.mu.Unlock()
	sort.Slice(st.Streams, func(i, j int) bool { return st.Streams[i].Peer < st.Streams[j].Peer })
	return st
}

// StatusJSON is Status encoded for GET /mesh/status on the admin API.
func (m *Mesh) StatusJSON() []byte {
	b, _ := json.Marshal(m.node.Status())
	return b
}
