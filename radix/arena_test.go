package radix

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// TestByteArenaRandom allocates and releases random spans, some released in pieces
// the way split edges are, checks the bookkeeping after every step, and checks that
// no live span was overwritten.
func TestByteArenaRandom(t *testing.T) {
	seeds := 4 // SMG_RADIX_SEEDS=n runs n seeds, for a longer search after a change
	if os.Getenv("SMG_RADIX_SEEDS") != "" {
		seeds, _ = strconv.Atoi(os.Getenv("SMG_RADIX_SEEDS"))
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		var a byteArena
		type liveSpan struct {
			span
			fill byte
		}
		var live []liveSpan
		var liveBytes int64
		for step := range 1500 {
			if len(live) == 0 || rng.IntN(5) < 3 {
				n := uint32(1 + rng.IntN(64))
				if rng.IntN(8) == 0 {
					n = uint32(1 + rng.IntN(300<<10)) // crosses chunk ends
				}
				off := a.alloc(n)
				fill := byte(rng.Uint32())
				b := a.view(off, n)
				for i := range b {
					b[i] = fill
				}
				live = append(live, liveSpan{span{off, n}, fill})
				liveBytes += int64(n)
			} else {
				i := rng.IntN(len(live))
				s := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				if cut := uint32(rng.IntN(int(s.n))); cut > 0 && rng.IntN(2) == 0 {
					// Release the two halves of a split edge at different times.
					a.release(s.off, cut)
					live = append(live, liveSpan{span{s.off + cut, s.n - cut}, s.fill})
					liveBytes -= int64(cut)
				} else {
					a.release(s.off, s.n)
					liveBytes -= int64(s.n)
				}
			}
			if err := a.check(liveBytes); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		for _, s := range live {
			if !bytes.Equal(a.view(s.off, s.n), bytes.Repeat([]byte{s.fill}, int(s.n))) {
				t.Fatalf("seed %d: live span %+v was overwritten", seed, s.span)
			}
		}
		// Releasing everything gives every byte back: the top retracts to the
		// start of the last chunk and the rest is free.
		for _, s := range live {
			a.release(s.off, s.n)
		}
		if err := a.check(0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestByteArenaReuse checks that released space is reused rather than grown: the
// reason for coalescing.
func TestByteArenaReuse(t *testing.T) {
	var a byteArena
	var offs []uint32
	size := uint32(1000)
	for range 1000 {
		offs = append(offs, a.alloc(size))
	}
	capBefore := a.capacityBytes()
	for round := range 20 {
		// Free every allocation in two pieces, then allocate sizes that only fit
		// if the pieces were joined again.
		for _, off := range offs {
			a.release(off, 300)
			a.release(off+300, size-300)
		}
		size = uint32(900 + round)
		for i := range offs {
			offs[i] = a.alloc(size)
		}
	}
	if err := a.check(int64(len(offs)) * int64(size)); err != nil {
		t.Fatal(err)
	}
	if a.capacityBytes() > capBefore+capBefore/8 {
		t.Fatalf("arena grew from %d to %d bytes although every round fits in the freed space", capBefore, a.capacityBytes())
	}
}

// TestByteArenaFullChunk fills a chunk to the last byte: the next allocation must
// start a new chunk, and releases next to the full end must not confuse the top.
func TestByteArenaFullChunk(t *testing.T) {
	var a byteArena
	first := a.alloc(chunkSize - 100)
	second := a.alloc(100)
	if second>>chunkShift != 0 || a.topInLast() != chunkSize {
		t.Fatalf("second allocation at %#x, top %#x", second, a.top)
	}
	third := a.alloc(10)
	if third>>chunkShift != 1 {
		t.Fatalf("allocation after a full chunk at %#x, want chunk 1", third)
	}
	copy(a.view(third, 10), "0123456789")
	a.release(second, 100)
	a.release(first, 50)
	if err := a.check(chunkSize - 100 - 50 + 10); err != nil {
		t.Fatal(err)
	}
	if string(a.view(third, 10)) != "0123456789" {
		t.Fatal("release in chunk 0 overwrote chunk 1")
	}
}
