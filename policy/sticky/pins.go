package sticky

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/zeebo/xxh3"
)

// Assignment modes of --assignment-mode: how a key that has no usable pin gets a worker.
const (
	AssignRandom   = "random"
	AssignMinLoad  = "min_load"
	AssignMinGroup = "min_group"
	AssignDelegate = "delegate"
)

// AssignmentModes lists the valid --assignment-mode values.
var AssignmentModes = []string{AssignRandom, AssignMinLoad, AssignMinGroup, AssignDelegate}

// Branches of smg_manual_policy_branch_total, shared by the manual policy and sticky sessions.
const (
	BranchOccupiedHit      = "occupied_hit"
	BranchOccupiedMiss     = "occupied_miss"
	BranchVacant           = "vacant"
	BranchNoRoutingID      = "no_routing_id"
	BranchNoHealthyWorkers = "no_healthy_workers"
)

// DefaultMaxIdle is --max-idle-secs: a key unused this long loses its pin (4 hours).
const DefaultMaxIdle = 4 * time.Hour

// PinEvictionInterval is how often idle pins are swept, or every max idle time when that is
// shorter, so that a key outlives --max-idle-secs by at most as long again.
const PinEvictionInterval = 60 * time.Second

// DefaultMaxPins bounds a table; past it new keys are served but not pinned.
const DefaultMaxPins = 1 << 20

// pinCandidates is how many workers a key remembers: its worker and one failover, so that the
// key returns to its worker once that recovers (spec: Manual).
const pinCandidates = 2

const pinShards = 64

// PinTable maps routing keys to workers for the manual policy and sticky sessions.
//
// Keys are stored by their 64-bit xxh3 hash, so a lookup never copies the key and a new pin
// allocates nothing but map growth; two keys colliding would share a pin, with odds of about
// n²/2⁶⁵. The table is split into 64 independently locked shards, so concurrent picks of
// different keys rarely meet on a lock. Last-use times come from a coarse clock the owner
// advances in Maintain, so the hot path reads no clock.
type PinTable struct {
	shards  [pinShards]pinShard
	now     atomic.Int64 // seconds, advanced by Maintain
	size    atomic.Int64
	maxPins int64
	maxIdle int64 // seconds
	entries *metrics.Gauge
	// lastSweep is read and written only by Maintain.
	lastSweep time.Time
}

type pinShard struct {
	mu sync.Mutex
	m  map[uint64]pinEntry
	_  [40]byte // keep shards on separate cache lines
}

type pinEntry struct {
	// cands[0] is the key's worker, cands[1] its failover; the first usable one serves.
	cands [pinCandidates]*worker.Worker
	last  int64
}

// NewPinTable returns an empty table. maxIdle <= 0 disables idle eviction; maxPins bounds
// the pins (past it new keys are served but not pinned); entries, when non-nil, tracks the
// number of pins (smg_manual_policy_cache_entries).
func NewPinTable(now time.Time, maxIdle time.Duration, maxPins int, entries *metrics.Gauge) *PinTable {
	t := &PinTable{maxPins: int64(maxPins), maxIdle: int64((maxIdle + time.Second - 1) / time.Second), entries: entries, lastSweep: now} // whole seconds, rounded up: 0.5 s is not "forever"
	for i := range t.shards {
		t.shards[i].m = map[uint64]pinEntry{}
	}
	t.now.Store(now.Unix())
	return t
}

// Len returns the number of pinned keys.
func (t *PinTable) Len() int { return int(t.size.Load()) }

// PinState is what a lookup found.
type PinState uint8

const (
	// PinVacant: the key has no pin.
	PinVacant PinState = iota
	// PinHit: the key's pin has a usable worker.
	PinHit
	// PinStale: the key is pinned, but none of its workers is usable.
	PinStale
)

// Lookup returns the first usable worker pinned to key, refreshing its last use.
func (t *PinTable) Lookup(req *policy.Request, key []byte) (*worker.Worker, PinState) {
	h := xxh3.Hash(key)
	s := &t.shards[h%pinShards]
	s.mu.Lock()
	e, ok := s.m[h]
	if !ok {
		s.mu.Unlock()
		return nil, PinVacant
	}
	if now := t.now.Load(); e.last != now {
		e.last = now
		s.m[h] = e
	}
	s.mu.Unlock()
	for _, w := range e.cands {
		if w != nil && req.Usable(w) {
			return w, PinHit
		}
	}
	return nil, PinStale
}

// Pin makes w the key's worker: for a new key its only worker; for a key whose workers are
// unusable, w joins as the newest of its two candidates, replacing the oldest. added reports
// whether w became a candidate it was not before, and dropped is the candidate it replaced, if
// any; both feed min_group's per-worker key counts. Nothing happens when the table is full.
func (t *PinTable) Pin(key []byte, w *worker.Worker) (added bool, dropped *worker.Worker) {
	return t.place(key, w, asNewest)
}

// PinFront makes w the key's first worker, keeping its previous first worker as the failover
// (a respilled session moves, but can fail back). Like Pin it reports what min_group counts.
func (t *PinTable) PinFront(key []byte, w *worker.Worker) (added bool, dropped *worker.Worker) {
	return t.place(key, w, asFirst)
}

// candidates are a key's pinned workers, the first tried first.
type candidates = [pinCandidates]*worker.Worker

// place admits key and puts w among its candidates with put, which reports what Pin does.
func (t *PinTable) place(key []byte, w *worker.Worker, put func(c *candidates, w *worker.Worker) (added bool, dropped *worker.Worker)) (added bool, dropped *worker.Worker) {
	h := xxh3.Hash(key)
	s := &t.shards[h%pinShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := t.admitLocked(s, h)
	if !ok {
		return false, nil
	}
	added, dropped = put(&e.cands, w)
	e.last = t.now.Load()
	s.m[h] = e
	return added, dropped
}

// asNewest puts w in c as Pin does: in a free place, else replacing the oldest candidate.
func asNewest(c *candidates, w *worker.Worker) (added bool, dropped *worker.Worker) {
	switch {
	case c[0] == w || c[1] == w:
		return false, nil
	case c[0] == nil:
		c[0] = w
	case c[1] == nil:
		c[1] = w
	default:
		dropped = c[0]
		*c = candidates{c[1], w}
	}
	return true, dropped
}

// asFirst puts w first in c as PinFront does, the previous first candidate second.
func asFirst(c *candidates, w *worker.Worker) (added bool, dropped *worker.Worker) {
	switch {
	case c[0] == w:
		return false, nil
	case c[1] == w:
		c[0], c[1] = w, c[0]
		return false, nil
	}
	dropped = c[1]
	*c = candidates{w, c[0]}
	return true, dropped
}

// admitLocked returns key h's entry, counting it when it is new; ok is false when h is new
// and the table is full. s must be h's shard, locked.
func (t *PinTable) admitLocked(s *pinShard, h uint64) (e pinEntry, ok bool) {
	if e, ok = s.m[h]; ok {
		return e, true
	}
	if t.size.Load() >= t.maxPins {
		return e, false
	}
	t.size.Add(1)
	if t.entries != nil {
		t.entries.Inc()
	}
	return e, true
}

// CountPins returns how many keys list w among their workers (the min_group measure). O(keys):
// call it off the hot path only; pickers use per-worker counters maintained by their builder.
func (t *PinTable) CountPins(w *worker.Worker) int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if e.cands[0] == w || e.cands[1] == w {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// Maintain advances the coarse clock and, every PinEvictionInterval (or max idle time, when
// shorter), drops keys idle for
// longer than the table's max idle time. It returns the workers whose pins were dropped with
// how many pins each lost, for group counters; nil when nothing was swept.
func (t *PinTable) Maintain(now time.Time) map[*worker.Worker]int {
	t.now.Store(now.Unix())
	if t.maxIdle <= 0 || now.Sub(t.lastSweep) < min(PinEvictionInterval, time.Duration(t.maxIdle)*time.Second) {
		return nil
	}
	t.lastSweep = now
	cutoff := now.Unix() - t.maxIdle
	lost := map[*worker.Worker]int{}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for h, e := range s.m {
			if e.last < cutoff {
				delete(s.m, h)
				t.size.Add(-1)
				if t.entries != nil {
					t.entries.Dec()
				}
				for _, w := range e.cands {
					if w != nil {
						lost[w]++
					}
				}
			}
		}
		s.mu.Unlock()
	}
	return lost
}
