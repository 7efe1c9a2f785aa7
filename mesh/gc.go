package mesh

import (
	"time"

	"github.com/smg-go/smg/mesh/wire"
)

// tombstoneGC is the owner's side of tombstone collection (see the package documentation):
// when each of its tombstones was written, and the floor waiting for acknowledgements.
// Guarded by the node's lock.
type tombstoneGC struct {
	deletedAt map[string]time.Time
	// pending is the floor chosen in phase 1 (0: none); restamped are the live keys rewritten
	// above it, with the timestamp each must be acknowledged at.
	pending   uint64
	restamped map[string]uint64
}

// collectTombstonesLocked runs every round. Phase 1: once some of this router's tombstones
// are older than TombstoneHorizon, choose the floor F, the newest of their timestamps, and
// rewrite ("re-stamp") every live key of this router at or below F with a new timestamp, so
// that no current write of ours is at or below F. Phase 2, in this or a later round: once
// every ALIVE or SUSPECTED peer has acknowledged, on its direct stream, the re-stamped keys
// and the tombstones at or below F, publish F as "floor:<name>"; every store then drops our
// keys at or below F. The acknowledgements are not what makes this safe (the floor is); they
// keep a live peer from dropping a re-stamped worker before its new write arrives.
func (n *Node) collectTombstonesLocked(now time.Time) {
	g := &n.gc
	if g.pending == 0 {
		var f uint64
		for k, at := range g.deletedAt {
			if e := n.local[k]; now.Sub(at) >= n.cfg.TombstoneHorizon && e.Lamport > f {
				f = e.Lamport
			}
		}
		if f == 0 {
			return
		}
		g.pending, g.restamped = f, map[string]uint64{}
		n.restampLocked(f)
	}
	for name, p := range n.peers {
		if !p.probeable() {
			continue
		}
		st := n.streams[name]
		if st == nil {
			return
		}
		for k, l := range g.restamped {
			if v, ok := st.acked[k]; !ok || v.Lamport < l {
				return
			}
		}
		for k, e := range n.local {
			if e.Deleted && e.Lamport <= g.pending {
				if v, ok := st.acked[k]; !ok || v.Lamport < e.Lamport {
					return
				}
			}
		}
	}
	f := g.pending
	fe := wire.Entry{Key: floorKey(n.name), Lamport: f, Replica: n.name}
	n.local[fe.Key] = fe
	before := n.store.Len()
	n.store.Merge(fe)
	n.dropCollectedIntentsLocked(f)
	n.pruneAcksLocked()
	g.pending, g.restamped = 0, nil
	n.log.Debug("collected mesh tombstones", "floor", f, "removed_keys", before+1-n.store.Len())
}

// restampLocked rewrites every live key of this router at or below f above it.
func (n *Node) restampLocked(f uint64) {
	for k, e := range n.local {
		if _, isFloor := floorOwner(k); !isFloor && !e.Deleted && e.Lamport <= f {
			n.writeLocalLocked(k, e.Value, false)
			if n.gc.restamped != nil {
				n.gc.restamped[k] = n.local[k].Lamport
			}
		}
	}
}

// dropCollectedIntentsLocked forgets this router's tombstones at or below its floor f.
func (n *Node) dropCollectedIntentsLocked(f uint64) {
	for k, e := range n.local {
		if e.Deleted && e.Lamport <= f {
			delete(n.local, k)
			delete(n.gc.deletedAt, k)
		}
	}
}

// adoptFloorLocked runs when a peer sends this router's own floor above the one it holds:
// after a restart, the floor it published before. Its current keys are re-stamped above the
// floor (writes made since the restart may be below it and would be refused everywhere), and
// its tombstones below it forgotten: the CRDT counterpart of refuting a suspicion.
func (n *Node) adoptFloorLocked(e wire.Entry) {
	n.local[e.Key] = wire.Entry{Key: e.Key, Lamport: e.Lamport, Replica: e.Replica}
	n.lamport = max(n.lamport, e.Lamport)
	n.restampLocked(e.Lamport)
	n.dropCollectedIntentsLocked(e.Lamport)
	if n.gc.pending <= e.Lamport {
		n.gc.pending, n.gc.restamped = 0, nil
	}
	n.pruneAcksLocked()
}

// pruneAcksLocked forgets the acknowledgements of writes at or below their owner's floor:
// the acked maps would otherwise keep every key ever removed.
func (n *Node) pruneAcksLocked() {
	for _, st := range n.streams {
		for k, v := range st.acked {
			if o := keyOwner(k); o != "" && v.Lamport <= n.store.Floor(o) {
				delete(st.acked, k)
			}
		}
	}
}
