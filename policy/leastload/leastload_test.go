package leastload

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newPicker(t testing.TB, f *policytest.Fleet, cfg Config, seed uint64) policy.Picker {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return New(cfg, testutil.NewRand(seed)).Build(f.Group("m"))
}

func pickOne(t *testing.T, p policy.Picker, req *policy.Request) *worker.Worker {
	t.Helper()
	res, err := p.Pick(req)
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return res.Worker
}

func TestScoreFormula(t *testing.T) {
	f := policytest.NewFleet(t, 1, "m")
	w := f.Workers[0]
	s := score.New(score.DefaultConfig())
	cases := []struct {
		name     string
		rep      policytest.Report
		rate     float64 // the fleet rate, tokens/s
		dispatch []int   // NoteDispatch arguments since the report
		want     float64
		step     float64            // the fleet's mean step, s (0: none known)
		prev     *policytest.Report // published before rep (nil: the worker had no report)
	}{
		{"idle", policytest.Report{WaitingTokens: 0}, 1000, nil, 0, 0, nil},
		{"queued tokens over the fleet rate", policytest.Report{WaitingTokens: 4000, Throughput: 1000}, 2000, nil, 2, 0, nil},
		{"the worker's own throughput does not count", policytest.Report{WaitingTokens: 4000, Throughput: 8000}, 2000, nil, 2, 0, nil},
		{"queue depth without tokens at the mean prefill", policytest.Report{Waiting: 3, WaitingTokens: -1, Throughput: 1024}, 1024, nil, 3, 0, nil},
		{"kv pressure k/(1-k)", policytest.Report{WaitingTokens: 0, TokenUsage: 0.5}, 1000, nil, 0.15, 0, nil},
		{"full cache is capped at 0.999", policytest.Report{WaitingTokens: 0, TokenUsage: 1}, 1000, nil, 0.15 * worker.MaxKVUsage / (1 - worker.MaxKVUsage), 0, nil},
		{"known dispatch tokens credited", policytest.Report{WaitingTokens: 1000, Throughput: 1000}, 1000, []int{500, 500}, 2, 0, nil},
		{"unknown dispatch at the mean", policytest.Report{WaitingTokens: 0, Throughput: 1024}, 1024, []int{-1, -1}, 2, 0, nil},
		{"zero running, zero throughput: dispatches at the fleet rate", policytest.Report{}, 512, []int{-1, -1}, 4, 0, nil},
		// 10 running at 500 tokens/s: a 20 ms step, twice the fleet's 10 ms: half the rate.
		{"a clearly slower step drains at its share of the fleet rate", policytest.Report{WaitingTokens: 1000, Running: 10, Throughput: 500}, 1000, nil, 2, 0.01, nil},
		{"a step 1.2 x the fleet's (under SlowStepRatio) drains at the fleet rate", policytest.Report{WaitingTokens: 1000, Running: 12, Throughput: 1000}, 1000, nil, 1, 0.01, nil},
		{"a faster step drains at the fleet rate", policytest.Report{WaitingTokens: 1000, Running: 10, Throughput: 2000}, 1000, nil, 1, 0.01, nil},
		{"an idle engine keeps its last step", policytest.Report{}, 1000, []int{1000}, 2, 0.01, &policytest.Report{Running: 10, Throughput: 500}},
		// From 20 ms, a 40 ms step moves the estimate a fifth of the way (24 ms) ...
		{"a longer step moves the estimate by StepSmoothing", policytest.Report{WaitingTokens: 1000, Running: 10, Throughput: 250}, 1000, nil, 2.4, 0.01, &policytest.Report{Running: 10, Throughput: 500}},
		// ... and a shorter one (15 ms) replaces it.
		{"a shorter step replaces the estimate", policytest.Report{WaitingTokens: 1000, Running: 6, Throughput: 400}, 1000, nil, 1.5, 0.01, &policytest.Report{Running: 10, Throughput: 500}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.SetLoad(nil)
			if c.prev != nil {
				policytest.SetReport(w, *c.prev, t0)
			}
			policytest.SetReport(w, c.rep, t0)
			for _, n := range c.dispatch {
				workertest.NoteDispatch(w, n)
			}
			got, capped := s.ReportedWait(w, w.Load(), score.Rate{TokensPerSecond: c.rate, StepSeconds: c.step})
			if capped || math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("score = %v (capped %v), want %v", got, capped, c.want)
			}
		})
	}
}

func TestPicksLowestExpectedWait(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	a, b, c := f.Workers[0], f.Workers[1], f.Workers[2]
	// Fleet rate (2000+8000+2000)/3 = 4000 tokens/s for everyone: b's high report is its
	// batch, not a faster worker.
	policytest.SetReport(a, policytest.Report{WaitingTokens: 8000, Throughput: 2000}, t0) // 2 s
	policytest.SetReport(b, policytest.Report{WaitingTokens: 6000, Throughput: 8000}, t0) // 1.5 s
	policytest.SetReport(c, policytest.Report{WaitingTokens: 4000, Throughput: 2000}, t0) // 1 s
	p := newPicker(t, f, DefaultConfig(), 1)
	if got := pickOne(t, p, &policy.Request{}); got != c {
		t.Fatalf("picked %s, want %s", got.URL, c.URL)
	}
	// In-flight credit: one unknown-size request sent to c since its report (1024/4000 s)
	// puts it within one request of mean size of b (1.256 s against 1.5 s): the two count as
	// equal and b, picked less recently, wins (score.Scorer.LowestInTurn).
	workertest.NoteDispatch(c, -1)
	if got := pickOne(t, p, &policy.Request{}); got != b {
		t.Fatalf("picked %s, want %s", got.URL, b.URL)
	}
	// Past a request's difference the lower wait wins, even over the workers picked longer
	// ago: b, just picked, at 1.5 s; a at 2 s, c at (4000+4×1024)/4000 = 2.024 s.
	workertest.NoteDispatch(c, -1)
	workertest.NoteDispatch(c, -1)
	workertest.NoteDispatch(c, -1)
	if got := pickOne(t, p, &policy.Request{}); got != b {
		t.Fatalf("after the burst picked %s, want %s", got.URL, b.URL)
	}
}

func TestFullKVCacheSteersAway(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	full, free := f.Workers[0], f.Workers[1]
	policytest.SetReport(full, policytest.Report{WaitingTokens: 0, TokenUsage: 0.99}, t0)
	policytest.SetReport(free, policytest.Report{WaitingTokens: 20000, TokenUsage: 0.1}, t0) // 10 s of work
	p := newPicker(t, f, DefaultConfig(), 1)
	if got := pickOne(t, p, &policy.Request{}); got != free {
		t.Fatalf("picked %s, want the worker whose cache is not full", got.URL)
	}
}

func TestDarkFleetJoinsShortestQueue(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	f.Workers[0].InFlight.Add(5)
	f.Workers[1].InFlight.Add(2)
	f.Workers[2].InFlight.Add(7)
	p := newPicker(t, f, DefaultConfig(), 1)
	if got := pickOne(t, p, &policy.Request{}); got != f.Workers[1] {
		t.Fatalf("picked %s, want the fewest in-flight", got.URL)
	}
}

func TestWorkerWithoutReportScoresAsBestPlusItsInFlight(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	rep1, rep2, fresh := f.Workers[0], f.Workers[1], f.Workers[2]
	policytest.SetReport(rep1, policytest.Report{WaitingTokens: 2000, Throughput: 1000}, t0) // 2 s
	policytest.SetReport(rep2, policytest.Report{WaitingTokens: 6000, Throughput: 1000}, t0) // 6 s
	p := newPicker(t, f, DefaultConfig(), 7)

	// Idle and unreported: ties with the best reporting worker, so they share traffic.
	counts := policytest.Counts(t, p, &policy.Request{}, 10000)
	if counts[rep2] != 0 || counts[rep1] < 4500 || counts[fresh] < 4500 {
		t.Fatalf("idle new worker should split evenly with the best: %v/%v/%v", counts[rep1], counts[rep2], counts[fresh])
	}
	// One request in flight on it: 2 s + 1024/1000 s > 2 s, the best reporter wins, but it
	// still beats the 6 s worker (it is neither starved nor flooded).
	fresh.InFlight.Add(1)
	if got := pickOne(t, p, &policy.Request{}); got != rep1 {
		t.Fatalf("picked %s, want %s", got.URL, rep1.URL)
	}
	// The bar moves with the best reporter: with rep1 at 9 s, rep2 (6 s) beats fresh (6 + 1.024 s).
	policytest.SetReport(rep1, policytest.Report{WaitingTokens: 9000, Throughput: 1000}, t0)
	if got := pickOne(t, p, &policy.Request{}); got != rep2 {
		t.Fatalf("picked %s, want %s", got.URL, rep2.URL)
	}
}

func TestWaitingQueueCap(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	a, b := f.Workers[0], f.Workers[1]
	cfg := DefaultConfig()
	cfg.MaxWaitingRequests = 4
	p := newPicker(t, f, cfg, 1)
	policytest.SetReport(a, policytest.Report{Waiting: 3, WaitingTokens: 0}, t0)
	policytest.SetReport(b, policytest.Report{Waiting: 0, WaitingTokens: 90000}, t0)
	if got := pickOne(t, p, &policy.Request{}); got != a {
		t.Fatalf("picked %s, want %s (under the cap)", got.URL, a.URL)
	}
	workertest.NoteDispatch(a, -1) // 3 waiting + 1 since the report reaches the cap
	if got := pickOne(t, p, &policy.Request{}); got != b {
		t.Fatalf("picked %s, want %s (a is at the cap)", got.URL, b.URL)
	}
	policytest.SetReport(b, policytest.Report{Waiting: 9, WaitingTokens: 0}, t0)
	if _, err := p.Pick(&policy.Request{}); !errors.Is(err, policy.ErrNoAvailableWorkers) {
		t.Fatalf("every worker at the cap: err = %v, want ErrNoAvailableWorkers", err)
	}
	b.SetLoad(nil) // a worker without a report stays eligible
	if got := pickOne(t, p, &policy.Request{}); got != b {
		t.Fatalf("picked %s, want the unreported %s", got.URL, b.URL)
	}
}

func TestAvailabilityAndExclusion(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	p := newPicker(t, f, DefaultConfig(), 1)
	f.Workers[1].InFlight.Add(1)
	f.Workers[2].InFlight.Add(2)
	f.SetStatus(f.Workers[0], worker.StatusNotReady)
	if got := pickOne(t, p, &policy.Request{}); got != f.Workers[1] {
		t.Fatalf("picked %s, want %s (the idle worker is not ready)", got.URL, f.Workers[1].URL)
	}
	req := &policy.Request{Exclude: []*worker.Worker{f.Workers[1]}}
	if got := pickOne(t, p, req); got != f.Workers[2] {
		t.Fatalf("picked %s, want %s (retry excluded the other)", got.URL, f.Workers[2].URL)
	}
	req.Exclude = append(req.Exclude, f.Workers[2])
	if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
		t.Fatalf("err = %v, want ErrNoAvailableWorkers", err)
	}
}

func TestTiesSplitEvenly(t *testing.T) {
	const n, picks = 4, 100_000
	f := policytest.NewFleet(t, n, "m")
	for _, w := range f.Workers {
		policytest.SetReport(w, policytest.Report{WaitingTokens: 100, Throughput: 1000}, t0)
	}
	p := newPicker(t, f, DefaultConfig(), 42)
	counts := policytest.Counts(t, p, &policy.Request{}, picks)
	for _, w := range f.Workers {
		// Binomial(100000, 1/4): sd ≈ 137; 5 sd.
		if c := counts[w]; math.Abs(float64(c)-picks/n) > 700 {
			t.Fatalf("%s got %d of %d picks, want %d ± 700", w.URL, c, picks, picks/n)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.KVPressureWeight = -1 },
		func(c *Config) { c.KVPressureWeight = math.NaN() },
		func(c *Config) { c.DefaultThroughput = 0 },
		func(c *Config) { c.MeanPrefillTokens = 0 },
		func(c *Config) { c.MaxWaitingRequests = -1 },
	}
	for i, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: Validate accepted %+v", i, c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
