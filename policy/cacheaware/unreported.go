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
// A block remembers one worker, the last one sent it; it counts as held there for at most
// Config.UnreportedTTL, and no longer once that worker's engine reports the block (the index
// knows it then, and forgets it when the engine evicts it). The entry itself stays as the
// block's home: where a prompt none of whose blocks any engine holds goes back to, as the
// approximate tree sends a prefix to the worker it last routed it to, so that a prefix an
// engine evicted is computed again where its group lives instead of wherever load is lowest
// (which scatters every group over the fleet and each engine's cache with it). The table is
// set-associative and bounded: a full set replaces its stalest entry. Safe for concurrent use.
type unreported struct {
	mu      sync.Mutex
	entries []unreportedEntry // unreportedSets × unreportedWays, allocated at the first record
}

type unreportedEntry struct {
	hash uint64 // the block's prefix hash; 0 marks a free entry
	w    *worker.Worker
	at   int64 // the builder's coarse clock when w was sent the block
	// reported: w's engine had reported the block when w was last sent it; the entry
	// names the block's home only.
	reported bool
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

// lookup sets out[k] to the worker sent hashes[k] since the clock read since and whose
// engine had not reported it, nil for none (out has len(hashes) entries), and returns the
// home of the prompt: the deepest block remembered, as its count of leading blocks, and the
// worker last sent it (0 and nil when none is).
func (u *unreported) lookup(hashes []uint64, since int64, out []*worker.Worker) (homeDepth int, home *worker.Worker) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, h := range hashes {
		out[k] = nil
		if u.entries == nil {
			continue
		}
		for _, e := range u.set(h) {
			if e.hash == h {
				homeDepth, home = k+1, e.w
				if !e.reported && e.at >= since {
					out[k] = e.w
				}
				break
			}
		}
	}
	return homeDepth, home
}

// record remembers that w was sent the blocks of hashes at now, the first reported of them
// already reported by its engine.
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
		set[victim] = unreportedEntry{hash: h, w: w, at: now, reported: k < reported}
	}
}
