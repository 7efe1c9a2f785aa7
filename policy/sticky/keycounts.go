package sticky

import (
	"sync/atomic"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// KeyCounts counts, per worker, the routing keys pinned to it: the measure of
// --assignment-mode min_group ("the worker with the fewest active routing keys"). Counters are
// indexed by Worker.Index; an index reused by a new worker starts again from zero, and a
// change reported for a worker that no longer owns its index is ignored.
//
// Build-time methods (Track) run on the registry's writer goroutine; Add and Least are safe
// from any goroutine. The counts are a heuristic: a pick racing a rebuild may update the
// previous array and lose that one change.
type KeyCounts struct {
	cur atomic.Pointer[keyCountsState]
}

type keyCountsState struct {
	owner  []*worker.Worker // by Index
	counts []atomic.Int64   // by Index
}

// NewKeyCounts returns counts that track no worker yet.
func NewKeyCounts() *KeyCounts {
	k := &KeyCounts{}
	k.cur.Store(&keyCountsState{})
	return k
}

// Track sets the workers whose keys are counted, keeping the counts of workers that stay.
func (k *KeyCounts) Track(ws []*worker.Worker) {
	old := k.cur.Load()
	bound := 0
	for _, w := range ws {
		bound = max(bound, int(w.Index)+1)
	}
	st := &keyCountsState{owner: make([]*worker.Worker, bound), counts: make([]atomic.Int64, bound)}
	for _, w := range ws {
		st.owner[w.Index] = w
		if i := int(w.Index); i < len(old.owner) && old.owner[i] == w {
			st.counts[i].Store(old.counts[i].Load())
		}
	}
	k.cur.Store(st)
}

// Add adds delta to w's count if w is tracked.
func (k *KeyCounts) Add(w *worker.Worker, delta int64) {
	if w == nil {
		return
	}
	st := k.cur.Load()
	if i := int(w.Index); i < len(st.owner) && st.owner[i] == w {
		st.counts[i].Add(delta)
	}
}

// Get returns w's count (0 when untracked).
func (k *KeyCounts) Get(w *worker.Worker) int64 {
	st := k.cur.Load()
	if i := int(w.Index); i < len(st.owner) && st.owner[i] == w {
		return st.counts[i].Load()
	}
	return 0
}

// Least returns the usable worker of ws with the fewest keys, ties broken uniformly at random.
func (k *KeyCounts) Least(req *policy.Request, ws []*worker.Worker, rnd policy.Rand) *worker.Worker {
	return policy.LeastBy(req, ws, rnd, policy.NoHotLimit, k.Get)
}
