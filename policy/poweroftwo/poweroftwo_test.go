package poweroftwo

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

func build(t testing.TB, f *policytest.Fleet, metric string, seed uint64) policy.Picker {
	t.Helper()
	cfg := Config{LoadMetric: metric}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return New(cfg, testutil.NewRand(seed)).Build(f.Group("m"))
}

func TestUniformOverIdleFleet(t *testing.T) {
	const n, picks = 5, 100_000
	for _, metric := range Metrics {
		t.Run(metric, func(t *testing.T) {
			f := policytest.NewFleet(t, n, "m")
			counts := policytest.Counts(t, build(t, f, metric, 11), &policy.Request{}, picks)
			for _, w := range f.Workers {
				// Binomial(100000, 1/5): sd ≈ 126; 5 sd.
				if c := counts[w]; math.Abs(float64(c)-picks/n) > 650 {
					t.Fatalf("%s: %d picks, want %d ± 650", w.URL, c, picks/n)
				}
			}
		})
	}
}

func TestBusiestWorkerNeverWinsAPair(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	slow := f.Workers[2]
	for _, w := range f.Workers {
		policytest.SetReport(w, policytest.Report{WaitingTokens: 1000, Throughput: 2000}, time.Time{})
	}
	policytest.SetReport(slow, policytest.Report{WaitingTokens: 50000, Throughput: 2000}, time.Time{})
	counts := policytest.Counts(t, build(t, f, MetricExpectedWait, 3), &policy.Request{}, 10_000)
	if counts[slow] != 0 {
		t.Fatalf("the slow worker won %d of 10000 picks; it loses every pair it is in", counts[slow])
	}
	// Each of the other three wins every pair against the slow one and half of the rest:
	// 1/3 of picks each, in expectation.
	for _, w := range f.Workers {
		if w != slow && math.Abs(float64(counts[w])-10000.0/3) > 300 {
			t.Fatalf("%s: %d picks, want about 3333", w.URL, counts[w])
		}
	}
}

func TestNoReportsComparesInFlight(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	f.Workers[0].InFlight.Add(3)
	p := build(t, f, MetricExpectedWait, 1)
	for range 50 {
		res, err := p.Pick(&policy.Request{})
		if err != nil || res.Worker != f.Workers[1] {
			t.Fatalf("pick = %v, %v; want the worker with fewer in flight", res.Worker, err)
		}
	}
}

func TestRequestsMetricPrefersFewerInFlight(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	a, b := f.Workers[0], f.Workers[1]
	// a has more in flight but the better expected wait: requests compares in-flight first.
	policytest.SetReport(a, policytest.Report{WaitingTokens: 0, Throughput: 2000}, time.Time{})
	policytest.SetReport(b, policytest.Report{WaitingTokens: 90000, Throughput: 2000}, time.Time{})
	a.InFlight.Add(2)
	b.InFlight.Add(1)
	if got := pickOne(t, build(t, f, MetricRequests, 1)); got != b {
		t.Fatalf("requests metric picked %s, want the worker with fewer in flight", got.URL)
	}
	if got := pickOne(t, build(t, f, MetricExpectedWait, 1)); got != a {
		t.Fatalf("expected_wait picked %s, want the lower expected wait", got.URL)
	}
	b.InFlight.Add(1) // tie on in-flight: the expected wait decides
	if got := pickOne(t, build(t, f, MetricRequests, 1)); got != a {
		t.Fatalf("requests tie picked %s, want the lower expected wait", got.URL)
	}
}

func TestLeastRequestsScansTheFleet(t *testing.T) {
	f := policytest.NewFleet(t, 6, "m")
	for i, w := range f.Workers {
		w.InFlight.Add(int64(5 + i))
		policytest.SetReport(w, policytest.Report{WaitingTokens: 0, Throughput: 2000}, time.Time{})
	}
	low1, low2 := f.Workers[4], f.Workers[5]
	low1.InFlight.Store(1)
	low2.InFlight.Store(1)
	policytest.SetReport(low2, policytest.Report{WaitingTokens: 4000, Throughput: 2000}, time.Time{})
	p := build(t, f, MetricLeastRequests, 1)
	for range 20 {
		if got := pickOne(t, p); got != low1 {
			t.Fatalf("least_requests picked %s, want %s (fewest in flight, lower wait)", got.URL, low1.URL)
		}
	}
}

func TestAvailability(t *testing.T) {
	for _, metric := range Metrics {
		t.Run(metric, func(t *testing.T) {
			f := policytest.NewFleet(t, 4, "m")
			p := build(t, f, metric, 5)
			f.SetStatus(f.Workers[0], worker.StatusNotReady)
			f.SetStatus(f.Workers[1], worker.StatusNotReady)
			req := &policy.Request{Exclude: []*worker.Worker{f.Workers[2]}}
			// Only one worker is left: it is selected directly, every time.
			counts := policytest.Counts(t, p, req, 200)
			if counts[f.Workers[3]] != 200 {
				t.Fatalf("counts %v: want all 200 on the only usable worker", counts)
			}
			req.Exclude = append(req.Exclude, f.Workers[3])
			if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
				t.Fatalf("err = %v, want ErrNoAvailableWorkers", err)
			}
		})
	}
}

func TestSampleTwoIsUniformOverUsablePairs(t *testing.T) {
	f := policytest.NewFleet(t, 6, "m")
	f.SetStatus(f.Workers[1], worker.StatusNotReady)
	f.SetStatus(f.Workers[4], worker.StatusNotReady)
	rnd := testutil.NewRand(9)
	pairs := map[[2]*worker.Worker]int{}
	const draws = 60_000
	for range draws {
		var pair [2]*worker.Worker
		if n := sampleTwo(&policy.Request{}, f.Workers, rnd, &pair); n != 2 {
			t.Fatalf("sampled %d", n)
		}
		if pair[0] == pair[1] || !pair[0].Routable() || !pair[1].Routable() {
			t.Fatalf("bad pair %s %s", pair[0].URL, pair[1].URL)
		}
		if pair[0].Index > pair[1].Index {
			pair[0], pair[1] = pair[1], pair[0]
		}
		pairs[pair]++
	}
	// 4 usable workers: 6 unordered pairs, each 1/6. sd ≈ 91; 5 sd.
	if len(pairs) != 6 {
		t.Fatalf("%d distinct pairs, want 6", len(pairs))
	}
	for pair, c := range pairs {
		if math.Abs(float64(c)-draws/6) > 460 {
			t.Fatalf("pair %s/%s drawn %d times, want %d ± 460", pair[0].URL, pair[1].URL, c, draws/6)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{LoadMetric: "fastest"}).Validate(); err == nil {
		t.Fatal("Validate accepted an unknown metric")
	}
	for _, m := range Metrics {
		if err := (Config{LoadMetric: m}).Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func pickOne(t *testing.T, p policy.Picker) *worker.Worker {
	t.Helper()
	res, err := p.Pick(&policy.Request{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Worker
}

// TestBusyPairTakesTheOlderPrefill: when both candidates are computing a prefill and their
// awaiting work differs by less than half a request like the new one, the first (picked less
// recently, so its prefill started first) wins, where the fewer awaiting tokens won before
// (score.Scorer.LowestInTurn: least_load's tail on the real multi-turn fleet); past half a
// request, or against a candidate with nothing awaiting, the fewer tokens win.
func TestBusyPairTakesTheOlderPrefill(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	a, b := f.Workers[0], f.Workers[1]
	for _, w := range f.Workers {
		policytest.SetReport(w, policytest.Report{Throughput: 2000}, time.Time{})
	}
	p := build(t, f, MetricExpectedWait, 1).(*picker)
	req := &policy.Request{Text: make([]byte, 1400*policy.BytesPerToken)} // a band of 700 tokens
	workertest.NoteAwaiting(a, 1400)
	workertest.NoteAwaiting(b, 1380)
	if w, _ := p.better(req, &[2]*worker.Worker{a, b}); w != a {
		t.Fatalf("picked %s, want the first candidate %s", w.URL, a.URL)
	}
	workertest.NoteAwaiting(a, 800) // 2,200 against 1,380: past the band
	if w, busy := p.better(req, &[2]*worker.Worker{a, b}); w != b || !busy {
		t.Fatalf("picked %s (busy winner %v), want %s, a busy winner", w.URL, busy, b.URL)
	}
	workertest.NoteFirstToken(a, 800)
	workertest.NoteFirstToken(a, 1400) // a has nothing awaiting: it wins as the second candidate too
	if w, _ := p.better(req, &[2]*worker.Worker{b, a}); w != a {
		t.Fatalf("picked %s, want the idle candidate %s", w.URL, a.URL)
	}
}
