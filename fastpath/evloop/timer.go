package evloop

// timerOwner is told when one of its timers expires.
type timerOwner interface{ onTimer(kind uint8) }

// timer is one deadline of a connection or exchange, stored in its owner and linked into the
// loop's heap while armed, so that disarming is O(log n) and nothing is allocated.
type timer struct {
	at    int64 // monotonic ns
	idx   int   // position in the heap; -1 while disarmed
	kind  uint8
	owner timerOwner
}

func (t *timer) armed() bool { return t.idx >= 0 }

// timerHeap is a binary min-heap of armed timers by expiry.
type timerHeap []*timer

func (h *timerHeap) arm(t *timer, at int64, kind uint8) {
	if t.armed() {
		h.disarm(t)
	}
	t.at, t.kind = at, kind
	t.idx = len(*h)
	*h = append(*h, t)
	h.up(t.idx)
}

func (h *timerHeap) disarm(t *timer) {
	if !t.armed() {
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

// fire runs every timer due by l.now.
func (h *timerHeap) fire(l *loop) {
	for len(*h) > 0 && (*h)[0].at <= l.now {
		t := (*h)[0]
		h.disarm(t)
		t.owner.onTimer(t.kind)
		l.runSoon()
	}
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
