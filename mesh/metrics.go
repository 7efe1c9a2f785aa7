package mesh

import (
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
	"github.com/smg-go/smg/mesh/wire"
)

// nodeMetrics are the spec's mesh metrics plus the counters of what the mesh drops or
// refuses. A peer's series are created when its stream first appears (control plane, never on
// the request path), kept in peers, and unregistered when the node forgets the peer (see
// Node.forgetReplacedLocked), so a router restarted under random names does not add series
// for good.
type nodeMetrics struct {
	set *metrics.Set

	mu        sync.Mutex
	emptyPeer bool
	peers     map[string]*peerSeries
	rejected  *metrics.Counter
	// deltasDropped counts tree deltas a peer's stream could not accept.
	deltasDropped *metrics.Counter
	// tombstonesCollected and staleEntries count what owners' floors removed from the CRDT
	// store (see Store).
	tombstonesCollected, staleEntries *metrics.Counter
}

// peerSeries are one peer's series. Each is created on first use: a router reports
// connections only for the streams it accepts and round durations only for those it opened
// (spec: Monitoring).
type peerSeries struct {
	label         string
	connections   *metrics.Gauge
	reconnects    *metrics.Counter
	roundDuration *metrics.PrometheusHistogram
}

const (
	metricPeerConnections = `router_mesh_peer_connections`
	metricPeerReconnects  = `router_mesh_peer_reconnects_total`
	metricRoundDuration   = `router_mesh_sync_round_duration_seconds`
)

func newNodeMetrics(set *metrics.Set) *nodeMetrics {
	m := &nodeMetrics{set: set, peers: map[string]*peerSeries{}}
	m.rejected = set.GetOrCreateCounter(`smg_mesh_rejected_messages_total`)
	m.deltasDropped = set.GetOrCreateCounter(`smg_mesh_tree_deltas_dropped_total{reason="stream_busy"}`)
	m.tombstonesCollected = set.GetOrCreateCounter(`smg_mesh_tombstones_collected_total`)
	m.staleEntries = set.GetOrCreateCounter(`smg_mesh_stale_entries_total`)
	return m
}

// peerLocked returns peer's series holder, creating it on first use.
func (m *nodeMetrics) peerLocked(peer string) *peerSeries {
	p := m.peers[peer]
	if p == nil {
		p = &peerSeries{label: `{peer=` + promlabel.Quote(peer) + `}`}
		m.peers[peer] = p
	}
	return p
}

// connected records an accepted sync stream from peer (router_mesh_peer_connections = 1). Like
// the spec's product, accepting a stream also sets the empty-peer series to 1, so the
// spec's dashboards and alerts (which filter peer!="") work unchanged.
func (m *nodeMetrics) connected(peer string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peerLocked(peer)
	if p.connections == nil {
		p.connections = m.set.NewGauge(metricPeerConnections+p.label, nil)
	}
	p.connections.Set(1)
	if !m.emptyPeer {
		m.emptyPeer = true
		m.set.GetOrCreateGauge(metricPeerConnections+`{peer=""}`, nil).Set(1)
	}
}

// disconnected records the end of an accepted stream from peer.
func (m *nodeMetrics) disconnected(peer string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peerLocked(peer)
	if p.connections != nil {
		p.connections.Set(0)
	}
	if p.reconnects == nil {
		p.reconnects = m.set.NewCounter(metricPeerReconnects + p.label)
	}
	p.reconnects.Inc()
}

// roundDuration records the time to queue one round of updates on the stream to peer.
func (m *nodeMetrics) roundDuration(peer string, d time.Duration) {
	m.mu.Lock()
	p := m.peerLocked(peer)
	if p.roundDuration == nil {
		p.roundDuration = m.set.NewPrometheusHistogram(metricRoundDuration + p.label)
	}
	h := p.roundDuration
	m.mu.Unlock()
	h.Update(d.Seconds())
}

// forget unregisters peer's series: the node no longer knows the peer.
func (m *nodeMetrics) forget(peer string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peers[peer]
	if p == nil {
		return
	}
	delete(m.peers, peer)
	if p.connections != nil {
		m.set.UnregisterMetric(metricPeerConnections + p.label)
	}
	if p.reconnects != nil {
		m.set.UnregisterMetric(metricPeerReconnects + p.label)
	}
	if p.roundDuration != nil {
		m.set.UnregisterMetric(metricRoundDuration + p.label)
	}
}

// statusChange counts a member's move to s (smg_mesh_member_status_changes_total{to}).
func (m *nodeMetrics) statusChange(s wire.Status) {
	m.set.GetOrCreateCounter(`smg_mesh_member_status_changes_total{to="` + s.String() + `"}`).Inc()
}
