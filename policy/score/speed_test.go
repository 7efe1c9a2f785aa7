package score_test

import (
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

// setDecode gives w a decode-step estimate of ms milliseconds from n answers.
func setDecode(w *worker.Worker, ms float64, n int) {
	w.ClearDecode()
	for range n {
		workertest.NoteDecode(w, int64(ms*1e6))
	}
}

// refresh makes f refresh its verdicts on ws now (Observe refreshes at the first pick of every
// max(16, n)).
func refresh(f *score.SpeedFlags, ws []*worker.Worker) {
	for range max(16, len(ws)) {
		f.Observe(ws)
	}
}

func slowOnes(f *score.SpeedFlags, n int) []int {
	var out []int
	for i := range n {
		if f.Slow(i) {
			out = append(out, i)
		}
	}
	return out
}

// TestSpeedFlagsHysteresis: a worker over SlowDecodeFlag times the group's lower median is slow
// until it falls under SlowDecodeClear times it; in between it keeps its verdict. Workers with
// fewer than MinDecodeSamples answers are neither slow nor counted in the median, and with
// fewer than three known workers nobody is slow.
func TestSpeedFlagsHysteresis(t *testing.T) {
	fl := policytest.NewFleet(t, 8, "m")
	ws := fl.Workers
	for _, w := range ws {
		setDecode(w, 9, score.MinDecodeSamples)
	}
	f := score.NewSpeedFlags(len(ws))
	refresh(f, ws)
	if got := slowOnes(f, len(ws)); got != nil {
		t.Fatalf("uniform fleet: slow %v, want none", got)
	}
	setDecode(ws[6], 18, score.MinDecodeSamples)
	setDecode(ws[7], 18, score.MinDecodeSamples-1) // not known yet
	refresh(f, ws)
	if got := slowOnes(f, len(ws)); len(got) != 1 || got[0] != 6 {
		t.Fatalf("one known twice slower worker: slow %v, want [6]", got)
	}
	for _, c := range []struct {
		ms   float64
		slow bool
	}{{12.6, true}, {11.0, true}, {10.7, false}, {12.6, false}, {13.6, true}} { // 1.4, 1.22, 1.19, 1.4, 1.51 x
		setDecode(ws[6], c.ms, score.MinDecodeSamples)
		refresh(f, ws)
		if f.Slow(6) != c.slow {
			t.Fatalf("worker at %v ms against 9 ms: slow %v, want %v", c.ms, f.Slow(6), c.slow)
		}
	}
	// As many slow workers as fast ones: the lower median is a fast one's.
	for i, w := range ws {
		setDecode(w, []float64{9, 18}[i%2], score.MinDecodeSamples)
	}
	refresh(f, ws)
	if got := slowOnes(f, len(ws)); len(got) != 4 || got[0] != 1 || f.Count() != 4 {
		t.Fatalf("half the fleet twice slower: slow %v (Count %d), want [1 3 5 7]", got, f.Count())
	}
	for _, w := range ws[2:] {
		w.ClearDecode()
	}
	refresh(f, ws)
	if got := slowOnes(f, len(ws)); got != nil || f.Count() != 0 {
		t.Fatalf("two known workers: slow %v (Count %d), want none (no group to compare with)", got, f.Count())
	}
	var none *score.SpeedFlags
	none.Observe(ws)
	if none.Slow(0) || none.Count() != 0 {
		t.Fatal("nil flags call a worker slow")
	}
}

// TestSlowWorkerTakesWorkOnlyWhenOthersQueue: LowestInTurnAt ranks a slow worker as if
// SlowPenaltyRequests requests like the new one awaited there: an idle slow worker loses to a
// fast one with SlowPenaltyRequests-1 requests awaiting and wins against one with more than
// SlowPenaltyRequests.
func TestSlowWorkerTakesWorkOnlyWhenOthersQueue(t *testing.T) {
	fl := policytest.NewFleet(t, 4, "m")
	ws := fl.Workers
	for i, w := range ws {
		policytest.SetReport(w, policytest.Report{}, time.Unix(0, 0))
		setDecode(w, []float64{9, 9, 9, 18}[i], score.MinDecodeSamples)
	}
	f := score.NewSpeedFlags(len(ws))
	refresh(f, ws)
	s := score.New(score.DefaultConfig())
	req := &policy.Request{Text: make([]byte, 400*policy.BytesPerToken)}
	tokens := policy.DispatchTokens(req)
	rate := score.Rate{TokensPerSecond: 2000}
	queue := func(n int) {
		for _, w := range ws[:3] {
			for range n {
				workertest.NoteAwaiting(w, tokens)
			}
		}
	}
	unqueue := func(n int) {
		for _, w := range ws[:3] {
			for range n {
				workertest.NoteFirstToken(w, tokens)
			}
		}
	}
	for _, c := range []struct {
		queued   int
		wantSlow bool
	}{{0, false}, {score.SlowPenaltyRequests - 1, false}, {score.SlowPenaltyRequests + 1, true}} {
		queue(c.queued)
		w, _ := s.LowestInTurnAt(req, ws, rate, policy.RuntimeRand{}, policy.NoHotLimit, score.NewTurns(len(ws), policy.RuntimeRand{}), f)
		unqueue(c.queued)
		if (w == ws[3]) != c.wantSlow {
			t.Errorf("fast workers with %d requests awaiting: picked worker %d, want the slow one: %v", c.queued, w.Index, c.wantSlow)
		}
		// Without the flags (IgnoreSpeedFlags) the idle slow worker wins whenever the others queue.
		queue(c.queued)
		w, _ = score.New(score.Config{KVPressureWeight: 0.15, DefaultThroughput: 2000, MeanPrefillTokens: 1024, IgnoreSpeedFlags: true}).
			LowestInTurnAt(req, ws, rate, policy.RuntimeRand{}, policy.NoHotLimit, score.NewTurns(len(ws), policy.RuntimeRand{}), f)
		unqueue(c.queued)
		if c.queued > 0 && w != ws[3] {
			t.Errorf("IgnoreSpeed, fast workers with %d requests awaiting: picked worker %d, want the idle slow one", c.queued, w.Index)
		}
	}
}
