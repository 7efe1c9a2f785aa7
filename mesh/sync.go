package mesh

import (
	"bytes"
	"context"
	"sort"

	"github.com/smg-go/smg/mesh/wire"
)

// SetLocal writes key as its owner: a new Lamport timestamp, replicated to every peer until
// each acknowledges. Writing the value a key already has is a no-op.
func (n *Node) SetLocal(key string, value []byte) {
	n.writeLocal(key, value, false)
}

// DeleteLocal removes a key this router owns, leaving a tombstone that wins over every
// earlier write.
func (n *Node) DeleteLocal(key string) {
	n.writeLocal(key, nil, true)
}

func (n *Node) writeLocal(key string, value []byte, deleted bool) {
	n.mu.Lock()
	if cur, ok := n.local[key]; ok && cur.Deleted == deleted && bytes.Equal(cur.Value, value) {
		n.mu.Unlock()
		return
	}
	if _, ok := n.local[key]; !ok && deleted {
		if e := n.store.Get(key); e == nil || e.Deleted {
			n.mu.Unlock()
			return
		}
	}
	n.writeLocalLocked(key, value, deleted)
	n.mu.Unlock()
	n.notify()
}

func (n *Node) writeLocalLocked(key string, value []byte, deleted bool) {
	n.lamport++
	e := wire.Entry{Key: key, Value: append([]byte(nil), value...), Lamport: n.lamport, Replica: n.name, Deleted: deleted}
	n.local[key] = e
	n.store.Merge(e)
	if deleted {
		n.gc.deletedAt[key] = n.deps.Clock.Now()
	} else {
		delete(n.gc.deletedAt, key)
	}
}

// LocalKeys returns the keys this router owns and has not deleted.
func (n *Node) LocalKeys() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var keys []string
	for k, e := range n.local {
		if !e.Deleted {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// Entries returns a copy of every live (not deleted) entry, sorted by key.
func (n *Node) Entries() []wire.Entry {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]wire.Entry, 0, n.store.Len())
	n.store.Range(func(e *wire.Entry) {
		if !e.Deleted {
			c := *e
			c.Value = append([]byte(nil), e.Value...)
			out = append(out, c)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// OnChange registers fn to run after the store changes (from any goroutine, outside the
// node's lock). fn must not block: signal a goroutine of your own.
func (n *Node) OnChange(fn func()) {
	n.mu.Lock()
	n.onChange = append(n.onChange, fn)
	n.mu.Unlock()
}

func (n *Node) notify() {
	n.mu.Lock()
	fns := n.onChange
	n.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// checkOwnKeyLocked runs when a peer sends a write of one of this router's keys. Only the
// owner writes its keys, so such a write is an echo or a leftover from before a restart; if
// it differs from what this router holds now, the owner rewrites its intent with a newer
// timestamp (the CRDT counterpart of refuting a suspicion).
func (n *Node) checkOwnKeyLocked(key string) {
	e := n.store.Get(key)
	if e == nil {
		return // a write at or below this router's floor: refused, and gone for good
	}
	intent, ok := n.local[key]
	if _, isFloor := floorOwner(key); isFloor {
		if e.Lamport > intent.Lamport {
			n.adoptFloorLocked(*e)
		}
		return
	}
	switch {
	case !ok && !e.Deleted:
		n.writeLocalLocked(key, nil, true)
	case ok && (e.Lamport != intent.Lamport || e.Deleted != intent.Deleted):
		n.writeLocalLocked(key, intent.Value, intent.Deleted)
	}
}

func (n *Node) openStream(ctx context.Context, name, addr string) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	s, err := n.deps.Transport.OpenSync(ctx, addr, n)
	n.mu.Lock()
	delete(n.opening, name)
	if err != nil {
		n.mu.Unlock()
		n.log.Debug("cannot open mesh sync stream", "peer", name, "err", err)
		return
	}
	if n.streams[name] != nil {
		n.mu.Unlock()
		s.Close()
		return
	}
	now := n.deps.Clock.Now()
	n.streams[name] = &syncState{stream: s, acked: map[string]wire.Version{}, lastTraffic: now}
	n.mu.Unlock()
	// The hello names this router, so the accepting side knows whose stream it is.
	_ = s.Send(&wire.Sync{From: n.name})
}

// StreamMessage applies one sync message: CRDT entries (acknowledged at once), acks, tree
// deltas, repair requests and pages.
func (n *Node) StreamMessage(s Stream, m *wire.Sync) {
	if m.From == "" || m.From == n.name {
		n.met.rejected.Inc()
		s.Close()
		return
	}
	now := n.deps.Clock.Now()
	n.mu.Lock()
	st := n.streams[m.From]
	if st == nil || st.stream != s {
		if st != nil && st.stream != s {
			old := st.stream
			n.deps.Spawn(old.Close)
		}
		// A new inbound stream (or the peer replaced its stream after a restart): it has
		// acknowledged nothing yet, so everything is sent again.
		st = &syncState{stream: s, inbound: true, acked: map[string]wire.Version{}}
		n.streams[m.From] = st
		n.met.connected(m.From)
	}
	st.lastTraffic = now
	changed := false
	var acks []wire.Version
	floorRaised := false
	for _, e := range m.Entries {
		n.lamport = max(n.lamport, e.Lamport)
		if n.store.Merge(e) {
			changed = true
			if _, isFloor := floorOwner(e.Key); isFloor {
				floorRaised = true
			}
		}
		// Acknowledged even when refused (at or below its owner's floor): the sender drops
		// it when the floor reaches it.
		acks = append(acks, versionOf(&e))
		if e.Replica == n.name {
			n.checkOwnKeyLocked(e.Key)
		}
	}
	if floorRaised {
		n.pruneAcksLocked()
	}
	for _, a := range m.Acks {
		if cur, ok := st.acked[a.Key]; !ok || a.Lamport > cur.Lamport || (a.Lamport == cur.Lamport && a.Replica > cur.Replica) {
			st.acked[a.Key] = a
		}
	}
	work := n.trees.receiveLocked(n, m, now)
	n.mu.Unlock()

	if len(acks) > 0 {
		_ = s.Send(&wire.Sync{From: n.name, Acks: acks})
	}
	work.run(n, s)
	if changed {
		n.notify()
	}
}

// StreamClosed forgets s. The peer, if still ALIVE, is probed next round: a broken stream is
// the first sign of a killed process.
func (n *Node) StreamClosed(s Stream) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, st := range n.streams {
		if st.stream == s {
			delete(n.streams, name)
			if p := n.peers[name]; p != nil && p.Status == wire.StatusAlive {
				p.probeSoon = true
			}
			if st.inbound {
				n.met.disconnected(name)
			}
			return
		}
	}
}

// syncRound sends each open stream what its peer has not acknowledged, this round's tree
// deltas and due repair requests; closes streams idle for IdleTimeout; and keeps the streams
// this router opened alive.
func (n *Node) syncRound(ctx context.Context) {
	now := n.deps.Clock.Now()
	type out struct {
		name string
		st   *syncState
		msgs []*wire.Sync
	}
	var outs []out
	var idle []Stream

	n.mu.Lock()
	deltas := n.trees.takeBatchesLocked()
	repairs := n.trees.dueRequestsLocked(n, now)
	names := make([]string, 0, len(n.streams))
	for name := range n.streams {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		st := n.streams[name]
		if now.Sub(st.lastTraffic) >= n.cfg.IdleTimeout {
			idle = append(idle, st.stream)
			continue
		}
		msg := &wire.Sync{From: n.name, Requests: repairs[name]}
		size := 0
		for i := range msg.Requests {
			size += requestSize(&msg.Requests[i])
		}
		n.store.Range(func(e *wire.Entry) {
			// Entries past either bound wait for a later round: unacknowledged, they are sent
			// again until they are.
			if len(msg.Entries) >= n.cfg.MaxEntriesPerMessage || (len(msg.Entries) > 0 && size+entrySize(e) > n.cfg.MaxSyncBytes) {
				return
			}
			if v, ok := st.acked[e.Key]; !ok || versionNewer(e, v) {
				msg.Entries = append(msg.Entries, *e)
				size += entrySize(e)
			}
		})
		empty := len(msg.Entries) == 0 && len(deltas) == 0 && len(msg.Requests) == 0
		if empty && (st.inbound || now.Sub(st.lastSent) < n.cfg.KeepAlive) {
			continue
		}
		outs = append(outs, out{name, st, splitDeltas(msg, size, deltas, n.cfg.MaxSyncBytes)})
	}
	n.mu.Unlock()

	for _, s := range idle {
		s.Close()
	}
	for _, o := range outs {
		start := n.deps.Clock.Now()
		var err error
		for i, msg := range o.msgs {
			if err = o.st.stream.Send(msg); err != nil {
				for _, lost := range o.msgs[i:] {
					n.met.deltasDropped.Add(len(lost.Deltas))
				}
				break
			}
		}
		if !o.st.inbound {
			n.met.roundDuration(o.name, n.deps.Clock.Now().Sub(start))
		}
		if err == nil {
			n.mu.Lock()
			o.st.lastSent, o.st.lastTraffic = now, now
			n.mu.Unlock()
		}
	}
}

// splitDeltas appends the round's deltas, in order, to first (whose requests and entries
// take size bytes) and to as many further messages as they need, each of at most about
// budget bytes. A delta never exceeds budget (queueDelta drops those), so every message
// carries something.
func splitDeltas(first *wire.Sync, size int, deltas []wire.TreeDelta, budget int) []*wire.Sync {
	msgs := []*wire.Sync{first}
	cur, start := first, 0
	for i := range deltas {
		d := deltaSize(&deltas[i])
		if size+d > budget && (i > start || len(cur.Entries) > 0 || len(cur.Requests) > 0) {
			cur.Deltas = deltas[start:i:i]
			cur = &wire.Sync{From: first.From}
			msgs = append(msgs, cur)
			start, size = i, 0
		}
		size += d
	}
	cur.Deltas = deltas[start:len(deltas):len(deltas)]
	if len(cur.Deltas) == 0 {
		cur.Deltas = nil
	}
	return msgs
}
