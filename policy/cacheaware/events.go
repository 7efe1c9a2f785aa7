package cacheaware

import (
	"math"
	"slices"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// EventIndex is what event mode reads of a model's KV-event block index (kvevents/kvindex's
// Index; cmd/smg wires it): the engines' reported cache contents, per worker.
type EventIndex interface {
	// Slot returns the holder slot of the worker with this URL, false when it publishes no
	// events.
	Slot(url string) (int, bool)
	// Slots is one past the highest slot: the length Match needs.
	Slots() int
	// BlockSize is the engines' block size learned from their events; 0 before any.
	BlockSize() int
	// PrefixHashes appends the prefix hash of each full block of tokens to dst.
	PrefixHashes(dst []uint64, tokens []uint32) []uint64
	// MatchHashes sets depth[s] to the number of leading blocks of hashes that slot s holds
	// in a row and returns the longest; it allocates nothing.
	MatchHashes(hashes []uint64, depth []uint32) uint32
}

// EventSource gives the EventIndex of a model, nil when its workers publish no events.
type EventSource interface {
	EventIndex(model string) EventIndex
}

// eventMode is a picker's view of its model's event index, built with the snapshot: a
// worker's slot is resolved at Build, so the pick does no lookup by name.
type eventMode struct {
	index EventIndex
	slots []int32 // per picker.workers entry
}

// newEventMode returns the event mode of a group when every worker of it publishes events,
// nil otherwise: a worker without events is judged by the approximate tree, and one
// decision cannot mix the two (the tree's holders and the index's are not comparable).
func newEventMode(src EventSource, g policy.Group) *eventMode {
	if src == nil || len(g.Workers) == 0 {
		return nil
	}
	ix := src.EventIndex(g.Model)
	if ix == nil {
		return nil
	}
	em := &eventMode{index: ix, slots: make([]int32, len(g.Workers))}
	for i, w := range g.Workers {
		s, ok := ix.Slot(w.URL)
		if !ok {
			return nil
		}
		em.slots[i] = int32(s)
	}
	return em
}

// WantsTokens implements policy.TokenWanter: event mode matches the engines' blocks, which
// are named by token ids.
func (p *picker) WantsTokens() bool { return p.events != nil }

// pickByEvents decides a request by the engines' reported caches: the candidates are the
// usable workers that hold the most leading blocks of its tokens in a row, counting the blocks
// the gateway sent a worker that its engine has not reported yet (unreported), the match
// ratio is those blocks over the prompt, and the spill gate and --cache-threshold apply as in
// tree mode (decide; an engine's report is not doubtful, so no liveness discount). It reports
// false, leaving the request to the tree, before the index knows the block size or when the
// prompt is shorter than one block.
func (p *picker) pickByEvents(req *policy.Request, c *chooser) bool {
	em := p.events
	bs := em.index.BlockSize()
	if bs <= 0 || len(req.Tokens) < bs {
		return false
	}
	b := p.b
	c.hashes = em.index.PrefixHashes(c.hashes[:0], req.Tokens)
	hashes := c.hashes
	need := em.index.Slots()
	c.depth = grow(c.depth, need)
	depth := c.depth[:need]
	clear(depth)
	em.index.MatchHashes(hashes, depth)
	c.sent = grow(c.sent, len(hashes))
	sent := c.sent[:len(hashes)]
	now := b.now.Load()
	since := now - int64(b.cfg.UnreportedTTL)
	if b.cfg.UnreportedTTL <= 0 {
		since = math.MaxInt64 // nothing sent counts as held
	}
	homeDepth, home := b.unreported.lookup(hashes, since, sent)
	var best int
	n := 0
	for i, w := range p.workers {
		if !req.Usable(w) {
			continue
		}
		switch d := em.held(i, w, depth, sent); {
		case d > best:
			best, n = d, 0
			fallthrough
		case d == best && d > 0 && n < len(c.cands):
			c.cands[n] = w
			n++
		}
	}
	// A prompt whose home lies deeper than any engine's holding goes home when home holds
	// what the others do (a shared head): its group's prefix is computed again there, as the
	// tree would send it, rather than scattered by load.
	depthJudged, homing := best, homeDepth > best && home != nil && req.Usable(home) &&
		(best == 0 || slices.Contains(c.cands[:n], home))
	if homing {
		c.cands[0], n, depthJudged = home, 1, homeDepth
	}
	rate := b.scorer.RateOf(p.rate)
	ratio := float64(depthJudged*bs) / float64(len(req.Tokens))
	var w *worker.Worker
	if ratio > b.cfg.CacheThreshold && depthJudged > 0 {
		w = p.decide(req, c.cands[:n], rate, ratio, float64(depthJudged*bs), nil, 0)
		if homing && w == home {
			b.br.home.Inc()
		}
	} else if w = p.lowest(req, rate, policy.NoHotLimit); w != nil {
		b.br.miss.Inc()
	}
	c.chosen, c.matched, c.input = w, best*bs, len(req.Tokens)
	b.br.events.Inc()
	if w != nil {
		i := int(p.pos[w.Index])
		b.br.prompt.Add(len(req.Tokens))
		b.br.predicted.Add(min(em.reported(i, depth)*bs, len(req.Tokens))) // what the engine reported
		b.unreported.record(hashes, em.reported(i, depth), w, now)
	}
	return true
}

// reported is how many leading blocks the engine of p.workers[i] reported holding (depth from
// MatchHashes).
func (em *eventMode) reported(i int, depth []uint32) int {
	if s := int(em.slots[i]); s < len(depth) {
		return int(depth[s])
	}
	return 0
}

// held is how many leading blocks w, p.workers[i], holds or is about to: those its engine
// reported, then those it was sent since (sent[k], unreported.lookup).
func (em *eventMode) held(i int, w *worker.Worker, depth []uint32, sent []*worker.Worker) int {
	d := em.reported(i, depth)
	for d < len(sent) && sent[d] == w {
		d++
	}
	return d
}

// recordSent remembers served for the request's blocks its engine has not reported (a retry
// moved the request off the worker Pick chose).
func (p *picker) recordSent(req *policy.Request, served *worker.Worker) {
	em, b := p.events, p.b
	if int(served.Index) >= len(p.pos) {
		return
	}
	i := int(p.pos[served.Index])
	if em.index.BlockSize() <= 0 || i >= len(p.workers) || p.workers[i] != served {
		return
	}
	hashes := em.index.PrefixHashes(nil, req.Tokens)
	depth := make([]uint32, em.index.Slots())
	em.index.MatchHashes(hashes, depth)
	b.unreported.record(hashes, em.reported(i, depth), served, b.now.Load())
}

// grow returns s with room for n elements, reallocated only when it has less.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s
}
