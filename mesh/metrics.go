package mesh

import (
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/mesh/wire"
)

// nodeMetrics are the spec's mesh metrics plus the counters of what the mesh drops or
// refuses. Per-peer series are created when a peer's stream first appears (control plane,
// never on the request path).
type nodeMetrics struct {
	set *metrics.Set

	mu        sync.Mutex
	emptyPeer bool
	rejected  *metrics.Counter
	// deltasDropped counts tree deltas a peer's stream could not accept.
	deltasDropped *metrics.Counter
	// tombstonesCollected and staleEntries count what owners' floors removed from the CRDT
	// store (see Store).
	tombstonesCollected, staleEntries *metrics.Counter
}

func newNodeMetrics(set *metrics.Set) *nodeMetrics {
	m := &nodeMetrics{set: set}
	m.rejected = set.GetOrCreateCounter(`smg_mesh_rejected_messages_total`)
	m.deltasDropped = set.GetOrCreateCounter(`smg_mesh_tree_deltas_dropped_total{reason="stream_busy"}`)
	m.tombstonesCollected = set.GetOrCreateCounter(`smg_mesh_tombstones_collected_total`)
	m.staleEntries = set.GetOrCreateCounter(`smg_mesh_stale_entries_total`)
	return m
}

func peerLabel(peer string) string { return `{peer=` + strconv.Quote(peer) + `}` }

// connected records an accepted sync stream from peer (router_mesh_peer_connections = 1). Like
// the spec's product, accepting a stream also sets the empty-peer series to 1, so the
// spec's dashboards and alerts (which filter peer!="") work unchanged.
func (m *nodeMetrics) connected(peer string) {
	m.set.GetOrCreateGauge(`router_mesh_peer_connections`+peerLabel(peer), nil).Set(1)
	m.mu.Lock()
	if !m.emptyPeer {
		m.emptyPeer = true
		m.set.GetOrCreateGauge(`router_mesh_peer_connections{peer=""}`, nil).Set(1)
	}
	m.mu.Unlock()
}

// disconnected records the end of an accepted stream from peer.
func (m *nodeMetrics) disconnected(peer string) {
	m.set.GetOrCreateGauge(`router_mesh_peer_connections`+peerLabel(peer), nil).Set(0)
	m.set.GetOrCreateCounter(`router_mesh_peer_reconnects_total` + peerLabel(peer)).Inc()
}

// roundDuration records the time to queue one round of updates on the stream to peer.
func (m *nodeMetrics) roundDuration(peer string, d time.Duration) {
	m.set.GetOrCreatePrometheusHistogram(`router_mesh_sync_round_duration_seconds` + peerLabel(peer)).Update(d.Seconds())
}

// statusChange counts a member's move to s (smg_mesh_member_status_changes_total{to}).
func (m *nodeMetrics) statusChange(s wire.Status) {
	m.set.GetOrCreateCounter(`smg_mesh_member_status_changes_total{to="` + s.String() + `"}`).Inc()
}
