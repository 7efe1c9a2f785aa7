package evloop

// timerOwner is told when one of its timers expires.
type timerOwner interface{ onTimer(kind uint8) }

// timer is one deadline of a connection or exchange, stored in its owner and linked into the
// loop's heap, so that nothing is allocated.
//
// Disarming and re-arming later are lazy: a disarmed timer stays in the heap under its old
// key, and arming one that is in the heap for a later deadline only records the deadline;
// fire drops or re-keys it when its old key comes due, and next when it reaches the root
// before the loop parks. Nearly every request disarms its
// connection's idle timer and arms it again 120 s ahead when the answer is sent, and so for
// the worker connection's idle timer and the exchange's deadline: done eagerly those were
// 6-8 heap operations per proxied request, about 1.3% of the gateway's CPU on the JSON closed
// loop (perf, docs/benchmarks-history.md); lazily they are none. A timer's entry costs its owner
// nothing it does not hold anyway (connections and exchanges are reused), except a worker
// connection that closes: remove takes its entry out at once.
type timer struct {
	at    int64 // heap key, monotonic ns; never later than due while on
	due   int64 // the deadline, monotonic ns, while on
	idx   int   // position in the heap; -1 when not in it
	on    bool  // armed
	kind  uint8
	owner timerOwner
}

func (t *timer) armed() bool { return t.on }

// unarmed returns a timer of owner that is not armed.
func unarmed(owner timerOwner) timer { return timer{idx: -1, owner: owner} }

// takeFree takes the last item of a free list, or returns nil when the list is empty.
func takeFree[T any](free *[]*T) *T {
	n := len(*free)
	if n == 0 {
		return nil
	}
	t := (*free)[n-1]
	*free = (*free)[:n-1]
	return t
}

// timerHeap is a binary min-heap of timers by key.
type timerHeap []*timer

func (h *timerHeap) arm(t *timer, at int64, kind uint8) {
	t.due, t.kind, t.on = at, kind, true
	switch {
	case t.idx < 0:
		t.at = at
		t.idx = len(*h)
		*h = append(*h, t)
		h.up(t.idx)
	case at < t.at:
		t.at = at
		h.up(t.idx)
	}
	// Otherwise it stays under its earlier key: fire re-keys it then.
}

// disarm stops t; its heap entry goes when its key comes due (or at the next arm's re-key).
func (h *timerHeap) disarm(t *timer) { t.on = false }

// remove stops t and takes it out of the heap now (an owner that is going away).
func (h *timerHeap) remove(t *timer) {
	t.on = false
	if t.idx < 0 {
		return
	}
	i, last := t.idx, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	t.idx = -1
}

// next is the first deadline in the heap (0 for none): the loop's park ends by then. It
// first settles the entries a lazy disarm or a later arm left at the root (drops the
// disarmed, re-keys the postponed), so that the loop never wakes for a deadline that has
// gone: a connection's head-wait watch, 250 ms out, is armed and disarmed on every request,
// and an open loop of 64 connections would otherwise wake about 250 times a second for them.
func (h *timerHeap) next() int64 {
	for len(*h) > 0 {
		if !h.settleRoot() {
			return (*h)[0].at
		}
	}
	return 0
}

// fire runs every timer due by l.now, dropping the disarmed entries and re-keying the
// postponed ones it meets on the way.
func (h *timerHeap) fire(l *loop) {
	for len(*h) > 0 && (*h)[0].at <= l.now {
		if h.settleRoot() {
			continue
		}
		t := (*h)[0]
		h.remove(t)
		t.owner.onTimer(t.kind)
		l.runSoon()
	}
}

// settleRoot drops the root entry if it is disarmed, or re-keys it to its deadline if a later
// arm postponed it, and reports whether it did either; false: the root is armed and keyed by
// its own deadline.
func (h *timerHeap) settleRoot() bool {
	t := (*h)[0]
	switch {
	case !t.on:
		h.remove(t)
	case t.due > t.at:
		t.at = t.due
		h.down(0)
	default:
		return false
	}
	return true
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) {
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].at < h[m].at {
			m = l
		}
		if r < len(h) && h[r].at < h[m].at {
			m = r
		}
		if m == i {
			return
		}
		h.swap(i, m)
		i = m
	}
}
