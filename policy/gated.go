package policy

import "github.com/smg-go/smg/worker"

// GatedPlaces is the set of a group's places (indexes into its worker list) whose breaker
// gates them (worker.Worker.BreakerGated). An order kept over the group re-weighs them on
// every pick: a gated worker becomes routable when its breaker's timeout passes, with no
// write that would mark it changed. Not safe for concurrent use: the order's lock guards it.
type GatedPlaces struct {
	list, spare []int32
	in          []bool
}

// Reset empties the set and sizes it for a group of n places.
func (g *GatedPlaces) Reset(n int) {
	g.list = g.list[:0]
	if len(g.in) != n {
		g.in = make([]bool, n)
	}
	clear(g.in)
}

// Note adds place p when its worker w is gated.
func (g *GatedPlaces) Note(p int, w *worker.Worker) {
	if w.BreakerGated() && !g.in[p] {
		g.in[p] = true
		g.list = append(g.list, int32(p))
	}
}

// Reweigh empties the set and calls weigh for each place it held; weigh Notes the places
// still gated again.
func (g *GatedPlaces) Reweigh(weigh func(p int)) {
	prev := g.list
	g.list, g.spare = g.spare[:0], prev
	for _, p := range prev {
		g.in[p] = false
	}
	for _, p := range prev {
		weigh(int(p))
	}
}
