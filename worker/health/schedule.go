package health

import "container/heap"

// schedule orders the Checker's entries by when they fall due (entry.at): the round takes
// the due ones from the front, so it never walks the workers that are not due.
type schedule struct{ h entryHeap }

func (s *schedule) empty() bool   { return len(s.h) == 0 }
func (s *schedule) first() *entry { return s.h[0] }

// pop takes the earliest entry out.
func (s *schedule) pop() *entry { return heap.Pop(&s.h).(*entry) }

// set puts e in at e.at, or moves it there when it is in already.
func (s *schedule) set(e *entry) {
	if e.slot >= 0 {
		heap.Fix(&s.h, e.slot)
		return
	}
	heap.Push(&s.h, e)
}

// remove takes e out, if it is in.
func (s *schedule) remove(e *entry) {
	if e.slot >= 0 {
		heap.Remove(&s.h, e.slot)
	}
}

func (s *schedule) clear() {
	for _, e := range s.h {
		e.slot = -1
	}
	clear(s.h)
	s.h = s.h[:0]
}

// entryHeap is container/heap's view of the schedule.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.slot = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.slot = -1
	*h = old[:len(old)-1]
	return e
}
