package score

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Ranking keeps a group's workers in the order LowestInTurnAt ranks them by, updated as their
// load changes, so that the whole group's choice costs O(log n) instead of a scan of every
// worker: a tournament tree over the group's places whose nodes hold the least awaiting work
// and expected wait, the earliest turn and the fewest in-flight requests below them.
//
// The workers' writers (in-flight count, dispatch and awaiting counts, load report, state word)
// mark the workers that changed (worker.Changes), the group's Turns the places it noted; a
// pick first re-weighs those, then descends the tree. It re-weighs every worker when the group's Rate or its speed
// verdicts move (every few times n picks at most, policy.FleetRate and SpeedFlags), and every
// worker whose breaker gates it on every pick (worker.Worker.BreakerGated). Workers flagged slow
// rank with a penalty that depends on the request (SlowPenalty): they stay beside the tree
// and are weighed on every pick, so a pick costs O(log n) plus the slow workers.
//
// Pick chooses exactly as LowestInTurnAt over the same group, turns and speeds with no hot
// limit would at the same instant (ranking_test.go checks it on random load sequences),
// drawing from rnd the same numbers. Picks are serialised by a mutex; the re-weighing of a
// change costs its writer one atomic bit set (worker.Changes.Mark).
//
// A group's next Ranking (its next snapshot's) takes the watch over (TakeOver): the workers
// stay registered once per group however many snapshots pass, and the Ranking replaced weighs
// every worker on each of its picks, for the requests that still hold its route table.
type Ranking struct {
	s      *Scorer
	ws     []*worker.Worker
	turns  *Turns
	speeds *SpeedFlags

	// changes is marked by the workers' writers, by worker Index (nil when handed over to the
	// next Ranking); noted by Turns.Note, by place.
	changes *worker.Changes
	noted   *worker.Changes

	// fewest selects the fewest-in-flight order (NewFewestRanking, PickFewest): its tree is
	// ftree, and tree is unused.
	fewest bool
	ftree  []fewestNode

	mu       sync.Mutex
	watching bool // the workers mark changes: set by the first pick or TakeOver
	built    bool // the tree has weighed every worker: set by the first pick
	retired  bool // a successor took the watch over: every pick weighs every worker
	rate     Rate
	speedGen uint64
	k        weigher
	size     int    // leaves: the least power of two >= len(ws)
	tree     []node // tree[1] is the root, tree[size+i] place i's leaf
	leaves   []leaf
	slow     []int32 // places flagged slow (SpeedFlags), weighed beside the tree
	gated    policy.GatedPlaces
	place    []int32 // worker.Index → place in ws, -1 for none
	taken    []int32 // Changes.Take's buffer
	excluded []int32 // places a pick's request excludes, out of the tree for the pick
}

// leaf is one place's weighing.
type leaf struct {
	kind     leafKind
	slow     bool
	inFlight int64
	awaiting float64 // before any slow penalty
	score    float64
}

type leafKind uint8

const (
	leafOut       leafKind = iota // not routable
	leafCapped                    // routable, excluded by the waiting-queue cap
	leafDark                      // routable without a load report
	leafReporting                 // routable with a load report
)

// node summarises the leaves below it.
type node struct {
	// a, s are the least (awaiting, score) pair of the reporting workers below, awaiting
	// first; sMin is their least score and turn their earliest turn.
	a, s, sMin float64
	turn       uint64
	// dark is the fewest in-flight requests of the workers below without a load report, and
	// darkN how many of them have that many.
	dark  int64
	darkN int32
}

var emptyNode = node{a: math.Inf(1), s: math.Inf(1), sMin: math.Inf(1), turn: math.MaxUint64, dark: math.MaxInt64}

func join(l, r *node) node {
	n := node{a: l.a, s: l.s, sMin: min(l.sMin, r.sMin), turn: min(l.turn, r.turn), dark: l.dark, darkN: l.darkN}
	if r.a < l.a || r.a == l.a && r.s < l.s {
		n.a, n.s = r.a, r.s
	}
	switch {
	case r.dark < l.dark:
		n.dark, n.darkN = r.dark, r.darkN
	case r.dark == l.dark:
		n.darkN += r.darkN
	}
	return n
}

// NewRanking returns the order of ws, whose Turns and SpeedFlags (nil: none) are turns and
// speeds as LowestInTurnAt takes them; turns must not be shared with another Ranking. It
// costs O(len(ws)/64) until its first pick, which watches the workers (unless TakeOver
// handed it the watch) and weighs them all.
func (s *Scorer) NewRanking(ws []*worker.Worker, turns *Turns, speeds *SpeedFlags) *Ranking {
	if s.cfg.IgnoreSpeed || s.cfg.IgnoreSpeedFlags {
		speeds = nil
	}
	r := &Ranking{s: s, ws: ws, turns: turns, speeds: speeds, noted: worker.NewChanges(len(ws))}
	turns.changes = r.noted
	return r
}

// TakeOver makes r, a new snapshot's order over its group, the successor of prev, the order
// the group kept before (nil: none): r takes prev's watch of the workers, registering and
// unregistering only the workers that joined or left the group, and prev, retired, weighs
// every worker on each of its later picks (a request still holding the previous route table
// picks as the scan would, at its cost). Control plane: O(len(ws)) reads, O(1) allocations
// plus the workers that changed. Call it before r's first pick.
func (r *Ranking) TakeOver(prev *Ranking) {
	if prev == nil || prev == r {
		return
	}
	prev.mu.Lock()
	defer prev.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	prev.retired = true
	if !prev.watching {
		return
	}
	prev.watching = false
	if r.watching {
		prev.changes.Unwatch(prev.ws)
		return
	}
	r.changes, prev.changes = prev.changes.Handover(prev.ws, r.ws), nil
	r.watching = true
}

// Succession is the line of Rankings a Builder keeps over its group, one per snapshot: each
// takes the watch over from the one before (TakeOver). The zero value is ready; safe for
// concurrent use, except Turns.
type Succession struct {
	last atomic.Pointer[Ranking]
	held []heldTurn // Turns' scratch, by worker Index
}

type heldTurn struct {
	w    *worker.Worker
	turn uint64
}

// Turns returns the Turns of ws, the group's next snapshot, for its next Ranking: a worker of
// the current Ranking's group keeps its turn, so equal workers are still taken in the order
// of their last picks however often the group changes; the workers new to the group, never
// picked, take turns before the others', in a random order among themselves (NewTurns' first
// order). Without a current Ranking (or one without turns) it is NewTurns. Call it from
// Build only (one goroutine at a time): O(len(ws)) copies, a random draw per new worker.
func (s *Succession) Turns(ws []*worker.Worker, rnd policy.Rand) *Turns {
	last := s.last.Load()
	if last == nil || last.turns == nil {
		return NewTurns(len(ws), rnd)
	}
	bound := max(worker.Bound(last.ws), worker.Bound(ws))
	if cap(s.held) < bound {
		s.held = make([]heldTurn, bound)
	}
	held := s.held[:bound]
	for i, w := range last.ws {
		held[w.Index] = heldTurn{w: w, turn: last.turns.at[i].Load()}
	}
	t := &Turns{at: make([]atomic.Uint64, len(ws))}
	var joined []int32
	for i, w := range ws {
		if h := held[w.Index]; h.w == w {
			t.at[i].Store(h.turn)
			continue
		}
		// Fisher-Yates of 0..k-1 over the k new workers' places, as NewTurns does.
		j := rnd.IntN(len(joined) + 1)
		joined = append(joined, int32(i))
		t.at[i].Store(t.at[joined[j]].Load())
		t.at[joined[j]].Store(uint64(len(joined) - 1))
	}
	clear(held) // keep no departed worker alive
	t.clock.Store(last.turns.clock.Load())
	return t
}

// Succeed makes r the group's current order, the successor of the previous one, and returns r.
func (s *Succession) Succeed(r *Ranking) *Ranking {
	r.TakeOver(s.last.Swap(r))
	return r
}

// Pick returns the worker LowestInTurnAt(req, ws, rate, rnd, hotAbove, turns, speeds) would,
// and its place; with a finite hotAbove (which the tree does not index) it runs that scan.
func (r *Ranking) Pick(req *policy.Request, rate Rate, rnd policy.Rand, hotAbove float64) (*worker.Worker, int) {
	if !math.IsInf(hotAbove, 1) {
		return r.s.LowestInTurnAt(req, r.ws, rate, rnd, hotAbove, r.turns, r.speeds)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refresh(rate)
	r.exclude(req)
	i := r.choose(req, rnd)
	r.restore()
	if i < 0 {
		return nil, -1
	}
	return r.ws[i], i
}

// restore puts back the places exclude took out.
func (r *Ranking) restore() {
	for _, p := range r.excluded {
		r.put(int(p))
	}
	r.excluded = r.excluded[:0]
}

// refresh brings the tree up to date with the workers, for rate.
func (r *Ranking) refresh(rate Rate) {
	if r.leaves == nil {
		r.allocate()
	}
	if !r.watching && !r.retired {
		r.watch()
	}
	if gen := r.speeds.Generation(); !r.built || r.retired || rate != r.rate || gen != r.speedGen {
		r.built, r.rate, r.speedGen, r.k = true, rate, gen, r.s.weigherAt(rate)
		r.rebuild()
		return
	}
	// A gated worker becomes routable when its breaker's timeout passes, with no write.
	r.gated.Reweigh(r.update)
	r.taken = r.noted.Take(r.taken[:0])
	for _, p := range r.taken {
		r.update(int(p))
	}
	r.taken = r.changes.Take(r.taken[:0])
	for _, i := range r.taken {
		if int(i) < len(r.place) && r.place[i] >= 0 {
			r.update(int(r.place[i]))
		}
	}
}

// allocate allocates the tree and indexes the places by worker Index.
func (r *Ranking) allocate() {
	n := len(r.ws)
	r.size = 1
	for r.size < n {
		r.size *= 2
	}
	if r.fewest {
		r.ftree = make([]fewestNode, 2*r.size)
	} else {
		r.tree = make([]node, 2*r.size)
	}
	r.leaves = make([]leaf, n)
	r.gated.Reset(n)
	r.place = make([]int32, worker.Bound(r.ws))
	for i := range r.place {
		r.place[i] = -1
	}
	for i, w := range r.ws {
		r.place[w.Index] = int32(i)
	}
}

// watch has the workers mark their changes in a new set.
func (r *Ranking) watch() {
	r.changes = worker.NewWatch(r.ws)
	r.watching = true
}

// rebuild weighs every worker and builds the tree bottom-up.
func (r *Ranking) rebuild() {
	// What changed before now is weighed below.
	r.noted.Take(r.taken[:0])
	if r.changes != nil {
		r.changes.Take(r.taken[:0])
	}
	r.gated.Reset(len(r.ws))
	r.slow = r.slow[:0]
	for i := range r.ws {
		r.leaves[i].slow = r.speeds.Slow(i)
		if r.leaves[i].slow {
			r.slow = append(r.slow, int32(i))
		}
		r.weigh(i)
	}
	if r.fewest {
		for i := range r.size {
			r.ftree[r.size+i] = r.fewestNodeOf(i)
		}
		for n := r.size - 1; n >= 1; n-- {
			r.ftree[n] = joinFewest(&r.ftree[2*n], &r.ftree[2*n+1])
		}
		return
	}
	for i := range r.size {
		r.tree[r.size+i] = r.nodeOf(i)
	}
	for n := r.size - 1; n >= 1; n-- {
		r.tree[n] = join(&r.tree[2*n], &r.tree[2*n+1])
	}
}

// update weighs place p again and fixes its path to the root.
func (r *Ranking) update(p int) {
	r.weigh(p)
	r.put(p)
}

// put sets place p's leaf from its weighing and fixes its path to the root.
func (r *Ranking) put(p int) {
	if r.fewest {
		r.setFewest(p, r.fewestNodeOf(p))
		return
	}
	r.set(p, r.nodeOf(p))
}

func (r *Ranking) set(p int, leaf node) {
	n := r.size + p
	r.tree[n] = leaf
	for n /= 2; n >= 1; n /= 2 {
		r.tree[n] = join(&r.tree[2*n], &r.tree[2*n+1])
	}
}

// weigh reads place p's worker into its leaf, as lowestAt's loop reads a candidate.
func (r *Ranking) weigh(p int) {
	w, lf := r.ws[p], &r.leaves[p]
	r.gated.Note(p, w)
	lf.kind = leafOut
	if !w.Routable() {
		return
	}
	lf.inFlight = w.InFlight.Load()
	rep := w.Load()
	if rep == nil {
		lf.kind = leafDark
		return
	}
	var capped bool
	lf.kind = leafReporting
	if lf.awaiting, lf.score, capped = r.k.weigh(w, rep, lf.inFlight); capped {
		lf.kind = leafCapped
	}
}

// nodeOf is place p's leaf node: empty for a slow worker, which ranks beside the tree.
func (r *Ranking) nodeOf(p int) node {
	n := emptyNode
	if p >= len(r.leaves) {
		return n
	}
	lf := &r.leaves[p]
	switch {
	case lf.kind == leafDark:
		n.dark, n.darkN = lf.inFlight, 1
	case lf.kind == leafReporting && !lf.slow:
		n.a, n.s, n.sMin, n.turn = lf.awaiting, lf.score, lf.score, r.turns.at[p].Load()
	}
	return n
}

// exclude takes the places req excludes (its failed workers) out of the tree for the pick.
func (r *Ranking) exclude(req *policy.Request) {
	for _, w := range req.Exclude {
		if w.Index >= uint32(len(r.place)) {
			continue
		}
		if p := r.place[w.Index]; p >= 0 && r.ws[p] == w && r.leaves[p].kind != leafOut && !slices.Contains(r.excluded, p) {
			r.excluded = append(r.excluded, p)
			if r.fewest {
				r.setFewest(int(p), emptyFewest)
			} else {
				r.set(int(p), emptyNode)
			}
		}
	}
}

// choose is lowestAt's choice over the tree and the slow workers beside it.
func (r *Ranking) choose(req *policy.Request, rnd policy.Rand) int {
	root := &r.tree[1]
	bestA, bestS := root.a, root.s
	penalty := 0.0
	if len(r.slow) > 0 {
		penalty = r.s.SlowPenalty(req)
	}
	for _, p := range r.slow {
		if lf := &r.leaves[p]; r.slowCounts(req, p) {
			if a := lf.awaiting + penalty; a < bestA || a == bestA && lf.score < bestS {
				bestA, bestS = a, lf.score
			}
		}
	}
	winner := -1
	if !math.IsInf(bestA, 1) {
		// LowestInTurn's bands: the worker picked longest ago of those within them wins.
		awaitingLimit, scoreLimit := bestA, bestS
		if bestA > 0 {
			awaitingLimit += r.s.HalfRequest(req)
			scoreLimit = r.leastScore(1, awaitingLimit, math.Inf(1))
			for _, p := range r.slow {
				if lf := &r.leaves[p]; r.slowCounts(req, p) && lf.awaiting+penalty <= awaitingLimit {
					scoreLimit = min(scoreLimit, lf.score)
				}
			}
		}
		scoreLimit += r.k.mean * r.k.inv
		first := uint64(math.MaxUint64)
		winner = r.earliest(1, awaitingLimit, scoreLimit, &first)
		for _, p := range r.slow {
			if lf := &r.leaves[p]; r.slowCounts(req, p) && lf.awaiting+penalty <= awaitingLimit && lf.score <= scoreLimit {
				if turn := r.turns.at[p].Load(); turn < first {
					first, winner = turn, int(p)
				}
			}
		}
	}
	nRep := 0
	if winner >= 0 {
		nRep = 1
	}
	rep, k := chooseAmong(rnd, nRep, int(root.darkN), bestS, bestS+float64(root.dark)*r.k.mean*r.k.inv)
	switch {
	case k < 0:
		return -1
	case rep:
		return winner
	}
	return r.nthDark(root.dark, k)
}

// slowCounts reports whether the slow worker at place p is a reporting candidate of req.
func (r *Ranking) slowCounts(req *policy.Request, p int32) bool {
	return r.leaves[p].kind == leafReporting && !req.Excluded(r.ws[p])
}

// leastScore returns the least score below node n of the workers whose awaiting work is at
// most limit, or best when none is less than best.
func (r *Ranking) leastScore(n int, limit, best float64) float64 {
	nd := &r.tree[n]
	if nd.a > limit || nd.sMin >= best {
		return best
	}
	if n >= r.size {
		return nd.s
	}
	l, rt := 2*n, 2*n+1
	if r.tree[rt].sMin < r.tree[l].sMin {
		l, rt = rt, l
	}
	best = r.leastScore(l, limit, best)
	return r.leastScore(rt, limit, best)
}

// earliest returns the place of the worker below node n picked longest ago among those whose
// awaiting work is at most aLimit and score at most sLimit, if its turn is before *first (which
// it then lowers to that turn); else -1.
func (r *Ranking) earliest(n int, aLimit, sLimit float64, first *uint64) int {
	nd := &r.tree[n]
	if nd.a > aLimit || nd.sMin > sLimit || nd.turn >= *first {
		return -1
	}
	if n >= r.size {
		*first = nd.turn
		return n - r.size
	}
	l, rt := 2*n, 2*n+1
	if r.tree[rt].turn < r.tree[l].turn {
		l, rt = rt, l
	}
	found := r.earliest(l, aLimit, sLimit, first)
	if p := r.earliest(rt, aLimit, sLimit, first); p >= 0 {
		found = p
	}
	return found
}

// nthDark returns the place of the k-th worker (from 0, in place order) without a report with
// inFlight requests in flight.
func (r *Ranking) nthDark(inFlight int64, k int) int {
	return nthLeaf(r.tree, r.size, k, func(l *node) int {
		if l.dark == inFlight {
			return int(l.darkN)
		}
		return 0
	})
}

// nthLeaf returns the place of the k-th leaf (from 0, in place order) of a tournament tree of
// size leaves among those count says a node has below it.
func nthLeaf[N any](tree []N, size, k int, count func(*N) int) int {
	n := 1
	for n < size {
		if c := count(&tree[2*n]); k < c {
			n = 2 * n
		} else {
			k -= c
			n = 2*n + 1
		}
	}
	return n - size
}

// fewestNode summarises the leaves below it for PickFewest: the fewest in-flight requests of
// the routable workers below (fewest, how many have it: n), and among those the least
// (awaiting, score) pair of the reporting ones (a, s, how many have exactly it: rep) and how
// many have no report (dark).
type fewestNode struct {
	fewest       int64
	n, rep, dark int32
	a, s         float64
}

var emptyFewest = fewestNode{fewest: math.MaxInt64, a: math.Inf(1), s: math.Inf(1)}

func joinFewest(l, r *fewestNode) fewestNode {
	switch {
	case l.fewest < r.fewest:
		return *l
	case r.fewest < l.fewest:
		return *r
	}
	n := fewestNode{fewest: l.fewest, n: l.n + r.n, dark: l.dark + r.dark, a: l.a, s: l.s, rep: l.rep}
	switch {
	case r.a < l.a || r.a == l.a && r.s < l.s:
		n.a, n.s, n.rep = r.a, r.s, r.rep
	case r.a == l.a && r.s == l.s:
		n.rep += r.rep
	}
	return n
}

func (r *Ranking) fewestNodeOf(p int) fewestNode {
	n := emptyFewest
	if p >= len(r.leaves) {
		return n
	}
	lf := &r.leaves[p]
	if lf.kind == leafOut {
		return n
	}
	n.fewest, n.n = lf.inFlight, 1
	switch lf.kind {
	case leafDark:
		n.dark = 1
	case leafReporting:
		n.a, n.s, n.rep = lf.awaiting, lf.score, 1
	}
	return n
}

func (r *Ranking) setFewest(p int, leaf fewestNode) {
	n := r.size + p
	r.ftree[n] = leaf
	for n /= 2; n >= 1; n /= 2 {
		r.ftree[n] = joinFewest(&r.ftree[2*n], &r.ftree[2*n+1])
	}
}

// NewFewestRanking returns the order of ws by in-flight count and then expected wait, which
// PickFewest reads: power_of_two's least_requests metric.
func (s *Scorer) NewFewestRanking(ws []*worker.Worker) *Ranking {
	return &Ranking{s: s, ws: ws, fewest: true, noted: worker.NewChanges(len(ws))}
}

// PickFewest returns the usable worker with the fewest requests in flight, as a scan keeping
// every usable worker with the fewest (in group order) would, and when several have that
// many, the one Lowest(req, those, tokensPerSec, rnd, NoHotLimit) would choose, drawing the
// same random numbers; nil when no worker is usable.
func (r *Ranking) PickFewest(req *policy.Request, tokensPerSec float64, rnd policy.Rand) *worker.Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refresh(Rate{TokensPerSecond: tokensPerSec})
	r.exclude(req)
	defer r.restore()
	root := &r.ftree[1]
	switch root.n {
	case 0:
		return nil
	case 1:
		return r.ws[r.nthFewest(func(n *fewestNode) int32 { return n.n }, 0)]
	}
	best := math.Inf(1)
	if root.rep > 0 {
		best = root.s
	}
	rep, k := chooseAmong(rnd, int(root.rep), int(root.dark), best, best+float64(root.fewest)*r.k.mean*r.k.inv)
	switch {
	case k < 0: // every worker with the fewest is capped
		return nil
	case rep:
		a, s := root.a, root.s
		return r.ws[r.nthFewest(func(n *fewestNode) int32 {
			if n.a == a && n.s == s {
				return n.rep
			}
			return 0
		}, k)]
	}
	return r.ws[r.nthFewest(func(n *fewestNode) int32 { return n.dark }, k)]
}

// nthFewest returns the place of the k-th leaf (from 0, in place order) with the root's fewest
// in-flight count that count says is one of those wanted (count of a node: how many below).
func (r *Ranking) nthFewest(count func(*fewestNode) int32, k int) int {
	fewest := r.ftree[1].fewest
	return nthLeaf(r.ftree, r.size, k, func(l *fewestNode) int {
		if l.fewest == fewest {
			return int(count(l))
		}
		return 0
	})
}
