package score_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

// TestLowestAgreesWithReportedWait checks the hand-inlined loop of Lowest against the
// reference formula of ReportedWait, the awaiting work ranked first (AwaitingWork) and the
// spec's degradation rules, over random fleets.
func TestLowestAgreesWithReportedWait(t *testing.T) {
	f := policytest.NewFleet(t, 12, "m")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cfg := range []score.Config{
		score.DefaultConfig(),
		{KVPressureWeight: 2, DefaultThroughput: 500, MeanPrefillTokens: 64, MaxWaitingRequests: 6},
	} {
		s := score.New(cfg)
		type noted struct {
			w      *worker.Worker
			tokens int
		}
		var awaiting []noted
		for round := range 300 {
			for _, w := range f.Workers {
				w.SetLoad(nil)
				w.InFlight.Store(int64(rng.IntN(4)))
				if rng.IntN(3) > 0 || round%7 == 0 {
					policytest.SetReport(w, policytest.Report{
						Waiting:       rng.IntN(8),
						WaitingTokens: int64(rng.IntN(3)*1000 - 1),
						TokenUsage:    rng.Float64(),
						Running:       rng.IntN(5),
						Throughput:    float64(rng.IntN(3) * 1000),
					}, time.Time{})
					for range rng.IntN(3) {
						workertest.NoteDispatch(w, rng.IntN(3)*300-1)
					}
				}
				for range rng.IntN(3) {
					n := rng.IntN(3)*300 - 1
					workertest.NoteAwaiting(w, n)
					awaiting = append(awaiting, noted{w, n})
				}
			}
			rate := s.RateOf(s.NewFleetRate(f.Workers))
			if want := referenceRate(s, f.Workers); rate != want {
				t.Fatalf("round %d: fleet rate %+v, want %+v", round, rate, want)
			}
			got := s.LowestAt(&policy.Request{}, f.Workers, rate, testutil.NewRand(uint64(round)), policy.NoHotLimit)
			want, wantScore := reference(s, f.Workers, rate)
			if got == nil || want == nil {
				if got != want {
					t.Fatalf("round %d: Lowest = %v, reference = %v", round, got, want)
				}
				continue
			}
			if gs := scoreOf(s, f.Workers, got, rate); gs != wantScore {
				t.Fatalf("round %d (cfg %+v): Lowest chose a worker scoring %v, the best scores %v", round, cfg, gs, wantScore)
			}
			for _, a := range awaiting { // the next round starts with nothing awaiting
				workertest.NoteFirstToken(a.w, a.tokens)
			}
			awaiting = awaiting[:0]
		}
	}
}

// referenceRate is the fleet rate: the mean of the positive reported throughputs, else the
// configured default; and the mean step of the reports that show one (running ÷
// throughput), else 0.
func referenceRate(s *score.Scorer, ws []*worker.Worker) score.Rate {
	sum, n := 0.0, 0
	steps, m := 0.0, 0
	for _, w := range ws {
		if r := w.Load(); r != nil && r.GenThroughput > 0 {
			sum += r.GenThroughput
			n++
			if r.RunningRequests > 0 {
				steps += float64(r.RunningRequests) / r.GenThroughput
				m++
			}
		}
	}
	rate := score.Rate{TokensPerSecond: s.Config().DefaultThroughput}
	if n > 0 {
		rate.TokensPerSecond = sum / float64(n)
	}
	if m > 0 {
		rate.StepSeconds = steps / float64(m)
	}
	return rate
}

// key is what the score ranks a worker by: its awaiting work first, then its expected wait.
type key struct{ awaiting, wait float64 }

func (k key) less(o key) bool {
	return k.awaiting < o.awaiting || k.awaiting == o.awaiting && k.wait < o.wait
}

// reference ranks every worker by the rules of the score (Config's formula, the awaiting
// work first among reporting workers, the spec's degradation), slowly and plainly.
func reference(s *score.Scorer, ws []*worker.Worker, rate score.Rate) (*worker.Worker, key) {
	var best *worker.Worker
	bestKey := key{math.Inf(1), math.Inf(1)}
	for _, w := range ws {
		if k := scoreOf(s, ws, w, rate); k.less(bestKey) {
			best, bestKey = w, k
		}
	}
	return best, bestKey
}

func scoreOf(s *score.Scorer, ws []*worker.Worker, w *worker.Worker, rate score.Rate) key {
	anyReport := false
	bestRep := key{math.Inf(1), math.Inf(1)}
	for _, x := range ws {
		if r := x.Load(); r != nil {
			if sc, capped := s.ReportedWait(x, r, rate); !capped {
				anyReport = true
				if k := (key{s.AwaitingWork(x), sc}); k.less(bestRep) {
					bestRep = k
				}
			}
		}
	}
	if r := w.Load(); r != nil {
		sc, capped := s.ReportedWait(w, r, rate)
		if capped || !anyReport {
			return key{math.Inf(1), math.Inf(1)}
		}
		return key{s.AwaitingWork(w), sc}
	}
	if !anyReport {
		return key{0, float64(w.InFlight.Load())} // dark fleet: fewest in flight
	}
	// A worker without a report scores as the best reporting worker (awaiting work included)
	// plus its own in-flight requests.
	return key{bestRep.awaiting, bestRep.wait + float64(w.InFlight.Load())*float64(s.Config().MeanPrefillTokens)/rate.TokensPerSecond}
}

// TestLowestInTurnTakesTheOldestPrefill: when every worker is computing a prefill, awaiting
// work that differs by less than half a request like the new one is equal, and the worker
// picked longest ago wins, where LowestAt takes the fewest awaiting tokens (the tail of
// least_load on the real multi-turn fleet, docs/benchmarks-history.md run QMT1). A worker with
// nothing awaiting still wins outright, and past half a request the fewer tokens win.
func TestLowestInTurnTakesTheOldestPrefill(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	a, b, c := f.Workers[0], f.Workers[1], f.Workers[2]
	for _, w := range f.Workers {
		policytest.SetReport(w, policytest.Report{Throughput: 2000}, time.Time{})
	}
	s := score.New(score.DefaultConfig())
	rate := s.RateOf(s.NewFleetRate(f.Workers))
	req := &policy.Request{Text: make([]byte, 1400*policy.BytesPerToken)} // 1,400 tokens: a band of 700
	workertest.NoteAwaiting(a, 1400)
	workertest.NoteAwaiting(b, 1380)
	workertest.NoteAwaiting(c, 1390)
	turns := score.NewTurns(3, testutil.NewRand(1))
	turns.Note(0) // a picked longest ago: its prefill started first
	turns.Note(2)
	turns.Note(1)
	if got := s.LowestAt(req, f.Workers, rate, testutil.NewRand(1), policy.NoHotLimit); got != b {
		t.Fatalf("LowestAt picked %s, want the fewest awaiting tokens %s", got.URL, b.URL)
	}
	if got, i := s.LowestInTurn(req, f.Workers, rate, testutil.NewRand(1), policy.NoHotLimit, turns); got != a || i != 0 {
		t.Fatalf("LowestInTurn picked %v (index %d), want the one picked longest ago %s", got, i, a.URL)
	}
	workertest.NoteAwaiting(a, 800) // a: 2,200 tokens, 820 more than b's: past the band
	if got, _ := s.LowestInTurn(req, f.Workers, rate, testutil.NewRand(1), policy.NoHotLimit, turns); got != c {
		t.Fatalf("LowestInTurn picked %s, want %s (c picked before b, both in the band)", got.URL, c.URL)
	}
	workertest.NoteFirstToken(b, 1380) // b computes nothing: it wins whatever the turns
	if got, _ := s.LowestInTurn(req, f.Workers, rate, testutil.NewRand(1), policy.NoHotLimit, turns); got != b {
		t.Fatalf("LowestInTurn picked %s, want the worker with nothing awaiting %s", got.URL, b.URL)
	}
}
