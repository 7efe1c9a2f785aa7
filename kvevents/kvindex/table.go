package kvindex

import "math/bits"

// table is an open-addressing hash map from uint64 to uint64 with linear probing and
// backward-shift deletion (no tombstones), laid out as one slice of 16-byte slots so that the
// collector scans no pointers and a block costs 16 bytes divided by the load factor.
//
// Capacity is not a power of two: a key's home slot is the high half of (mix(key) × n), and the
// table grows by half when it is maxLoad full, so its load stays between maxLoad/1.5 and
// maxLoad (53%..80%) and the bytes per entry between 20 and 30 at every size. Key 0 marks an
// empty slot; callers pass keys through norm.
type table struct {
	slots []slot
	n     int // live entries
}

type slot struct{ k, v uint64 }

const (
	minSlots = 8
	// maxLoad bounds the expected probes of a miss with linear probing, (1+1/(1-a)²)/2 = 13 at 0.8.
	maxLoadNum, maxLoadDen = 4, 5
	zeroKey                = 0x5bd1e9955bd1e995 // stands for key 0 (engines may name a block 0)
)

func norm(k uint64) uint64 {
	if k == 0 {
		return zeroKey
	}
	return k
}

func (t *table) home(k uint64) int {
	hi, _ := bits.Mul64(k*0x9e3779b97f4a7c15, uint64(len(t.slots)))
	return int(hi)
}

// find returns the slot of k, or -1. k must be normalised.
func (t *table) find(k uint64) int {
	if len(t.slots) == 0 {
		return -1
	}
	i := t.home(k)
	for {
		s := &t.slots[i]
		if s.k == k {
			return i
		}
		if s.k == 0 {
			return -1
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

func (t *table) get(k uint64) (uint64, bool) {
	if i := t.find(k); i >= 0 {
		return t.slots[i].v, true
	}
	return 0, false
}

// slotFor returns the slot of k, inserting it with value 0 when absent; added reports that.
func (t *table) slotFor(k uint64) (s *slot, added bool) {
	if (t.n+1)*maxLoadDen > len(t.slots)*maxLoadNum {
		t.grow()
	}
	i := t.home(k)
	for {
		s := &t.slots[i]
		if s.k == k {
			return s, false
		}
		if s.k == 0 {
			s.k, s.v = k, 0
			t.n++
			return s, true
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

func (t *table) grow() {
	n := len(t.slots) * 3 / 2
	if n < minSlots {
		n = minSlots
	}
	old := t.slots
	t.slots = make([]slot, n)
	for _, s := range old {
		if s.k == 0 {
			continue
		}
		i := t.home(s.k)
		for t.slots[i].k != 0 {
			if i++; i == n {
				i = 0
			}
		}
		t.slots[i] = s
	}
}

// deleteAt empties slot i and shifts the following run back so that every key stays
// reachable from its home slot.
func (t *table) deleteAt(i int) {
	n := len(t.slots)
	j := i
	for {
		if j++; j == n {
			j = 0
		}
		s := t.slots[j]
		if s.k == 0 {
			break
		}
		h := t.home(s.k)
		// s may fill the hole at i when its home is not cyclically within (i, j].
		if (j-h+n)%n >= (j-i+n)%n {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = slot{}
	t.n--
}

func (t *table) del(k uint64) (uint64, bool) {
	i := t.find(k)
	if i < 0 {
		return 0, false
	}
	v := t.slots[i].v
	t.deleteAt(i)
	return v, true
}

// reset drops every entry and the memory behind them.
func (t *table) reset() { *t = table{} }

func (t *table) bytes() int { return len(t.slots) * 16 }
