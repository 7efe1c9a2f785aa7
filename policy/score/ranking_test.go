package score_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
	"github.com/smg-go/smg/worker/workertest"
)

// loadChurn changes the load of a fleet at random, as the request path, the load monitor, the
// registry and the breakers do: in-flight and dispatch counts, requests awaiting their first
// token, load reports (some cleared, many alike so that workers tie), overload vetoes,
// statuses, breakers, decode speeds.
type loadChurn struct {
	tb       testing.TB
	fl       *policytest.Fleet
	rng      *rand.Rand
	awaiting [][]int // per worker, the token counts of its requests awaiting a first token
}

func newLoadChurn(tb testing.TB, fl *policytest.Fleet, seed uint64) *loadChurn {
	return &loadChurn{tb: tb, fl: fl, rng: rand.New(rand.NewPCG(seed, 7)), awaiting: make([][]int, len(fl.Workers))}
}

var churnTokens = []int{-1, 64, 512, 512, 2048}

func (c *loadChurn) step() {
	i := c.rng.IntN(len(c.fl.Workers))
	w := c.fl.Workers[i]
	switch op := c.rng.IntN(100); {
	case op < 25:
		w.InFlight.Add(1)
		workertest.NoteDispatch(w, churnTokens[c.rng.IntN(len(churnTokens))])
	case op < 40:
		if w.InFlight.Load() > 0 {
			w.InFlight.Add(-1)
		}
	case op < 52:
		tokens := churnTokens[c.rng.IntN(len(churnTokens))]
		workertest.NoteAwaiting(w, tokens)
		c.awaiting[i] = append(c.awaiting[i], tokens)
	case op < 64:
		if n := len(c.awaiting[i]); n > 0 {
			workertest.NoteFirstToken(w, c.awaiting[i][n-1])
			c.awaiting[i] = c.awaiting[i][:n-1]
		}
	case op < 82:
		if c.rng.IntN(8) == 0 {
			w.SetLoad(nil)
			return
		}
		policytest.SetReport(w, policytest.Report{
			Waiting: c.rng.IntN(3), Running: c.rng.IntN(4), WaitingTokens: int64(c.rng.IntN(3)*1000 - 1),
			TokenUsage: float64(c.rng.IntN(3)) / 4, Throughput: float64(c.rng.IntN(3) * 1000),
		}, time.Now())
	case op < 88:
		w.SetOverloaded(!w.Overloaded())
	case op < 91:
		if w.Status() == worker.StatusReady {
			c.fl.SetStatus(w, worker.StatusNotReady)
		} else {
			c.fl.SetStatus(w, worker.StatusReady)
		}
	case op < 94:
		for range breaker.DefaultFailureThreshold {
			w.Breaker.Record(breaker.Permit{}, breaker.Fault, clock.Nanos())
		}
	default:
		ms := 9.0
		if c.rng.IntN(3) == 0 {
			ms = 20
		}
		setDecode(w, ms, score.MinDecodeSamples)
	}
}

// request returns a request of a random size, sometimes a retry excluding a few workers.
func (c *loadChurn) request() *policy.Request {
	req := &policy.Request{}
	if n := c.rng.IntN(4); n > 0 {
		req.Text = make([]byte, n*700)
	}
	if c.rng.IntN(6) == 0 {
		for range 1 + c.rng.IntN(3) {
			req.Exclude = append(req.Exclude, c.fl.Workers[c.rng.IntN(len(c.fl.Workers))])
		}
	}
	return req
}

var churnRates = []score.Rate{{TokensPerSecond: 2000}, {TokensPerSecond: 1500, StepSeconds: 0.004}, {TokensPerSecond: 3000, StepSeconds: 0.0015}}

// TestRankingPicksAsTheScan: on random load sequences, a Ranking picks the worker the scan
// (LowestInTurnAt) picks, drawing the same random numbers, with and without the waiting-queue
// cap, with speeds flagging slow workers and with the speed verdicts ignored.
func TestRankingPicksAsTheScan(t *testing.T) {
	capped := score.DefaultConfig()
	capped.MaxWaitingRequests = 3
	ignoring := score.DefaultConfig()
	ignoring.IgnoreSpeedFlags = true
	for ci, cfg := range []score.Config{score.DefaultConfig(), capped, ignoring} {
		for seed := range uint64(4) {
			fl := policytest.NewFleet(t, 37+int(seed)*20, "m")
			ws := fl.Workers
			s := score.New(cfg)
			rndRank, rndScan := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
			turnsRank, turnsScan := score.NewTurns(len(ws), rndRank), score.NewTurns(len(ws), rndScan)
			speeds := score.NewSpeedFlags(len(ws))
			rk := s.NewRanking(ws, turnsRank, speeds)
			churn := newLoadChurn(t, fl, seed)
			rates := rand.New(rand.NewPCG(seed, 3))
			for step := range 3000 {
				for range 1 + churn.rng.IntN(4) {
					churn.step()
				}
				req := churn.request()
				rate := churnRates[rates.IntN(len(churnRates))]
				speeds.Observe(ws)
				got, gi := rk.Pick(req, rate, rndRank, policy.NoHotLimit)
				want, wi := s.LowestInTurnAt(req, ws, rate, rndScan, policy.NoHotLimit, turnsScan, speeds)
				if got != want || gi != wi {
					t.Fatalf("config %d seed %d step %d: ranking picked place %d, the scan %d", ci, seed, step, gi, wi)
				}
				if gi >= 0 {
					turnsRank.Note(gi)
					turnsScan.Note(wi)
				}
			}
		}
	}
}

// TestRankingConcurrentPicks: picks on several goroutines while the fleet's load changes on
// others return usable workers, and once the changes stop the Ranking agrees with the scan
// again (what changed while it picked was marked, not lost). Run with -race.
func TestRankingConcurrentPicks(t *testing.T) {
	fl := policytest.NewFleet(t, 200, "m")
	ws := fl.Workers
	s := score.New(score.DefaultConfig())
	turns := score.NewTurns(len(ws), policy.RuntimeRand{})
	rk := s.NewRanking(ws, turns, nil)
	rate := score.Rate{TokensPerSecond: 2000}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				w := ws[rng.IntN(len(ws))]
				w.InFlight.Add(1)
				workertest.NoteDispatch(w, 512)
				policytest.SetReport(w, policytest.Report{Running: rng.IntN(4), Throughput: 1000, TokenUsage: 0.2}, time.Now())
				w.InFlight.Add(-1)
			}
		})
	}
	errs := make(chan string, 2)
	for range 2 {
		wg.Go(func() {
			for range 2000 {
				w, i := rk.Pick(&policy.Request{}, rate, policy.RuntimeRand{}, policy.NoHotLimit)
				if w == nil || ws[i] != w || !w.Routable() {
					errs <- "a concurrent pick returned no usable worker"
					return
				}
				turns.Note(i)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	// Quiet now: give every worker its own load, so that one worker is strictly best.
	for i, w := range ws {
		policytest.SetReport(w, policytest.Report{Waiting: 1, WaitingTokens: int64(1000 + 37*((i*7919)%len(ws))), Throughput: 1000}, time.Now())
	}
	want, _ := s.LowestInTurnAt(&policy.Request{}, ws, rate, policy.RuntimeRand{}, policy.NoHotLimit, turns, nil)
	if got, _ := rk.Pick(&policy.Request{}, rate, policy.RuntimeRand{}, policy.NoHotLimit); got != want {
		t.Fatalf("after the changes stopped the ranking picked %s, the scan %s", got.URL, want.URL)
	}
}

// TestRankingPickDoesNotAllocate: a steady-state pick over 1,000 workers, with a change since
// the previous one, allocates nothing.
func TestRankingPickDoesNotAllocate(t *testing.T) {
	fl := policytest.NewFleet(t, 1000, "m")
	ws := fl.Workers
	for i, w := range ws {
		if i%2 == 0 {
			policytest.SetReport(w, policytest.Report{Running: 2, Throughput: 1000, TokenUsage: 0.3}, time.Now())
		}
	}
	s := score.New(score.DefaultConfig())
	turns := score.NewTurns(len(ws), policy.RuntimeRand{})
	rk := s.NewRanking(ws, turns, nil)
	rate := score.Rate{TokensPerSecond: 2000}
	req := &policy.Request{Text: make([]byte, 4096), Exclude: []*worker.Worker{ws[3]}}
	n := 0
	pick := func() {
		w, i := rk.Pick(req, rate, policy.RuntimeRand{}, policy.NoHotLimit)
		workertest.NoteDispatch(w, policy.DispatchTokens(req))
		w.InFlight.Add(1)
		turns.Note(i)
		ws[n%len(ws)].InFlight.Add(-1)
		n++
	}
	pick()
	if allocs := testing.AllocsPerRun(1000, pick); allocs != 0 {
		t.Fatalf("a Ranking pick allocates %.1f times, want 0", allocs)
	}
}

// fewestScan is what PickFewest stands for: every usable worker with the fewest requests in
// flight, and Lowest among them when there are several.
func fewestScan(s *score.Scorer, req *policy.Request, ws []*worker.Worker, tokensPerSec float64, rnd policy.Rand) *worker.Worker {
	var least []*worker.Worker
	fewest := int64(math.MaxInt64)
	for _, w := range ws {
		if !req.Usable(w) {
			continue
		}
		switch n := w.InFlight.Load(); {
		case n < fewest:
			fewest, least = n, append(least[:0], w)
		case n == fewest:
			least = append(least, w)
		}
	}
	switch len(least) {
	case 0:
		return nil
	case 1:
		return least[0]
	}
	return s.Lowest(req, least, tokensPerSec, rnd, policy.NoHotLimit)
}

// TestFewestRankingPicksAsTheScan: on random load sequences, PickFewest picks the worker
// fewestScan picks, drawing the same random numbers, with and without the waiting-queue cap.
func TestFewestRankingPicksAsTheScan(t *testing.T) {
	capped := score.DefaultConfig()
	capped.MaxWaitingRequests = 3
	for ci, cfg := range []score.Config{score.DefaultConfig(), capped} {
		for seed := range uint64(4) {
			fl := policytest.NewFleet(t, 29+int(seed)*20, "m")
			ws := fl.Workers
			s := score.New(cfg)
			rndRank, rndScan := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
			rk := s.NewFewestRanking(ws)
			churn := newLoadChurn(t, fl, seed)
			rates := rand.New(rand.NewPCG(seed, 3))
			for step := range 3000 {
				for range 1 + churn.rng.IntN(4) {
					churn.step()
				}
				req := churn.request()
				tps := churnRates[rates.IntN(len(churnRates))].TokensPerSecond
				got := rk.PickFewest(req, tps, rndRank)
				if want := fewestScan(s, req, ws, tps, rndScan); got != want {
					t.Fatalf("config %d seed %d step %d: ranking picked %v, the scan %v", ci, seed, step, got, want)
				}
			}
		}
	}
}

// TestFewestRankingPickDoesNotAllocate: a steady-state PickFewest over 1,000 workers, with a
// change since the previous one, allocates nothing.
func TestFewestRankingPickDoesNotAllocate(t *testing.T) {
	fl := policytest.NewFleet(t, 1000, "m")
	ws := fl.Workers
	for i, w := range ws {
		if i%2 == 0 {
			policytest.SetReport(w, policytest.Report{Running: 2, Throughput: 1000, TokenUsage: 0.3}, time.Now())
		}
	}
	rk := score.New(score.DefaultConfig()).NewFewestRanking(ws)
	req := &policy.Request{Text: make([]byte, 4096), Exclude: []*worker.Worker{ws[3]}}
	n := 0
	pick := func() {
		w := rk.PickFewest(req, 2000, policy.RuntimeRand{})
		w.InFlight.Add(1)
		ws[n%len(ws)].InFlight.Add(-1)
		n++
	}
	pick()
	if allocs := testing.AllocsPerRun(1000, pick); allocs != 0 {
		t.Fatalf("a PickFewest allocates %.1f times, want 0", allocs)
	}
}

// TestSuccessionCarriesTurnsOver: a group's next snapshot keeps each remaining worker's turn
// and the pick clock, so equal workers are still taken in the order of their last picks; a
// worker new to the group, never picked, comes before every other.
func TestSuccessionCarriesTurnsOver(t *testing.T) {
	fl := policytest.NewFleet(t, 6, "m")
	s := score.New(score.DefaultConfig())
	rnd := rand.New(rand.NewPCG(3, 4))
	var line score.Succession
	first := fl.Workers[:5]
	turns := line.Turns(first, rnd)
	line.Succeed(s.NewRanking(first, turns, nil))
	for _, p := range []int{3, 0, 4, 3} {
		turns.Note(p)
	}
	before := map[*worker.Worker]uint64{}
	for i, w := range first {
		before[w] = turns.At(i)
	}
	// Worker 1 leaves, worker 5 joins.
	next := []*worker.Worker{fl.Workers[0], fl.Workers[2], fl.Workers[3], fl.Workers[4], fl.Workers[5]}
	carried := line.Turns(next, rnd)
	for i, w := range next[:4] {
		if got := carried.At(i); got != before[w] {
			t.Errorf("%s: turn %d after the change, want %d as before", w.URL, got, before[w])
		}
	}
	if got := carried.At(4); got != 0 {
		t.Errorf("the new worker's turn is %d, want 0: before every other", got)
	}
	if carried.Clock() != turns.Clock() {
		t.Errorf("clock %d, want %d carried over", carried.Clock(), turns.Clock())
	}
}
