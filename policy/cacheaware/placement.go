package cacheaware

import (
	"sync"
	"sync/atomic"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// The hash placement index (--cache-index hash) replaces the trees with an exact-match map
// from a request's token-id head, cut at each --cache-boundaries position it reaches, to the
// workers sent that head within --cache-ttl-secs. It suits engines that reuse cached prefix
// state only at fixed positions and only for minutes. Requests without token ids, or shorter
// than the first boundary, are load-balanced and not recorded. The mesh does not
// synchronize it (spec: high-availability.md, "Not synchronized").

const (
	// maxHolders is how many workers one head remembers; a fourth evicts the stalest.
	maxHolders = 3
	// maxBoundaries bounds --cache-boundaries so that a pick hashes on the stack.
	maxBoundaries = 16
	// placementShards spreads the map's lock; a power of two.
	placementShards = 64
)

// holder is a worker sent a head, and when (the builder's coarse clock, Unix nanoseconds).
type holder struct {
	w  *worker.Worker
	at int64
}

type placementShard struct {
	mu sync.Mutex
	m  map[uint64][maxHolders]holder
	_  [40]byte // keep neighbouring shards' locks off one cache line
}

// placementIndex is safe for concurrent use.
type placementIndex struct {
	shards  [placementShards]placementShard
	entries atomic.Int64
}

func newPlacementIndex() *placementIndex {
	ix := &placementIndex{}
	for i := range ix.shards {
		ix.shards[i].m = map[uint64][maxHolders]holder{}
	}
	return ix
}

// headHashes writes into out the hash of tokens' head at each boundary it reaches, shallow
// first, and returns how many it wrote. FNV-1a over the token words, continued from one
// boundary to the next, so the pick hashes each token once.
func headHashes(tokens []uint32, boundaries []int, out *[maxBoundaries]uint64) int {
	const offset, prime = 14695981039346656037, 1099511628211
	h, done, n := uint64(offset), 0, 0
	for _, b := range boundaries {
		if b > len(tokens) || n == maxBoundaries {
			break
		}
		for _, t := range tokens[done:b] {
			h = (h ^ uint64(t&0xff)) * prime
			h = (h ^ uint64(t>>8&0xff)) * prime
			h = (h ^ uint64(t>>16&0xff)) * prime
			h = (h ^ uint64(t>>24)) * prime
		}
		done = b
		out[n] = h
		n++
	}
	return n
}

func (ix *placementIndex) shard(h uint64) *placementShard { return &ix.shards[h&(placementShards-1)] }

// live copies into cands the holders of head h sent it after since that req may use, and
// returns how many.
func (ix *placementIndex) live(h uint64, since int64, req *policy.Request, byIndex []*worker.Worker, cands *[maxHolders]*worker.Worker) int {
	s := ix.shard(h)
	s.mu.Lock()
	hs, ok := s.m[h]
	s.mu.Unlock()
	n := 0
	if !ok {
		return 0
	}
	for _, x := range hs {
		// byIndex holds the snapshot's worker at its index: a departed worker whose index was
		// reused never matches.
		if x.w != nil && x.at >= since && int(x.w.Index) < len(byIndex) && byIndex[x.w.Index] == x.w && req.Usable(x.w) {
			cands[n] = x.w
			n++
		}
	}
	return n
}

// record makes w a holder of head h at now: it refreshes w's stamp, or takes a free or
// expired slot, or evicts the stalest holder.
func (ix *placementIndex) record(h uint64, w *worker.Worker, now int64) {
	s := ix.shard(h)
	s.mu.Lock()
	hs, ok := s.m[h]
	slot := 0
	for i, x := range hs {
		if x.w == w {
			slot = i
			break
		}
		if x.at < hs[slot].at { // an empty slot's stamp is 0: free slots go first
			slot = i
		}
	}
	hs[slot] = holder{w: w, at: now}
	s.m[h] = hs
	s.mu.Unlock()
	if !ok {
		ix.entries.Add(1)
	}
}

// sweep drops the holders stamped before since, and the heads left without any.
func (ix *placementIndex) sweep(since int64) {
	for i := range ix.shards {
		s := &ix.shards[i]
		s.mu.Lock()
		for h, hs := range s.m {
			alive := false
			for j, x := range hs {
				if x.w != nil && x.at < since {
					hs[j] = holder{}
				}
				alive = alive || hs[j].w != nil
			}
			if alive {
				s.m[h] = hs
			} else {
				delete(s.m, h)
				ix.entries.Add(-1)
			}
		}
		s.mu.Unlock()
	}
}

// pickByPlacement routes req in hash mode and records the choice at every boundary it reaches.
func (p *picker) pickByPlacement(req *policy.Request, c *chooser) *worker.Worker {
	b := p.b
	var hashes [maxBoundaries]uint64
	n := headHashes(req.Tokens, b.cfg.CacheBoundaries, &hashes)
	rate := b.scorer.RateOf(p.rate)
	if n == 0 {
		return p.lowest(req, rate, policy.NoHotLimit)
	}
	now := b.now.Load()
	since := now - int64(b.cfg.CacheTTL)
	var w *worker.Worker
	found := false
	// The deepest head with a live holder decides.
	for i := n - 1; i >= 0 && !found; i-- {
		var cands [maxHolders]*worker.Worker
		if k := b.placements.live(hashes[i], since, req, p.byIndex, &cands); k > 0 {
			copy(c.cands[:], cands[:k])
			// The hit's share of the request sizes the spill gate, as a tree match's does.
			ratio := float64(b.cfg.CacheBoundaries[i]) / float64(len(req.Tokens))
			w, found = p.decide(req, c.cands[:k], rate, ratio, 0, nil, 0), true
		}
	}
	if !found {
		if w = p.lowest(req, rate, policy.NoHotLimit); w != nil {
			b.br.miss.Inc()
		}
	}
	if w != nil {
		for _, h := range hashes[:n] {
			b.placements.record(h, w, now)
		}
	}
	return w
}

// recordPlacement records served at every boundary req reaches (a retry moved the request).
func (b *Builder) recordPlacement(req *policy.Request, served *worker.Worker) {
	var hashes [maxBoundaries]uint64
	n := headHashes(req.Tokens, b.cfg.CacheBoundaries, &hashes)
	now := b.now.Load()
	for _, h := range hashes[:n] {
		b.placements.record(h, served, now)
	}
}
