package bucket

import (
	"math"
	"slices"
	"sync"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// order keeps the owners' window loads in a tournament tree whose nodes hold the least and the
// most load of the routable owners below them, so that a pick's balance check costs O(log n)
// instead of a scan of every owner. Picks update it as they add load, Maintain as it rotates the
// window, and the owners' writers mark their routability changes (worker.Changes).
//
// Its picks choose exactly as the scan over the owners would (order_test.go checks it on random
// sequences). Its mutex serialises them, and orders the tree with the loads it reflects: a
// load changes only under it.
type order struct {
	mu      sync.Mutex
	owners  []*worker.Worker
	loads   []*load
	retired bool // a successor (the next owners' order) took over: pick from the bounds again

	changes *worker.Changes // the owners' changes, by Index
	place   []int32         // worker Index → place in owners, -1 for none
	size    int             // leaves: the least power of two >= len(owners)
	tree    []span          // tree[1] is the root, tree[size+i] place i's leaf
	gated   policy.GatedPlaces
	taken   []int32 // Changes.Take's buffer
	out     []int32 // places a pick's request excludes, out of the tree for the pick
}

// span is the least and most window load of the routable owners below a node.
type span struct{ least, most int64 }

var emptySpan = span{least: math.MaxInt64, most: -1}

func join(l, r span) span { return span{least: min(l.least, r.least), most: max(l.most, r.most)} }

// newOrder returns the order over owners and their loads. It takes the owners' watch over from
// prev, the previous owners' order (nil: none), which it retires: the caller holds prev's
// mutex, and publishes the new order before releasing it. Control plane: O(len(owners)).
func newOrder(owners []*worker.Worker, loads []*load, prev *order) *order {
	n := len(owners)
	o := &order{owners: owners, loads: loads, size: 1, place: make([]int32, worker.Bound(owners))}
	for o.size < n {
		o.size *= 2
	}
	o.tree = make([]span, 2*o.size)
	for i := range o.place {
		o.place[i] = -1
	}
	for i, w := range owners {
		o.place[w.Index] = int32(i)
	}
	if prev == nil {
		o.changes = worker.NewWatch(owners)
	} else {
		prev.retired = true
		o.changes, prev.changes = prev.changes.Handover(prev.owners, owners), nil
	}
	o.rebuild()
	return o
}

// rebuild weighs every owner and builds the tree bottom-up.
func (o *order) rebuild() {
	o.changes.Take(o.taken[:0]) // what changed before now is weighed below
	o.gated.Reset(len(o.owners))
	for i := range o.size {
		o.tree[o.size+i] = o.weigh(i)
	}
	for n := o.size - 1; n >= 1; n-- {
		o.tree[n] = join(o.tree[2*n], o.tree[2*n+1])
	}
}

// weigh returns place p's leaf: its owner's window load when the owner is routable.
func (o *order) weigh(p int) span {
	if p >= len(o.owners) {
		return emptySpan
	}
	w := o.owners[p]
	o.gated.Note(p, w)
	if !w.Routable() {
		return emptySpan
	}
	l := o.loads[p].sum()
	return span{least: l, most: l}
}

// update weighs place p again and fixes its path to the root.
func (o *order) update(p int) { o.set(p, o.weigh(p)) }

func (o *order) set(p int, leaf span) {
	n := o.size + p
	o.tree[n] = leaf
	for n /= 2; n >= 1; n /= 2 {
		o.tree[n] = join(o.tree[2*n], o.tree[2*n+1])
	}
}

// refresh re-weighs the owners that changed since the last pick, and those whose breaker
// gates them (they become routable when its timeout passes, with no write).
func (o *order) refresh() {
	o.gated.Reweigh(o.update)
	o.taken = o.changes.Take(o.taken[:0])
	for _, i := range o.taken {
		if int(i) < len(o.place) && o.place[i] >= 0 {
			o.update(int(o.place[i]))
		}
	}
}

// exclude takes the owners req excludes (its failed workers) out of the tree for the pick.
func (o *order) exclude(req *policy.Request) {
	for _, w := range req.Exclude {
		if w.Index >= uint32(len(o.place)) {
			continue
		}
		if p := o.place[w.Index]; p >= 0 && o.owners[p] == w && o.tree[o.size+int(p)].most >= 0 && !slices.Contains(o.out, p) {
			o.out = append(o.out, p)
			o.set(int(p), emptySpan)
		}
	}
}

// restore puts back the owners exclude took out.
func (o *order) restore() {
	for _, p := range o.out {
		o.update(int(p))
	}
	o.out = o.out[:0]
}

// leastFrom returns the first place at or after start, going round past the last place to the
// first, whose owner is routable with the least load: the owner a scan starting at start
// keeps; -1 when no owner is routable.
func (o *order) leastFrom(start int) int {
	least := o.tree[1].least
	if least == math.MaxInt64 {
		return -1
	}
	if p := o.first(1, 0, o.size, start, least); p >= 0 {
		return p
	}
	return o.first(1, 0, o.size, 0, least)
}

// first returns the first place at or after from below node n (which spans places [lo, hi))
// whose load is least, the least of the whole tree; -1 for none.
func (o *order) first(n, lo, hi, from int, least int64) int {
	if hi <= from || o.tree[n].least != least {
		return -1
	}
	if n >= o.size {
		return lo
	}
	mid := (lo + hi) / 2
	if p := o.first(2*n, lo, mid, from, least); p >= 0 {
		return p
	}
	return o.first(2*n+1, mid, hi, from, least)
}
