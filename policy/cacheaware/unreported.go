package cacheaware

import (
	"sync"

	"github.com/smg-go/smg/worker"
)

// unreported is event mode's memory of the blocks the gateway sent to a worker whose engine
// has not reported holding them yet. Between a pick and the engine's BlockStored events lie
// the request's queueing and prefill (seconds when the fleet is saturated); without this the
// index would not know that the worker is about to hold the prefix, and the next requests
// sharing it would be spread by load, each engine caching a part of every group.
//
// A block remembers one worker, the last one sent it, for at most Config.UnreportedTTL; an
// entry is dropped once its worker's engine reports the block (the index knows it then, and
// forgets it when the engine evicts it). The table is set-associative and bounded: a full set
// replaces its stalest entry. Safe for concurrent use.
type unreported struct {
	mu      sync.Mutex
	entries []unreportedEntry // unreportedSets × unreportedWays, allocated at the first record
}

type unreportedEntry struct {
	hash uint64 // the block's prefix hash; 0 marks a free entry
	w    *worker.Worker
	at   int64 // the builder's coarse clock when w was sent the block
}

const (
	unreportedWays = 4
	// unreportedSets × unreportedWays bounds the blocks remembered per model: 65,536
	// (1.5 MiB), a thousand 1,000-token prompts at 16 tokens per block.
	unreportedSets = 1 << 14
)

// set returns the entries of hash's set.
func (u *unreported) set(hash uint64) []unreportedEntry {
	i := int(hash&(unreportedSets-1)) * unreportedWays
	return u.entries[i : i+unreportedWays]
}

// lookup sets out[k] to the worker remembered for hashes[k] since the clock read since, nil
// for none; out has len(hashes) entries.
func (u *unreported) lookup(hashes []uint64, since int64, out []*worker.Worker) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, h := range hashes {
		out[k] = nil
		if u.entries == nil {
			continue
		}
		for _, e := range u.set(h) {
			if e.hash == h && e.at >= since {
				out[k] = e.w
				break
			}
		}
	}
}

// record remembers w for the blocks of hashes from reported on (sent to w at now), and
// forgets w for the blocks before it, which w's engine has reported.
func (u *unreported) record(hashes []uint64, reported int, w *worker.Worker, now int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.entries == nil {
		u.entries = make([]unreportedEntry, unreportedSets*unreportedWays)
	}
	for k, h := range hashes {
		if h == 0 {
			continue // the free mark; one block in 2^64 goes unremembered
		}
		set := u.set(h)
		if k < reported {
			for i := range set {
				if set[i].hash == h && set[i].w == w {
					set[i] = unreportedEntry{}
				}
			}
			continue
		}
		victim := 0
		for i := range set {
			if set[i].hash == h {
				victim = i
				break
			}
			if set[i].at < set[victim].at { // a free entry's is 0
				victim = i
			}
		}
		set[victim] = unreportedEntry{hash: h, w: w, at: now}
	}
}
