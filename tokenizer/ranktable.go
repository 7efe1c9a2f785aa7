package tokenizer

import "math/bits"

// rankTable is an open-addressing hash table from a (left, right) id pair
// to rank<<32|merged id, faster than a Go map for this one hot lookup.
type rankTable struct {
	keys  []uint64 // pair+1, so 0 marks an empty slot
	vals  []uint64
	shift uint
	mask  uint64
}

func newRankTable(n int) *rankTable {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return &rankTable{
		keys:  make([]uint64, size),
		vals:  make([]uint64, size),
		shift: uint(64 - bits.TrailingZeros(uint(size))),
		mask:  uint64(size - 1),
	}
}

func (t *rankTable) slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> t.shift }

// set inserts or overwrites: a later duplicate merge wins, as in Hugging Face.
func (t *rankTable) set(pair, v uint64) {
	k := pair + 1
	for i := t.slot(k); ; i = (i + 1) & t.mask {
		if t.keys[i] == 0 || t.keys[i] == k {
			t.keys[i], t.vals[i] = k, v
			return
		}
	}
}

func (t *rankTable) get(pair uint64) (uint64, bool) {
	k := pair + 1
	for i := t.slot(k); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case k:
			return t.vals[i], true
		case 0:
			return 0, false
		}
	}
}
