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
)

// TestLowestAgreesWithReportedWait checks the hand-inlined loop of Lowest against the
// reference formula of ReportedWait and the spec's degradation rules, over random fleets.
func TestLowestAgreesWithReportedWait(t *testing.T) {
	f := policytest.NewFleet(t, 12, "m")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cfg := range []score.Config{
		score.DefaultConfig(),
		{KVPressureWeight: 2, DefaultThroughput: 500, MeanPrefillTokens: 64, MaxWaitingRequests: 6},
	} {
		s := score.New(cfg)
		for round := range 300 {
			for _, w := range f.Workers {
				w.SetLoad(nil)
				w.InFlight.Store(int64(rng.IntN(4)))
				if rng.IntN(3) > 0 || round%7 == 0 {
					policytest.SetReport(w, policytest.Report{
						Waiting:       rng.IntN(8),
						WaitingTokens: int64(rng.IntN(3)*1000 - 1),
						TokenUsage:    rng.Float64(),
						Throughput:    float64(rng.IntN(3) * 1000),
					}, time.Time{})
					for range rng.IntN(3) {
						w.NoteDispatch(rng.IntN(3)*300 - 1)
					}
				}
			}
			rate := s.NewFleetRate(f.Workers).TokensPerSecond()
			if want := referenceRate(s, f.Workers); rate != want {
				t.Fatalf("round %d: fleet rate %v, want %v", round, rate, want)
			}
			got := s.Lowest(&policy.Request{}, f.Workers, rate, testutil.NewRand(uint64(round)), policy.NoHotLimit)
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
		}
	}
}

// referenceRate is the fleet rate: the mean of the positive reported throughputs, else the
// configured default.
func referenceRate(s *score.Scorer, ws []*worker.Worker) float64 {
	sum, n := 0.0, 0
	for _, w := range ws {
		if r := w.Load(); r != nil && r.GenThroughput > 0 {
			sum += r.GenThroughput
			n++
		}
	}
	if n == 0 {
		return s.Config().DefaultThroughput
	}
	return sum / float64(n)
}

// reference scores every worker by the rules of the score (Config's formula and the
// spec's degradation), slowly and plainly.
func reference(s *score.Scorer, ws []*worker.Worker, rate float64) (*worker.Worker, float64) {
	var best *worker.Worker
	bestScore := math.Inf(1)
	for _, w := range ws {
		if sc := scoreOf(s, ws, w, rate); sc < bestScore {
			best, bestScore = w, sc
		}
	}
	return best, bestScore
}

func scoreOf(s *score.Scorer, ws []*worker.Worker, w *worker.Worker, rate float64) float64 {
	anyReport := false
	bestRep := math.Inf(1)
	for _, x := range ws {
		if r := x.Load(); r != nil {
			if sc, capped := s.ReportedWait(x, r, rate); !capped {
				anyReport = true
				bestRep = math.Min(bestRep, sc)
			}
		}
	}
	if r := w.Load(); r != nil {
		sc, capped := s.ReportedWait(w, r, rate)
		if capped {
			return math.Inf(1)
		}
		if !anyReport {
			return math.Inf(1)
		}
		return sc
	}
	if !anyReport {
		return float64(w.InFlight.Load()) // dark fleet: fewest in flight
	}
	return bestRep + float64(w.InFlight.Load())*float64(s.Config().MeanPrefillTokens)/rate
}
