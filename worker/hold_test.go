package worker

import (
	"math/rand/v2"
	"testing"
)

// TestHoldUndoesWhatItTook drives holds through every order of their steps (first byte or
// none, first token awaited or not, taken or not, steps repeated) and checks the worker's
// counts while they run and after they end: each hold counts once in flight and once
// waiting for its first byte until it comes, once awaiting its first token until it comes,
// and End gives back whatever is still held, exactly once.
func TestHoldUndoesWhatItTook(t *testing.T) {
	w := newTestWorker()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		holds := make([]Hold, 1+rng.IntN(8))
		var waiting, awaiting int64
		for i := range holds {
			tokens := rng.IntN(3)*100 - 1
			holds[i].Begin(w, tokens, int64(1+round))
			waiting++
			if rng.IntN(2) == 0 {
				holds[i].AwaitFirstToken()
				holds[i].AwaitFirstToken() // counted once
				awaiting++
			}
		}
		for i := range holds {
			h := &holds[i]
			if rng.IntN(2) == 0 {
				h.FirstByte(int64(2 + round))
				h.FirstByte(int64(3 + round)) // recorded once
				waiting--
			}
			if h.awaiting && rng.IntN(2) == 0 {
				h.FirstToken()
				h.FirstToken()
				awaiting--
			}
		}
		req, _, _ := w.Awaiting()
		if got := w.InFlight.Load(); got != int64(len(holds)) || w.Waiting() != waiting || req != awaiting {
			t.Fatalf("round %d: in flight %d waiting %d awaiting %d; want %d, %d, %d", round, got, w.Waiting(), req, len(holds), waiting, awaiting)
		}
		for i := range holds {
			holds[i].End()
			holds[i].End() // a hold that ended holds nothing
			if holds[i].Held() {
				t.Fatal("a hold still held after End")
			}
		}
		req, tokens, unknown := w.Awaiting()
		if w.InFlight.Load() != 0 || w.Waiting() != 0 || req != 0 || tokens != 0 || unknown != 0 {
			t.Fatalf("round %d: after End: in flight %d waiting %d awaiting %d/%d/%d", round, w.InFlight.Load(), w.Waiting(), req, tokens, unknown)
		}
	}
	if m := w.DispatchMark(); m.requests == 0 {
		t.Fatal("no dispatch was credited")
	}
}
