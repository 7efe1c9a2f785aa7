package cacheaware

import (
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

// Which holders still cache a prefix. The tree remembers every prefix it routed for as long
// as --max-tree-size lets it, but an engine's KV cache holds far less and evicts the least
// recently used blocks as it computes new ones. When a workload's live prefixes exceed the
// fleet's KV (multi-turn conversations cycling through more context than the engines hold),
// the tree kept sending each request to the worker that had long evicted it, and the spill
// gate let those holders run hot for hits that no longer existed (measured: 0.84× round
// robin's capacity, TTFT p99 2.1–4.7× at 70% load; docs/differences.md).
//
// So the trees' LRU clock counts prompt tokens in the engines' LRU order, and a holder's
// stamp on a prefix is the clock when it last used it. An engine drops a prefix P once more
// distinct blocks than it can hold have been used after P: blocks computed anew (each pick's
// prompt less what its worker still holds), and blocks reused by a hit on a prefix last used
// before P. The clock counts the first kind whole, and a hit's reused blocks when their stamp
// is older than half a holder's horizon (below), for only a prefix that old or older is near
// eviction and the hit moves that older prefix ahead of it. A holder's share of the clock's
// advance since its stamp on P (the advance split evenly across the available workers)
// beyond its engine's KV capacity (max_total_num_tokens in its load report) means the engine
// has dropped P: the tree then offers the longest prefix of the request that a holder still
// caches (radix.LiveChooser), or a miss that goes to the lowest expected wait. Workers
// without a capacity in their report, and paths learned from a mesh peer (stamp peerStamp),
// keep the old belief: held until the tree evicts them.

// peerStamp is the stamp of paths learned from a mesh peer (mesh.RadixTrees' default): their
// age is unknown, so they count as cached.
const peerStamp = 1

// charsPerToken converts the text tree's characters to prompt tokens for the clock, the
// usual ratio for English text with BPE tokenizers (and mockworker's).
const charsPerToken = 4

// horizon is the clock advance after which worker h's engine has surely dropped what it
// cached: its KV capacity by its last load report, times the workers that share the clock's
// advance. False when the report gives no capacity.
//
// Not the capacity less what running requests use (the report's KV usage): at saturation
// that is near 0 while the running requests hold the very prefixes they share, so every
// hit would look doubtful and the shared-prefix workload would lose its hits.
func (p *picker) horizon(h *worker.Worker) (float64, bool) {
	r := h.Load()
	if r == nil || r.KVCapacityTokens <= 0 {
		return 0, false
	}
	return float64(r.KVCapacityTokens) * float64(len(p.workers)), true
}

// Live implements radix.LiveChooser: whether the engine of tenant t still caches a prefix
// its worker last used at stamp. Tenants that are not the group's workers count as live
// here; Choose leaves them out.
func (c *chooser) Live(t radix.Tenant, stamp int64) bool {
	p := c.p
	if stamp <= peerStamp || int(t) >= len(p.byIndex) || p.byIndex[t] == nil {
		return true
	}
	horizon, ok := p.horizon(p.byIndex[t])
	return !ok || float64(c.now-stamp) < horizon
}

// advanceClock advances the clock by what the pick adds to w's LRU order: the prompt, less
// the prefix w still holds (matched of the m offered, when w is among its tenants) unless
// that prefix was last used more than half w's horizon ago.
func (c *chooser) advanceClock(m radix.Match, matched int, w *worker.Worker) {
	added := m.InputChars
	for i, t := range m.Tenants {
		if t != radix.Tenant(w.Index) {
			continue
		}
		if horizon, ok := c.p.horizon(w); !ok || float64(c.now-m.Stamps[i]) <= horizon/2 {
			added -= matched
		}
		break
	}
	c.p.b.clock.Add(int64(added / c.unitsPerToken))
}

// doubt is how likely w's engine has dropped the prefix of m (nil: the placement map, which
// keeps no LRU stamps), from w's stamp on it: 0 up to half its horizon (the age from which
// advanceClock counts a hit's reused blocks: a prefix that old is near eviction), rising
// linearly to 1 at the horizon, where Live drops the holder. A peer's path, and a worker that
// reports no capacity, are not doubted: their belief stands.
func (p *picker) doubt(w *worker.Worker, m *radix.Match, now int64) float64 {
	if m == nil {
		return 0
	}
	for i, t := range m.Tenants {
		if t != radix.Tenant(w.Index) {
			continue
		}
		horizon, ok := p.horizon(w)
		if m.Stamps[i] <= peerStamp || !ok {
			return 0
		}
		return min(1, max(0, 2*float64(now-m.Stamps[i])/horizon-1))
	}
	return 0
}
