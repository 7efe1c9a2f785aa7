package ring

import (
	"sort"

	"github.com/smg-go/smg/worker"
)

// New builds the ring of ws from scratch.
func New(ws []*worker.Worker) *Ring { return NewBuilder().Build(ws) }

// RingReference returns a lookup by binary search over r's points, ignoring availability.
func RingReference(r *Ring) func(h uint64) *worker.Worker {
	return func(h uint64) *worker.Worker {
		i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
		if i == len(r.points) {
			i = 0
		}
		return r.workers[r.points[i]&ownerMask]
	}
}
