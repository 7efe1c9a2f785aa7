package worker

import (
	"hash/maphash"
	"maps"
	"slices"
)

// Snapshot is an immutable view of the registry, published after every change. Everything
// reachable from it is read-only.
//
// A publication costs what changed, not the fleet's size: a snapshot shares with the one
// before it everything a status change leaves alone (Workers, the lookups, the models), and
// a membership change clones only the lookup shards it touches and the Workers slice.
type Snapshot struct {
	// Version increases by one with every publication.
	Version uint64
	// Workers lists every registered worker in registration order, whatever its status.
	Workers []*Worker

	byID     *lookup
	byURL    *lookup
	models   []string
	maxIndex uint32
	readyCnt int
	delta    *Delta
}

// Delta is what a publication changed against the snapshot before it (Version-1), so that a
// subscriber can do what changed rather than walk every worker. A worker may appear in
// several lists (it joined and left within one publication, in that order; a LearnModels
// replacement is the old worker leaving and the new one joining).
type Delta struct {
	// Joined are the workers registered, in order.
	Joined []*Worker
	// Left are the workers removed, in order.
	Left []*Worker
	// Updated are the workers whose settings Update changed (Worker.Revision).
	Updated []*Worker
	// StatusChanged are the workers whose status the registry changed (SetStatus, Drain).
	StatusChanged []*Worker
}

// Delta returns what this publication changed against the snapshot of Version-1. The lists
// are read-only.
func (s *Snapshot) Delta() Delta {
	if s.delta == nil {
		return Delta{}
	}
	return *s.delta
}

// ByID returns the worker with the given id, or nil.
func (s *Snapshot) ByID(id string) *Worker { return s.byID.get(id) }

// ByURL returns the worker with the given canonical URL, or nil.
func (s *Snapshot) ByURL(url string) *Worker { return s.byURL.get(url) }

// Models returns the sorted ids of the models some worker declares. (Which workers serve a
// model is the route table's business: policy.Router groups them.)
func (s *Snapshot) Models() []string { return s.models }

// IndexBound is one more than the largest Worker.Index in the snapshot: arrays indexed by
// Worker.Index need this length.
func (s *Snapshot) IndexBound() uint32 { return s.maxIndex }

// ReadyCount is the number of workers whose status was Ready at publication time.
func (s *Snapshot) ReadyCount() int { return s.readyCnt }

// lookupShards is how many maps a lookup is split into: a change clones one shard, about
// 1/64 of the fleet.
const lookupShards = 64

// lookup is an immutable string → *Worker map split into shards by the key's hash, so that
// the next snapshot's lookup shares every shard a change did not touch. The nil lookup is
// empty.
type lookup struct {
	seed   maphash.Seed
	shards [lookupShards]map[string]*Worker
}

func newLookup() *lookup { return &lookup{seed: maphash.MakeSeed()} }

func (l *lookup) shard(key string) int { return int(maphash.String(l.seed, key) % lookupShards) }

func (l *lookup) get(key string) *Worker {
	if l == nil {
		return nil
	}
	return l.shards[l.shard(key)][key]
}

// membershipEdit is one worker joining (add) or leaving the registry, in the order the
// registry applied them.
type membershipEdit struct {
	w   *Worker
	add bool
}

// with returns l after the edits, keyed by key: the shards no edit touches are shared, each
// touched shard is cloned once. A leaving worker's key is deleted only while it still maps
// to that worker, so the order of a replacement's two edits does not matter.
func (l *lookup) with(edits []membershipEdit, key func(*Worker) string) *lookup {
	next := &lookup{seed: l.seed, shards: l.shards}
	var cloned [lookupShards]bool
	for _, e := range edits {
		k := key(e.w)
		i := l.shard(k)
		if !cloned[i] {
			cloned[i] = true
			next.shards[i] = maps.Clone(l.shards[i])
			if next.shards[i] == nil {
				next.shards[i] = map[string]*Worker{}
			}
		}
		switch m := next.shards[i]; {
		case e.add:
			m[k] = e.w
		case m[k] == e.w:
			delete(m, k)
		}
	}
	return next
}

func workerID(w *Worker) string  { return w.ID }
func workerURL(w *Worker) string { return w.URL }

// snapshotBuilder is the registry writer's bookkeeping for the next snapshot: the membership
// edits since the last publication, the workers per declared model and the Ready count,
// kept as events are applied so that publishing does not walk the fleet.
type snapshotBuilder struct {
	edits    []membershipEdit
	delta    Delta          // what changed since the last publication; handed to its snapshot
	modelUse map[string]int // declared model → registered workers declaring it
	models   []string       // sorted keys of modelUse; replaced, never changed in place
	ready    int            // registered workers whose status is Ready
}

// joined notes a worker that joined the registry, with its status already set.
func (b *snapshotBuilder) joined(w *Worker) {
	b.edits = append(b.edits, membershipEdit{w: w, add: true})
	b.delta.Joined = append(b.delta.Joined, w)
	if w.Ready() {
		b.ready++
	}
	for _, m := range w.Models {
		if b.modelUse[m]++; b.modelUse[m] == 1 {
			b.models = nil // a new model: rebuilt at publication
		}
	}
}

// left notes a worker that left the registry; call it before changing the status it left
// with.
func (b *snapshotBuilder) left(w *Worker) {
	b.edits = append(b.edits, membershipEdit{w: w})
	b.delta.Left = append(b.delta.Left, w)
	if w.Ready() {
		b.ready--
	}
	for _, m := range w.Models {
		if b.modelUse[m]--; b.modelUse[m] == 0 {
			delete(b.modelUse, m)
			b.models = nil
		}
	}
}

// setStatus changes a registered worker's status and keeps the Ready count.
func (b *snapshotBuilder) setStatus(w *Worker, s Status) {
	b.delta.StatusChanged = append(b.delta.StatusChanged, w)
	if w.Ready() {
		b.ready--
	}
	w.setStatus(s)
	if w.Ready() {
		b.ready++
	}
}

// updated notes a worker whose settings changed.
func (b *snapshotBuilder) updated(w *Worker) { b.delta.Updated = append(b.delta.Updated, w) }

// next returns the snapshot after prev: prev's workers, lookups and models unless workers
// joined or left since, then the current ones (workers is the registry's list, copied).
func (b *snapshotBuilder) next(prev *Snapshot, version uint64, workers []*Worker) *Snapshot {
	s := *prev
	s.Version, s.readyCnt, s.delta = version, b.ready, nil
	if d := b.delta; len(d.Joined)+len(d.Left)+len(d.Updated)+len(d.StatusChanged) > 0 {
		s.delta = &d
		b.delta = Delta{} // the snapshot owns the lists now
	}
	if len(b.edits) == 0 {
		return &s
	}
	s.Workers = slices.Clone(workers)
	s.byID, s.byURL = prev.byID.with(b.edits, workerID), prev.byURL.with(b.edits, workerURL)
	s.maxIndex = prev.maxIndex
	recount := false // the worker with the largest index left: find the next largest
	for _, e := range b.edits {
		switch {
		case e.add:
			s.maxIndex = max(s.maxIndex, e.w.Index+1)
		case e.w.Index+1 == prev.maxIndex:
			recount = true
		}
	}
	if recount {
		s.maxIndex = 0
		for _, w := range workers {
			s.maxIndex = max(s.maxIndex, w.Index+1)
		}
	}
	if b.models == nil {
		b.models = slices.Sorted(maps.Keys(b.modelUse))
	}
	s.models = b.models
	clear(b.edits)
	b.edits = b.edits[:0]
	return &s
}
