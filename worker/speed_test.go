package worker

import (
	"math"
	"testing"
)

// timeAnswer relays an answer of len(gaps)+1 pieces through a DecodeTimer: the first at 1 s,
// each next after its gap (ms), and finishes it on w.
func timeAnswer(w *Worker, gapsMs ...float64) {
	var t DecodeTimer
	now := int64(1e9)
	t.Piece(now)
	for _, g := range gapsMs {
		now += int64(g * 1e6)
		t.Piece(now)
	}
	t.Finish(w)
}

func repeat(n int, ms float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = ms
	}
	return out
}

// TestDecodeTimerTakesTheStepNotThePrefill: an answer's steps with another request's prefill
// chunk in them (a 2,590-token prompt: one 170 ms step; a 7,680-word prompt: several 0.5 s
// steps) do not move the sample, the lower quartile of its gaps, while a mean would (31 gaps:
// 9 ms each with one 170 ms step is 14.2 ms a step, with twelve 0.5 s steps 199 ms).
func TestDecodeTimerTakesTheStepNotThePrefill(t *testing.T) {
	for _, c := range []struct {
		name string
		gaps []float64
	}{
		{"plain", repeat(31, 9)},
		{"one prefill step", append(repeat(30, 9), 170)},
		{"twelve long prefill chunks of 31 steps", append(repeat(12, 500), repeat(19, 9)...)},
		{"63 gaps, the first 32 kept", append(repeat(32, 9), repeat(31, 900)...)},
	} {
		w := newTestWorker()
		timeAnswer(w, c.gaps...)
		step, n := w.DecodeStep()
		if n != 1 || math.Abs(step-0.009) > 1e-9 {
			t.Errorf("%s: DecodeStep %v s from %d answers, want 0.009 from 1", c.name, step, n)
		}
	}
}

// TestShortAnswersAreNoSample: fewer than MinDecodeSteps gaps, or an answer never started, say
// nothing about the step.
func TestShortAnswersAreNoSample(t *testing.T) {
	w := newTestWorker()
	timeAnswer(w, repeat(MinDecodeSteps-1, 9)...)
	var never DecodeTimer
	never.Finish(w)
	if step, n := w.DecodeStep(); step != 0 || n != 0 {
		t.Fatalf("DecodeStep %v from %d answers, want none", step, n)
	}
	timeAnswer(w, repeat(MinDecodeSteps, 9)...)
	if _, n := w.DecodeStep(); n != 1 {
		t.Fatalf("%d answers of %d steps counted, want 1", n, MinDecodeSteps)
	}
}

// TestDecodeEstimateIsTheMeanThenSmoothed: the first 1/DecodeSmoothing answers' steps are
// averaged (a worker is known after a few dozen answers, not after hundreds); past them a new
// answer moves the estimate by DecodeSmoothing of its difference. ClearDecode forgets it all.
func TestDecodeEstimateIsTheMeanThenSmoothed(t *testing.T) {
	w := newTestWorker()
	for i := range 16 {
		w.noteDecode(int64((10 + 2*(i%2)) * 1e6)) // 10, 12, 10, 12, ... ms
	}
	if step, n := w.DecodeStep(); n != 16 || math.Abs(step-0.011) > 1e-9 {
		t.Fatalf("after 16 answers: %v s from %d, want their mean 0.011 from 16", step, n)
	}
	w.noteDecode(27e6)
	if step, _ := w.DecodeStep(); math.Abs(step-(0.011+DecodeSmoothing*0.016)) > 1e-9 {
		t.Fatalf("the 17th answer at 27 ms moved the estimate to %v s, want %v", step, 0.011+DecodeSmoothing*0.016)
	}
	w.noteDecode(0)
	w.noteDecode(-5)
	if _, n := w.DecodeStep(); n != 17 {
		t.Fatalf("steps <= 0 counted: %d answers, want 17", n)
	}
	w.ClearDecode()
	if step, n := w.DecodeStep(); step != 0 || n != 0 {
		t.Fatalf("after ClearDecode: %v from %d, want none", step, n)
	}
}
