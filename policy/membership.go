package policy

import "github.com/smg-go/smg/worker"

// membership is the workers the last route table was built from, by worker Index, with the
// readiness each had then: what Router.Update compares the next snapshot with, so that a
// table change rebuilds only the routes of what changed. Writer goroutine only.
type membership struct {
	snap  *worker.Snapshot
	at    []*worker.Worker // Index → the worker holding it, nil for none
	ready []bool           // Index → whether that worker was Ready
	// stamp[i] is gen when the snapshot being compared holds index i.
	stamp   []uint64
	gen     uint64
	changed []*worker.Worker // diff's result, reused
}

// diff records s as the snapshot of the next table and returns the workers that joined or
// left the registry or changed readiness since the last one (valid until the next diff);
// whole is true when there is no last one to compare with.
//
// It costs one pass over s.Workers (an atomic load and two comparisons per worker), and a
// second over the last snapshot's workers only when the membership changed: a status change
// shares the worker list of the snapshot before it.
func (m *membership) diff(s *worker.Snapshot) (changed []*worker.Worker, whole bool) {
	prev := m.snap
	m.snap = s
	clear(m.changed)
	m.changed = m.changed[:0]
	if n := int(s.IndexBound()); n > len(m.at) {
		m.at = append(m.at, make([]*worker.Worker, n-len(m.at))...)
		m.ready = append(m.ready, make([]bool, n-len(m.ready))...)
		m.stamp = append(m.stamp, make([]uint64, n-len(m.stamp))...)
	}
	m.gen++
	for _, w := range s.Workers {
		i, ready := w.Index, w.Ready()
		switch {
		case m.at[i] != w:
			if left := m.at[i]; left != nil { // its index went to w
				m.changed = append(m.changed, left)
			}
			m.at[i], m.ready[i] = w, ready
			m.changed = append(m.changed, w)
		case m.ready[i] != ready:
			m.ready[i] = ready
			m.changed = append(m.changed, w)
		}
		m.stamp[i] = m.gen
	}
	if prev != nil && !sameList(prev.Workers, s.Workers) {
		for _, w := range prev.Workers {
			if m.stamp[w.Index] != m.gen {
				m.changed = append(m.changed, w)
				m.at[w.Index] = nil
			}
		}
	}
	return m.changed, prev == nil
}

// forget drops the record: the next diff reports a whole rebuild.
func (m *membership) forget() {
	m.snap = nil
	clear(m.at)
	clear(m.ready)
}

// sameList reports whether a and b are the same list (a snapshot's worker list is never
// changed in place).
func sameList(a, b []*worker.Worker) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
