package kvindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

const bs = 4

// prompt returns n blocks of tokens: the first `shared` blocks of family f are the same in
// every prompt of the family, the rest depend on v.
func prompt(f, v, shared, n int) []uint32 {
	toks := make([]uint32, 0, n*bs)
	for b := range n {
		for i := range bs {
			if b < shared {
				toks = append(toks, uint32(f*1000+b*bs+i))
			} else {
				toks = append(toks, uint32(f*1000+v*100+b*bs+i+500))
			}
		}
	}
	return toks
}

// engineHash names a block as an engine would: from its whole prefix, not the index's hash.
func engineHash(prefix uint64) uint64 { return prefix*0x2545f4914f6cdd1d + 17 }

// model is the reference: per worker the set of prefix hashes held.
type model map[string]map[uint64]bool

func (m model) depth(w string, toks []uint32) uint32 {
	var d uint32
	for _, p := range PrefixHashes(nil, toks, bs) {
		if !m[w][p] {
			break
		}
		d++
	}
	return d
}

// storeChain stores blocks [from, to) of toks for h, naming the parent when from > 0.
func storeChain(x *Index, h Holder, toks []uint32, from, to int) bool {
	ph := PrefixHashes(nil, toks, bs)
	ev := StoredBlocks{Tokens: toks[from*bs : to*bs], BlockSize: bs}
	for _, p := range ph[from:to] {
		ev.EngineHashes = append(ev.EngineHashes, engineHash(p))
	}
	if from > 0 {
		ev.ParentHash, ev.HasParent = engineHash(ph[from-1]), true
	}
	return x.ApplyStored(h, ev)
}

// TestIndexAgainstModel applies random stores (whole chains and extensions), removals,
// clears and worker removals, and compares every worker's Match depth with the reference.
// 70 workers span two pages of holders.
func TestIndexAgainstModel(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 2))
		x, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		ref := model{}
		workers := make([]string, 70)
		for i := range workers {
			workers[i] = fmt.Sprintf("w%d", i)
			ref[workers[i]] = map[uint64]bool{}
			x.Holder(workers[i])
		}
		randPrompt := func() []uint32 { return prompt(r.IntN(5), r.IntN(4), 1+r.IntN(3), 1+r.IntN(8)) }
		for op := range 3000 {
			w := workers[r.IntN(len(workers))]
			h := x.Holder(w)
			toks := randPrompt()
			ph := PrefixHashes(nil, toks, bs)
			switch k := r.IntN(10); {
			case k < 5: // store a chain from a block the worker holds (or from the start)
				from := 0
				for from < len(ph) && ref[w][ph[from]] && r.IntN(3) > 0 {
					from++
				}
				if from == len(ph) {
					continue
				}
				to := from + 1 + r.IntN(len(ph)-from)
				if !storeChain(x, h, toks, from, to) {
					t.Fatalf("seed %d op %d: store refused", seed, op)
				}
				for _, p := range ph[from:to] {
					ref[w][p] = true
				}
			case k < 8: // remove the tail blocks of a prompt, as an LRU engine does
				n := r.IntN(len(ph) + 1)
				var hs []uint64
				for _, p := range ph[len(ph)-n:] {
					hs = append(hs, engineHash(p))
					delete(ref[w], p)
				}
				x.ApplyRemoved(h, hs)
			case k == 8 && r.IntN(10) == 0:
				x.Clear(h)
				ref[w] = map[uint64]bool{}
			case k == 9 && r.IntN(20) == 0:
				x.Remove(w)
				ref[w] = map[uint64]bool{}
				x.Holder(w)
			}
			if op%50 == 0 {
				check(t, x, ref, workers, randPrompt())
			}
		}
		total := 0
		for _, w := range workers {
			h, _ := x.Lookup(w)
			if got := x.Blocks(h); got != len(ref[w]) {
				t.Fatalf("seed %d: %s holds %d blocks, want %d", seed, w, got, len(ref[w]))
			}
			total += len(ref[w])
		}
		if st := x.Stats(); st.Blocks != total {
			t.Fatalf("seed %d: Stats.Blocks %d, want %d", seed, st.Blocks, total)
		}
	}
}

func check(t *testing.T, x *Index, ref model, workers []string, toks []uint32) {
	t.Helper()
	depth := make([]uint32, x.Slots())
	best := x.Match(toks, depth)
	var wantBest uint32
	for _, w := range workers {
		h, ok := x.Lookup(w)
		if !ok {
			t.Fatalf("%s has no slot", w)
		}
		want := ref.depth(w, toks)
		if depth[h] != want {
			t.Fatalf("%s: depth %d, want %d", w, depth[h], want)
		}
		wantBest = max(wantBest, want)
	}
	if best != wantBest {
		t.Fatalf("best %d, want %d", best, wantBest)
	}
	byHashes := make([]uint32, len(depth))
	if b := x.MatchHashes(x.PrefixHashes(nil, toks), byHashes); b != best || !slices.Equal(byHashes, depth) {
		t.Fatalf("MatchHashes: best %d depths %v, Match: best %d depths %v", b, byHashes, best, depth)
	}
}

func TestStoredEventsThatCannotBePlaced(t *testing.T) {
	x, _ := New(DefaultConfig())
	h := x.Holder("a")
	toks := prompt(1, 1, 2, 3)
	if storeChain(x, h, toks, 1, 2) {
		t.Error("a chain whose parent the worker does not hold was stored")
	}
	if x.ApplyStored(h, StoredBlocks{EngineHashes: []uint64{1}, Tokens: toks[:bs-1], BlockSize: bs}) {
		t.Error("a block with too few tokens was stored")
	}
	if !storeChain(x, h, toks, 0, 1) {
		t.Fatal("a first block was refused")
	}
	if x.ApplyStored(h, StoredBlocks{EngineHashes: []uint64{9}, Tokens: toks[:2*bs], BlockSize: 2 * bs}) {
		t.Error("a block of another size than the model's was stored")
	}
	if x.ApplyStored(Holder(7), StoredBlocks{EngineHashes: []uint64{9}, Tokens: toks[:bs], BlockSize: bs}) {
		t.Error("a block was stored for a holder that does not exist")
	}
	if st := x.Stats(); st.Ignored != 4 || st.Applied != 1 || st.Blocks != 1 {
		t.Fatalf("stats %+v, want 4 ignored, 1 applied, 1 block", st)
	}
	if x.BlockSize() != bs {
		t.Fatalf("block size %d, want %d", x.BlockSize(), bs)
	}
}

// TestMaxBlocksBoundsMemory fills an index far past its bound: the pairs stay at the bound,
// the biggest holder pays, and the tables stay within BytesPerBlock per pair.
func TestMaxBlocksBoundsMemory(t *testing.T) {
	const limit = 1000
	x, _ := New(Config{MaxBlocks: limit})
	big, small := x.Holder("big"), x.Holder("small")
	for i := range 200 {
		storeChain(x, small, prompt(1, i, 0, 1), 0, 1)
	}
	for i := range 5000 {
		storeChain(x, big, prompt(2, i%97, 0, 4)[:4*bs], 0, 4)
		storeChain(x, big, prompt(3+i, 0, 0, 1), 0, 1)
	}
	st := x.Stats()
	if st.Blocks != limit || st.Evicted == 0 {
		t.Fatalf("blocks %d evicted %d, want %d and some", st.Blocks, st.Evicted, limit)
	}
	if x.Blocks(small) != 200 {
		t.Fatalf("the small holder lost blocks: %d of 200", x.Blocks(small))
	}
	if st.Bytes > BytesPerBlock*limit+2*minSlots*16 {
		t.Fatalf("%d bytes for %d blocks: more than %d per block", st.Bytes, st.Blocks, BytesPerBlock)
	}
	x.Remove("big")
	x.Remove("small")
	if st := x.Stats(); st.Blocks != 0 || st.Bytes != 0 {
		t.Fatalf("after removing every worker: %+v", st)
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	x, _ := New(DefaultConfig())
	toks := prompt(1, 1, 8, 16)
	for i := range 3 {
		storeChain(x, x.Holder(fmt.Sprint(i)), toks, 0, 4*(i+1))
	}
	depth := make([]uint32, x.Slots())
	if n := testing.AllocsPerRun(100, func() { x.Match(toks, depth) }); n != 0 {
		t.Fatalf("Match allocates %.1f times", n)
	}
	if !slices.Equal(depth, []uint32{4, 8, 12}) {
		t.Fatalf("depths %v, want [4 8 12]", depth)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("MaxBlocks 0 accepted")
	}
}

// TestMatchIntoAShortDepthSlice: a holder added after the caller sized its slice is skipped,
// not written past the slice.
func TestMatchIntoAShortDepthSlice(t *testing.T) {
	x, _ := New(DefaultConfig())
	toks := prompt(1, 1, 4, 4)
	for i := range 70 {
		storeChain(x, x.Holder(fmt.Sprint(i)), toks, 0, 4)
	}
	for _, n := range []int{0, 1, 63, 64, 65, 69} {
		depth := make([]uint32, n)
		want := uint32(4)
		if n == 0 {
			want = 0
		}
		if got := x.Match(toks, depth); got != want {
			t.Fatalf("%d slots: best %d, want %d", n, got, want)
		}
		for s, d := range depth {
			if d != 4 {
				t.Fatalf("%d slots: slot %d depth %d", n, s, d)
			}
		}
	}
}
