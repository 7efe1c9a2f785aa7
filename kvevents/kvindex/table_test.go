package kvindex

import (
	"math/rand/v2"
	"testing"
)

// TestTableAgainstMap drives the table and a Go map with the same random operations, with
// keys from a small range so that runs, wrap-around and backward shifts all happen.
func TestTableAgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var tb table
		ref := map[uint64]uint64{}
		keyRange := uint64(1 + r.IntN(300))
		for op := range 5000 {
			k := r.Uint64N(keyRange) // includes 0: norm stands in for it
			switch r.IntN(3) {
			case 0, 1:
				s, added := tb.slotFor(norm(k))
				_, had := ref[k]
				if added == had {
					t.Fatalf("seed %d op %d: insert %d added=%v, map had=%v", seed, op, k, added, had)
				}
				s.v = k * 3
				ref[k] = k * 3
			case 2:
				v, ok := tb.del(norm(k))
				want, had := ref[k]
				if ok != had || v != want {
					t.Fatalf("seed %d op %d: del %d = %d,%v, want %d,%v", seed, op, k, v, ok, want, had)
				}
				delete(ref, k)
			}
			if tb.n != len(ref) {
				t.Fatalf("seed %d op %d: %d entries, map %d", seed, op, tb.n, len(ref))
			}
		}
		for k, want := range ref {
			if v, ok := tb.get(norm(k)); !ok || v != want {
				t.Fatalf("seed %d: get %d = %d,%v, want %d", seed, k, v, ok, want)
			}
		}
		if len(tb.slots) > 0 && tb.n*maxLoadDen > len(tb.slots)*maxLoadNum {
			t.Fatalf("seed %d: load %d/%d above the bound", seed, tb.n, len(tb.slots))
		}
	}
}
