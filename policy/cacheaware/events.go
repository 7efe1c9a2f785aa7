package cacheaware

import (
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
	// Match sets depth[s] to the number of leading blocks of tokens that slot s holds in a row
	// and returns the longest; it allocates nothing.
	Match(tokens []uint32, depth []uint32) uint32
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

// pickByEvents decides a request by the engines' reported caches: the candidates are the
// usable workers that hold the most leading blocks of its tokens in a row, the match ratio
// is those blocks over the prompt, and the spill gate and --cache-threshold apply as in tree
// mode (decide; an engine's report is not doubtful, so no liveness discount). It reports
// false, leaving the request to the tree, before the index knows the block size or when the
// prompt is shorter than one block.
func (p *picker) pickByEvents(req *policy.Request, c *chooser) bool {
	em := p.events
	bs := em.index.BlockSize()
	if bs <= 0 || len(req.Tokens) < bs {
		return false
	}
	need := em.index.Slots()
	if cap(c.depth) < need {
		c.depth = make([]uint32, need)
	}
	depth := c.depth[:need]
	clear(depth)
	em.index.Match(req.Tokens, depth)
	var best uint32
	n := 0
	for i, w := range p.workers {
		s := int(em.slots[i])
		if s >= len(depth) || !req.Usable(w) {
			continue
		}
		switch d := depth[s]; {
		case d > best:
			best, n = d, 0
			fallthrough
		case d == best && d > 0 && n < len(c.cands):
			c.cands[n] = w
			n++
		}
	}
	b := p.b
	rate := b.scorer.RateOf(p.rate)
	matched := int(best) * bs
	ratio := float64(matched) / float64(len(req.Tokens))
	var w *worker.Worker
	if ratio > b.cfg.CacheThreshold && best > 0 {
		w = p.decide(req, c.cands[:n], rate, ratio, float64(matched), nil, 0)
	} else if w = p.lowest(req, rate, policy.NoHotLimit); w != nil {
		b.br.miss.Inc()
	}
	c.chosen = w
	b.br.events.Inc()
	if w != nil {
		b.br.prompt.Add(len(req.Tokens))
		for i, x := range p.workers {
			if x == w {
				if s := int(em.slots[i]); s < len(depth) {
					b.br.predicted.Add(min(int(depth[s])*bs, len(req.Tokens)))
				}
				break
			}
		}
	}
	return true
}
