package mesh

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/zeebo/xxh3"

	"github.com/smg-go/smg/mesh/wire"
)

// Trees is the cache-aware routing state the mesh shares (spec: Cache-Aware State Sync).
// RadixTrees implements it over the cache_aware policy's radix trees.
type Trees interface {
	// Apply records that path was routed to the worker with URL workerURL, in model's tree of
	// kind, and reports whether the tree already held the whole path before (the spec's
	// "a peer that knows the path"). A worker or model this router does not have is
	// ignored and reported as known, so that it does not start a repair.
	Apply(model string, kind wire.TreeKind, path []byte, workerURL string) (known bool)
	// ReadPage calls emit for the entries of model's tree of kind after cursor, up to about
	// maxBytes, and returns the cursor of the next page (wire.CursorDone after the last).
	// emit's arguments are valid only during the call.
	ReadPage(model string, kind wire.TreeKind, cursor uint64, maxBytes int, emit func(path []byte, workerURLs []string)) (next uint64)
}

type treeKey struct {
	model string
	kind  wire.TreeKind
}

// treeSync is the node's cache-tree state: queued deltas, and the repairs in flight. Fields
// other than queue are guarded by the node's lock.
type treeSync struct {
	trees Trees
	queue chan queuedDelta
	// queuedBytes is what the queued deltas hold (deltaSize), bounded by maxQueuedBytes;
	// maxDelta is the largest delta a message can carry.
	queuedBytes              atomic.Int64
	maxQueuedBytes, maxDelta int64
	repaired                 map[treeKey]bool
	repairs                  map[treeKey]*repair
	nextID                   uint64

	queueDropped, tooLarge, applied, unknown, folded, pagesServed, pagesApplied, completed, failed *metrics.Counter
}

// repair is one model tree being fetched from a peer, page by page.
type repair struct {
	id           uint64
	key          treeKey
	peer         string
	tried        map[string]bool
	cursor       uint64
	started      time.Time
	lastProgress time.Time
	retries      int
	entries      int
}

// RepairStatus describes a finished or running repair, for tests and /mesh/status.
type RepairStatus struct {
	Model   string `json:"model"`
	Kind    string `json:"kind"`
	Peer    string `json:"peer"`
	Entries int    `json:"entries"`
	Retries int    `json:"retries"`
	// Took is how long a finished repair took, from its request to its last page.
	Took time.Duration `json:"took_ns,omitempty"`
}

func (t *treeSync) init(cfg *Config, deps *Deps) {
	t.trees = deps.Trees
	t.queue = make(chan queuedDelta, cfg.DeltaQueue)
	t.maxQueuedBytes, t.maxDelta = int64(cfg.DeltaQueueBytes), int64(cfg.MaxSyncBytes)
	t.repaired = map[treeKey]bool{}
	t.repairs = map[treeKey]*repair{}
	c := deps.Metrics.GetOrCreateCounter
	t.queueDropped = c(`smg_mesh_tree_deltas_dropped_total{reason="queue_full"}`)
	t.tooLarge = c(`smg_mesh_tree_deltas_dropped_total{reason="too_large"}`)
	t.applied = c(`smg_mesh_tree_deltas_applied_total`)
	t.unknown = c(`smg_mesh_tree_deltas_unknown_total`)
	t.folded = c(`smg_mesh_tree_repairs_folded_total`)
	t.pagesServed = c(`smg_mesh_tree_repair_pages_served_total`)
	t.pagesApplied = c(`smg_mesh_tree_repair_pages_applied_total`)
	t.completed = c(`smg_mesh_tree_repairs_total{result="complete"}`)
	t.failed = c(`smg_mesh_tree_repairs_total{result="failed"}`)
}

// queuedDelta is a delta between PublishTree and the round that sends it; its Path is in buf,
// a buffer of pathPool.
type queuedDelta struct {
	d   wire.TreeDelta
	buf *[]byte
}

// pathPool holds the buffers PublishTree copies paths into, so that a routing decision
// allocates nothing in steady state. A buffer goes back to the pool when the round that takes
// its delta has copied the path into the round's own arena (takeBatchesLocked): the round's
// deltas are shared by the messages to every stream and encoded later by each stream's writer,
// so they must not point into pooled memory.
var pathPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledPath: larger buffers are left to the garbage collector rather than kept.
const maxPooledPath = 1 << 20

func putPath(b *[]byte) {
	if cap(*b) <= maxPooledPath {
		pathPool.Put(b)
	}
}

// PublishTree queues the delta of one cache-aware routing decision: path was routed to
// workerURL in model's tree of kind. It never blocks: when the queue is full the delta is
// dropped and counted (deltas are best effort). It copies path, into a pooled buffer: no
// allocation in steady state. Safe for concurrent use.
func (n *Node) PublishTree(model string, kind wire.TreeKind, path []byte, workerURL string) {
	if n.trees.trees == nil {
		return // not taking part in tree sync: nothing would send it
	}
	b := pathPool.Get().(*[]byte)
	*b = append((*b)[:0], path...)
	n.queueDelta(model, kind, b, workerURL)
}

// PublishTokens is PublishTree for the token tree: it encodes tokens as the wire's token
// path (wire.AppendTokens), into a pooled buffer.
func (n *Node) PublishTokens(model string, tokens []uint32, workerURL string) {
	if n.trees.trees == nil || len(tokens) == 0 {
		return
	}
	b := pathPool.Get().(*[]byte)
	*b = wire.AppendTokens((*b)[:0], tokens)
	n.queueDelta(model, wire.TreeTokens, b, workerURL)
}

// queueDelta queues the delta whose path is the pooled buffer b, or drops it when the queue
// is full (in count or bytes) or the delta could not fit in a message.
func (n *Node) queueDelta(model string, kind wire.TreeKind, b *[]byte, workerURL string) {
	t := &n.trees
	q := queuedDelta{d: wire.TreeDelta{Model: model, Kind: kind, Hash: xxh3.Hash(*b), Worker: workerURL, Path: *b}, buf: b}
	size := int64(deltaSize(&q.d))
	if size > t.maxDelta {
		putPath(b)
		t.tooLarge.Inc()
		return
	}
	if t.queuedBytes.Add(size) > t.maxQueuedBytes {
		t.queuedBytes.Add(-size)
		putPath(b)
		t.queueDropped.Inc()
		return
	}
	select {
	case t.queue <- q:
	default:
		t.queuedBytes.Add(-size)
		putPath(b)
		t.queueDropped.Inc()
	}
}

// deltaSize, entrySize and requestSize bound the encoded size of one item of a sync message:
// its strings and bytes plus 32 for tags, lengths and numbers.
func deltaSize(d *wire.TreeDelta) int       { return len(d.Model) + len(d.Worker) + len(d.Path) + 32 }
func entrySize(e *wire.Entry) int           { return len(e.Key) + len(e.Value) + len(e.Replica) + 32 }
func requestSize(r *wire.RepairRequest) int { return len(r.Model) + 32 }

// takeBatchesLocked drains the queue into this round's batch, each (model, kind, path,
// worker) once, grouped by model. The batch's paths are copied into one arena of the round
// (one allocation per round, left to the garbage collector once every stream has encoded
// its message), and the pooled buffers go back to the pool.
func (t *treeSync) takeBatchesLocked() []wire.TreeDelta {
	if t.trees == nil {
		return nil
	}
	type dk struct {
		key    treeKey
		hash   uint64
		worker string
	}
	var out []wire.TreeDelta
	var bufs []*[]byte
	size := 0
	seen := map[dk]bool{}
	for {
		select {
		case q := <-t.queue:
			t.queuedBytes.Add(-int64(deltaSize(&q.d)))
			k := dk{treeKey{q.d.Model, q.d.Kind}, q.d.Hash, q.d.Worker}
			if seen[k] {
				putPath(q.buf)
				continue
			}
			seen[k] = true
			out = append(out, q.d)
			bufs = append(bufs, q.buf)
			size += len(q.d.Path)
			continue
		default:
		}
		break
	}
	arena := make([]byte, 0, size)
	for i := range out {
		start := len(arena)
		arena = append(arena, out[i].Path...)
		out[i].Path = arena[start:len(arena):len(arena)]
		putPath(bufs[i])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// peerJoinedLocked runs when a member becomes ALIVE after being unknown or DOWN: what it
// routed meanwhile is unknown here, so the next unknown path repairs again.
func (t *treeSync) peerJoinedLocked() { clear(t.repaired) }

// treeWork is what a received message asks of the trees, done outside the node's lock.
type treeWork struct {
	from     string
	deltas   []wire.TreeDelta
	requests []wire.RepairRequest
	pages    []wire.RepairPage
}

func (t *treeSync) receiveLocked(n *Node, m *wire.Sync, now time.Time) treeWork {
	if t.trees == nil {
		return treeWork{}
	}
	w := treeWork{from: m.From, deltas: m.Deltas, requests: m.Requests}
	for _, p := range m.Pages {
		r := t.repairs[treeKey{p.Model, p.Kind}]
		if r == nil || r.id != p.ID || r.cursor != p.Cursor || r.peer != m.From {
			continue // a late page of a repair we retried or finished
		}
		w.pages = append(w.pages, p)
	}
	return w
}

func (w treeWork) run(n *Node, s Stream) {
	t := &n.trees
	if t.trees == nil {
		return
	}
	var unknown []treeKey
	for _, d := range w.deltas {
		if !t.trees.Apply(d.Model, d.Kind, d.Path, d.Worker) {
			t.unknown.Inc()
			unknown = append(unknown, treeKey{d.Model, d.Kind})
		}
		t.applied.Inc()
	}
	for _, rq := range w.requests {
		page := &wire.RepairPage{ID: rq.ID, Model: rq.Model, Kind: rq.Kind, Cursor: rq.Cursor}
		page.Next = t.trees.ReadPage(rq.Model, rq.Kind, rq.Cursor, n.cfg.PageBytes, func(path []byte, urls []string) {
			page.Entries = append(page.Entries, wire.PageEntry{Path: append([]byte(nil), path...), Workers: append([]string(nil), urls...)})
		})
		if s.Send(&wire.Sync{From: n.name, Pages: []wire.RepairPage{*page}}) == nil {
			t.pagesServed.Inc()
		}
	}
	for _, p := range w.pages {
		for _, e := range p.Entries {
			for _, u := range e.Workers {
				t.trees.Apply(p.Model, p.Kind, e.Path, u)
			}
		}
		t.pagesApplied.Inc()
	}

	now := n.deps.Clock.Now()
	sends := map[string][]wire.RepairRequest{}
	n.mu.Lock()
	for _, p := range w.pages {
		key := treeKey{p.Model, p.Kind}
		r := t.repairs[key]
		if r == nil || r.id != p.ID || r.cursor != p.Cursor {
			continue
		}
		r.entries += len(p.Entries)
		r.lastProgress = now
		if p.Next == wire.CursorDone {
			delete(t.repairs, key)
			t.repaired[key] = true
			n.lastRepair = RepairStatus{Model: p.Model, Kind: kindName(p.Kind), Peer: r.peer, Entries: r.entries, Retries: r.retries, Took: now.Sub(r.started)}
			t.completed.Inc()
			n.log.Info("cache tree repaired from peer", "model", p.Model, "kind", kindName(p.Kind), "peer", r.peer,
				"entries", r.entries, "took", now.Sub(r.started))
			continue
		}
		r.cursor = p.Next
		sends[r.peer] = append(sends[r.peer], wire.RepairRequest{ID: r.id, Model: p.Model, Kind: p.Kind, Cursor: r.cursor})
	}
	for _, key := range unknown {
		if t.repaired[key] {
			continue
		}
		if t.repairs[key] != nil {
			t.folded.Inc() // the repair in flight will bring it
			continue
		}
		// Ask the peer that sent the unknown path first: it surely holds it, while a random
		// peer may not (after a partition heals, the other side's decisions are only on the
		// other side). Retries after RepairTimeout go to random peers, as the spec says.
		peer := w.from
		if !t.usableLocked(n, peer) {
			peer = t.choosePeerLocked(n, nil, w.from)
		}
		t.nextID++
		r := &repair{id: t.nextID, key: key, peer: peer, tried: map[string]bool{peer: true}, started: now, lastProgress: now}
		t.repairs[key] = r
		sends[peer] = append(sends[peer], wire.RepairRequest{ID: r.id, Model: key.model, Kind: key.kind})
	}
	n.mu.Unlock()
	n.sendRequests(sends)
}

func kindName(k wire.TreeKind) string {
	if k == wire.TreeTokens {
		return "token"
	}
	return "string"
}

// usableLocked reports whether name is an ALIVE peer with an open stream.
func (t *treeSync) usableLocked(n *Node, name string) bool {
	st, p := n.streams[name], n.peers[name]
	return st != nil && p != nil && p.Status == wire.StatusAlive
}

// choosePeerLocked picks a random ALIVE peer with an open stream, preferring one not tried
// yet; fallback when there is none.
func (t *treeSync) choosePeerLocked(n *Node, tried map[string]bool, fallback string) string {
	var fresh, any []string
	for name, st := range n.streams {
		p := n.peers[name]
		if st == nil || p == nil || p.Status != wire.StatusAlive {
			continue
		}
		any = append(any, name)
		if !tried[name] {
			fresh = append(fresh, name)
		}
	}
	pool := fresh
	if len(pool) == 0 {
		pool = any
	}
	if len(pool) == 0 {
		return fallback
	}
	sort.Strings(pool)
	return pool[n.rnd.IntN(len(pool))]
}

// dueRequestsLocked retries repairs without progress for RepairTimeout: with another peer if
// one is left (from the start: cursors are per tree), else the same one where it stopped.
func (t *treeSync) dueRequestsLocked(n *Node, now time.Time) map[string][]wire.RepairRequest {
	var out map[string][]wire.RepairRequest
	keys := make([]treeKey, 0, len(t.repairs))
	for k := range t.repairs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].model < keys[j].model || keys[i].model == keys[j].model && keys[i].kind < keys[j].kind
	})
	for _, key := range keys {
		r := t.repairs[key]
		if now.Sub(r.lastProgress) < n.cfg.RepairTimeout {
			continue
		}
		if r.retries >= n.cfg.RepairAttempts {
			delete(t.repairs, key)
			t.failed.Inc()
			n.log.Warn("cache tree repair gave up", "model", key.model, "kind", kindName(key.kind), "retries", r.retries)
			continue
		}
		r.retries++
		r.lastProgress = now
		if p := t.choosePeerLocked(n, r.tried, r.peer); p != r.peer {
			r.peer, r.cursor = p, 0
			r.tried[p] = true
		}
		t.nextID++
		r.id = t.nextID
		if out == nil {
			out = map[string][]wire.RepairRequest{}
		}
		out[r.peer] = append(out[r.peer], wire.RepairRequest{ID: r.id, Model: key.model, Kind: key.kind, Cursor: r.cursor})
	}
	return out
}

func (n *Node) sendRequests(sends map[string][]wire.RepairRequest) {
	for peer, reqs := range sends {
		n.mu.Lock()
		st := n.streams[peer]
		n.mu.Unlock()
		if st != nil {
			_ = st.stream.Send(&wire.Sync{From: n.name, Requests: reqs})
		}
	}
}

// Repairs returns the repairs in flight.
func (n *Node) Repairs() []RepairStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []RepairStatus
	for k, r := range n.trees.repairs {
		out = append(out, RepairStatus{Model: k.model, Kind: kindName(k.kind), Peer: r.peer, Entries: r.entries, Retries: r.retries})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// Repaired reports whether model's tree of kind has been repaired since start-up (or since the
// last peer rejoined).
func (n *Node) Repaired(model string, kind wire.TreeKind) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.trees.repaired[treeKey{model, kind}]
}
