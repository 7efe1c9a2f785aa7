//go:build !race

package worker

import "testing"

// TestDecodeTimerDoesNotAllocate: it runs on the relay, a token a call.
func TestDecodeTimerDoesNotAllocate(t *testing.T) {
	w := newTestWorker()
	var d DecodeTimer
	now := int64(1)
	if n := testing.AllocsPerRun(100, func() {
		for range 40 {
			now += 9e6
			d.Piece(now)
		}
		d.Finish(w)
	}); n != 0 {
		t.Fatalf("an answer's timing allocates %v times, want 0", n)
	}
}
