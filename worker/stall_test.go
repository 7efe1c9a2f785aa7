package worker

import "testing"

// TestFirstByteAccounting: silence counts from the last first byte while requests wait, is 0
// when none waits, and a first byte clears a stall state and is counted for the typical time.
func TestFirstByteAccounting(t *testing.T) {
	w := newTestWorker()
	if w.Silence(100) != 0 {
		t.Fatal("silence with nothing waiting")
	}
	w.noteSent(1_000)
	w.noteSent(2_000) // a second request does not restart the silence
	if got := w.Silence(5_000); got != 4_000 {
		t.Fatalf("silence %v, want 4µs", got)
	}
	w.SetStallState(StallUnresponsive)
	w.noteFirstByte(2_000, 6_000)
	if w.StallState() != StallNone || w.Silence(7_000) != 1_000 || w.Waiting() != 1 {
		t.Fatalf("after a first byte: state %d silence %v waiting %d", w.StallState(), w.Silence(7_000), w.Waiting())
	}
	w.noteNoFirstByte()
	if w.Silence(9_000) != 0 {
		t.Fatal("silence with nothing waiting any more")
	}
	if sum, n := w.TakeFirstByteTimes(); sum != 4_000 || n != 1 {
		t.Fatalf("first-byte times %v/%d, want 4µs/1", sum, n)
	}
	if sum, n := w.TakeFirstByteTimes(); sum != 0 || n != 0 {
		t.Fatal("TakeFirstByteTimes did not start anew")
	}
}
