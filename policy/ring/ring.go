package ring

import (
	"math/bits"
	"slices"
	"strconv"
	"unsafe"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/zeebo/xxh3"
)

// VirtualNodes is the number of points each worker owns on a consistent-hash ring (spec:
// Consistent Hashing, 150 virtual nodes per worker).
const VirtualNodes = 150

// MaxWorkers bounds the workers of one ring: a point keeps its owner in its low 16 bits.
const MaxWorkers = 1 << ownerBits

const (
	ownerBits = 16
	ownerMask = 1<<ownerBits - 1
)

// Ring is an immutable consistent-hash ring over workers, built off the hot path.
//
// A worker's points are hashes of its URL and the point number, so they do not depend on which
// other workers are on the ring: adding or removing a worker moves only the keys that land on
// (or leave) that worker's arcs, about 1/N of them. Lookups are O(1) expected rather than
// O(log n): a jump table indexed by the top bits of the hash narrows the search to the one or
// two points of that slice of the ring, so the cost does not grow with the fleet.
type Ring struct {
	workers []*worker.Worker
	// points are sorted; the top 48 bits are the point's hash and the low 16 bits the index
	// of its owner in workers.
	points []uint64
	// jump[b] is the index of the first point whose top bits are >= b; len(jump) = 2^k + 1.
	jump  []uint32
	shift uint
}

// Builder builds successive rings of one policy instance. It remembers the last ring, so a
// rebuild after a registry change keeps the sorted points of the workers that stay and sorts
// only the new workers' points: about 15 ms instead of 100 ms for a full build at 4,096 workers
// (614,400 points) on the development machine. Not safe for concurrent use: a policy's Builder owns one and calls it from its Build.
type Builder struct {
	prev *Ring
}

// NewBuilder returns a Builder with no previous ring.
func NewBuilder() *Builder { return &Builder{} }

// Build returns the ring of ws (at most MaxWorkers; extra workers are left off). When ws
// is the previous ring's worker list, the previous ring is returned as is.
func (b *Builder) Build(ws []*worker.Worker) *Ring {
	if len(ws) > MaxWorkers {
		ws = ws[:MaxWorkers]
	}
	if b.prev != nil && slices.Equal(b.prev.workers, ws) {
		return b.prev
	}
	r := &Ring{workers: slices.Clone(ws), points: make([]uint64, 0, len(ws)*VirtualNodes)}
	// Keep the points of workers that stay (matched by URL, which is all a point depends
	// on), renumbering their owners; they are already sorted.
	pos := make(map[string]int, len(ws))
	for i, w := range ws {
		pos[w.URL] = i
	}
	var fresh []uint64
	if b.prev != nil {
		remap := make([]int, len(b.prev.workers))
		for i, w := range b.prev.workers {
			remap[i] = -1
			if j, ok := pos[w.URL]; ok {
				remap[i] = j
				delete(pos, w.URL) // what is left in pos is new
			}
		}
		for _, p := range b.prev.points {
			if j := remap[p&ownerMask]; j >= 0 {
				r.points = append(r.points, p&^ownerMask|uint64(j))
			}
		}
	}
	buf := make([]byte, 0, 64)
	for url, j := range pos {
		for i := range VirtualNodes {
			buf = strconv.AppendInt(append(append(buf[:0], url...), '#'), int64(i), 10)
			fresh = append(fresh, xxh3.Hash(buf)&^ownerMask|uint64(j))
		}
	}
	slices.Sort(fresh)
	r.points = mergeSorted(r.points, fresh)
	r.index()
	b.prev = r
	return r
}

// mergeSorted merges sorted b into sorted a.
func mergeSorted(a, b []uint64) []uint64 {
	if len(b) == 0 {
		return a
	}
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] <= b[j] {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return append(append(out, a[i:]...), b[j:]...)
}

// index builds the jump table.
func (r *Ring) index() {
	k := uint(bits.Len(uint(len(r.points))))
	if k == 0 {
		return
	}
	r.shift = 64 - k
	r.jump = make([]uint32, 1<<k+1)
	p := 0
	for b := range r.jump {
		for p < len(r.points) && r.points[p]>>r.shift < uint64(b) {
			p++
		}
		r.jump[b] = uint32(p)
	}
}

// Workers returns the ring's workers.
func (r *Ring) Workers() []*worker.Worker { return r.workers }

// Lookup returns the first worker clockwise from h that req may use, or nil when none may.
func (r *Ring) Lookup(req *policy.Request, h uint64) *worker.Worker {
	n := len(r.points)
	if n == 0 {
		return nil
	}
	b := h >> r.shift
	i, end := int(r.jump[b]), int(r.jump[b+1])
	for i < end && r.points[i] < h {
		i++
	}
	for range n {
		if i == n {
			i = 0
		}
		if w := r.workers[r.points[i]&ownerMask]; req.Usable(w) {
			return w
		}
		i++
	}
	return nil
}

// HashBytes hashes a routing key or text prefix for a ring.
func HashBytes(b []byte) uint64 { return xxh3.Hash(b) }

// HashTokens hashes token ids for a ring, viewing them as bytes without copying. The hash
// depends on the machine's byte order, which is fine for a ring that lives in one process.
func HashTokens(ts []uint32) uint64 {
	if len(ts) == 0 {
		return xxh3.Hash(nil)
	}
	return xxh3.Hash(unsafe.Slice((*byte)(unsafe.Pointer(&ts[0])), len(ts)*4))
}
