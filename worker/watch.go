package worker

import (
	"math/bits"
	"slices"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Changes is a set of workers, by Index, whose load state changed since its owner last took
// them: the writers of a watched worker mark its Index (Changes.Watch), so that an order kept
// over a group updates only the workers that changed instead of rescanning all of them. Safe
// for concurrent use: marking is lock-free, one bit per index.
type Changes struct{ words []atomic.Uint64 }

// NewChanges returns an empty set over the indexes [0, bound).
func NewChanges(bound int) *Changes { return &Changes{words: make([]atomic.Uint64, (bound+63)/64)} }

// Covers reports whether the set can hold every index below bound.
func (c *Changes) Covers(bound int) bool { return bound <= 64*len(c.words) }

// Mark adds index i. An index already marked costs one load: most marks are of a worker that
// changes many times between two takes.
func (c *Changes) Mark(i int) {
	word, bit := &c.words[i/64], uint64(1)<<(i%64)
	if word.Load()&bit == 0 {
		word.Or(bit)
	}
}

// Take appends the marked indexes to dst in ascending order, empties the set of them and
// returns dst. A change made while Take runs is either taken now or left marked.
func (c *Changes) Take(dst []int32) []int32 {
	for k := range c.words {
		if c.words[k].Load() == 0 {
			continue
		}
		for m := c.words[k].Swap(0); m != 0; m &= m - 1 {
			dst = append(dst, int32(k*64+bits.TrailingZeros64(m)))
		}
	}
	return dst
}

// Bound returns one more than the largest Index of ws: the bound a set watching them needs.
func Bound(ws []*Worker) int {
	bound := 0
	for _, w := range ws {
		bound = max(bound, int(w.Index)+1)
	}
	return bound
}

// watchList is the sets watching a worker. It is immutable, and shared by every worker that
// the same sets watch: a group's workers are registered with one list, not one each.
type watchList struct {
	// sets are held weakly: a policy may drop a picker without telling anyone, and a worker
	// must not keep it alive.
	sets []weak.Pointer[Changes]
}

// Watch makes every change of what a load-aware pick reads of each worker of ws (its in-flight
// count, load report, dispatch and awaiting counts and state word) mark the worker's Index in
// c, until Unwatch or until c is garbage-collected. c must cover the workers' indexes.
// Control plane: O(len(ws)) compare-and-swaps and one allocation per distinct set of watchers
// among ws (the workers of a group usually share one), not one per worker.
func (c *Changes) Watch(ws []*Worker) {
	if !c.Covers(Bound(ws)) {
		panic("worker: Changes.Watch of a worker whose Index the set does not cover")
	}
	c.relist(ws, true)
}

// Unwatch ends c's watch of the workers of ws.
func (c *Changes) Unwatch(ws []*Worker) { c.relist(ws, false) }

// Rewatch moves c's watch from the workers of old to those of ws, registering and
// unregistering only the workers in one and not the other: a group's next snapshot keeps its
// registration at the cost of its changes. c must cover the indexes of ws.
func (c *Changes) Rewatch(old, ws []*Worker) {
	type pair struct{ was, now *Worker }
	at := make([]pair, max(Bound(old), Bound(ws)))
	for _, w := range old {
		at[w.Index].was = w
	}
	for _, w := range ws {
		at[w.Index].now = w
	}
	var gone, added []*Worker
	for _, w := range old {
		if at[w.Index].now != w {
			gone = append(gone, w)
		}
	}
	for _, w := range ws {
		if at[w.Index].was != w {
			added = append(added, w)
		}
	}
	c.Unwatch(gone)
	c.Watch(added)
}

// NewWatch returns a new set watching ws (Watch), with room for the indexes of workers that
// join a later group (Handover).
func NewWatch(ws []*Worker) *Changes {
	bound := Bound(ws)
	c := NewChanges(bound + bound/8 + 64)
	c.Watch(ws)
	return c
}

// Handover returns a set watching ws in place of c, which watches old: c itself, moved by
// Rewatch, when it covers the indexes of ws; else a NewWatch of ws, and c's watch ends.
func (c *Changes) Handover(old, ws []*Worker) *Changes {
	if slices.Equal(old, ws) { // the same group: nothing to move
		return c
	}
	if !c.Covers(Bound(ws)) {
		c.Unwatch(old)
		return NewWatch(ws)
	}
	c.Rewatch(old, ws)
	return c
}

// relist adds c to (or removes it from) the watch list of every worker of ws, dropping the
// sets already collected. Workers that shared a list before share the edited one.
func (c *Changes) relist(ws []*Worker, add bool) {
	h := weak.Make(c)
	var lastOld, lastNew *watchList
	var memo map[*watchList]*watchList
	for _, w := range ws {
		for {
			old := w.watchers.Load()
			next, ok := lastNew, old == lastOld && lastNew != nil
			if !ok {
				if next, ok = memo[old]; !ok {
					next = old.edited(h, add)
					if memo == nil {
						memo = make(map[*watchList]*watchList)
					}
					memo[old] = next
				}
				lastOld, lastNew = old, next
			}
			if next == old || w.watchers.CompareAndSwap(old, next) {
				break
			}
		}
	}
}

// edited returns l without h and the collected sets, and with h when add; l itself when that
// changes nothing, nil when it leaves no set.
func (l *watchList) edited(h weak.Pointer[Changes], add bool) *watchList {
	var sets []weak.Pointer[Changes]
	changed := add
	if l != nil {
		for _, s := range l.sets {
			if s == h || s.Value() == nil {
				changed = true
				continue
			}
			sets = append(sets, s)
		}
	}
	if add {
		sets = append(sets, h)
	}
	switch {
	case !changed:
		return l
	case len(sets) == 0:
		return nil
	}
	return &watchList{sets: sets}
}

// Watchers returns how many live sets watch w (Changes.Watch).
func (w *Worker) Watchers() int {
	n := 0
	if l := w.watchers.Load(); l != nil {
		for _, s := range l.sets {
			if s.Value() != nil {
				n++
			}
		}
	}
	return n
}

// changed marks w's Index in every set watching it; its writers call it after each change.
func (w *Worker) changed() {
	if w.cold == nil { // a bare Worker of a test
		return
	}
	if l := w.watchers.Load(); l != nil {
		for _, s := range l.sets {
			if c := s.Value(); c != nil {
				c.Mark(int(w.Index))
			}
		}
	}
}

// InFlightCount is a Worker's count of requests in flight: an atomic counter whose changes
// mark the worker's watchers (Watch).
type InFlightCount struct{ n atomic.Int64 }

// Load returns the count.
func (c *InFlightCount) Load() int64 { return c.n.Load() }

// Add adds d and returns the new count.
func (c *InFlightCount) Add(d int64) int64 {
	v := c.n.Add(d)
	c.worker().changed()
	return v
}

// Store sets the count.
func (c *InFlightCount) Store(v int64) {
	c.n.Store(v)
	c.worker().changed()
}

// worker returns the Worker whose InFlight c is: its first field, so they share an address
// (checked by a test). The count lives in the Worker's own cache line, where a scan and the
// request path read it, and has no room for a pointer back.
func (c *InFlightCount) worker() *Worker { return (*Worker)(unsafe.Pointer(c)) }
