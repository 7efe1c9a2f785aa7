package poweroftwo

import (
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/roundrobin"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

// TestIdleReportDoesNotWinEveryPair is §3's second herding trace (docs/benchmarks.md) for
// power_of_two's expected wait: the engine reporting 0 running and 0 tokens/s was credited at
// --least-load-default-throughput, cheaper per request than every real report, so it won
// every pair it was drawn in between two reports (21 of 96 picks here, 1.75 times its share).
// At one fleet rate it wins a pair only while it has had no more requests than its partner.
func TestIdleReportDoesNotWinEveryPair(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	idle := f.Workers[0]
	policytest.SetReport(idle, policytest.Report{}, time.Time{})
	for i, tp := range []float64{300, 450, 600, 750, 900, 500, 650} {
		policytest.SetReport(f.Workers[i+1], policytest.Report{Running: 5 + i, Throughput: tp}, time.Time{})
	}
	p := build(t, f, MetricExpectedWait, 3)
	got := 0
	for range 96 {
		res, err := p.Pick(&policy.Request{})
		if err != nil {
			t.Fatal(err)
		}
		workertest.NoteDispatch(res.Worker, -1)
		if res.Worker == idle {
			got++
		}
	}
	if got > 16 { // fair share 12
		t.Fatalf("the idle worker took %d of 96 picks between two reports: want at most 16", got)
	}
}

// TestNoHerdingOnSimulatedFleet runs each --power-of-two-load-metric and round robin on the
// same synthetic traces (8 engines, shared-prefix, 40 requests/s of model time, about 70% of
// round robin's capacity, a report every 4 s; see leastload's test of the same name). Before
// the fleet rate, expected_wait gave a worker 2.3-2.5 times its share of a window's picks and
// built backlogs of 22-30 requests (TTFT p99 1.8-2.4 s, 5-6 times round robin's). requests
// and least_requests compare live in-flight counts and did not herd before either; the test
// holds all three.
//
// Not herding is not matching round robin: two random candidates compared by a noisy signal
// put consecutive requests on one worker more often than strict rotation does (TTFT p99 on
// these traces 1.5-2.1 times round robin's for every metric with independent pairs); the
// queue's rotation and the tail tests (TestUniformTailOnSimulatedFleet) hold that now; this
// test holds least_requests too, which scans the fleet.
func TestNoHerdingOnSimulatedFleet(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	for i := range engines {
		engines[i].CacheGroups = 24
	}
	for seed := uint64(1); seed <= 3; seed++ {
		trace := policytest.PoissonTrace(seed, 40, 100*time.Second, policytest.SharedPrefix(64, 16, 2590, 161, 32))
		rr := policytest.Simulate(roundrobin.New().Build(f.Group("m")), f.Workers, trace, policytest.DefaultSimConfig(engines))
		for _, metric := range Metrics {
			r := policytest.Simulate(build(t, f, metric, seed), f.Workers, trace, policytest.DefaultSimConfig(engines))
			t.Logf("seed %d %s: TTFT p99 %v (round robin %v); busiest window share %.2f; backlog %d (round robin %d)",
				seed, metric, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99), r.MaxWindowShare, r.MaxBacklog, rr.MaxBacklog)
			if r.MaxWindowShare > 1.5 {
				t.Errorf("seed %d %s: a worker took %.2f times its fair share of the picks between two reports: herding", seed, metric, r.MaxWindowShare)
			}
			if r.MaxBacklog > 2*rr.MaxBacklog+2 {
				t.Errorf("seed %d %s: a backlog of %d requests, round robin's peak is %d", seed, metric, r.MaxBacklog, rr.MaxBacklog)
			}
			if p99, limit := r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99)*5/2; p99 > limit {
				t.Errorf("seed %d %s: TTFT p99 %v, above 2.5 x round robin's (%v)", seed, metric, p99, limit)
			}
		}
	}
}

// TestMixedSizesOnSimulatedFleet: one prompt in ten ten times longer, 20 requests/s of model
// time (about 70% of round robin's capacity on this mix; see leastload's test of the same
// name). The expected wait credits each request at its size (policy.DispatchTokens), so of two
// candidates the one that just took a long prompt loses. (The in-flight metrics count requests
// whatever their size and are not held here: 0.46-0.74 x round robin's p99 on these traces
// with random pairs; on the suite's mix the queue made requests worse, docs/differences.md.)
func TestMixedSizesOnSimulatedFleet(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	for i := range engines {
		engines[i].CacheGroups = 24
	}
	gen := policytest.MixedSizes(policytest.SharedPrefix(64, 16, 2590, 161, 32), 0.1, 10)
	for seed := uint64(1); seed <= 3; seed++ {
		trace := policytest.PoissonTrace(seed, 20, 100*time.Second, gen)
		rr := policytest.Simulate(roundrobin.New().Build(f.Group("m")), f.Workers, trace, policytest.DefaultSimConfig(engines))
		r := policytest.Simulate(build(t, f, MetricExpectedWait, seed), f.Workers, trace, policytest.DefaultSimConfig(engines))
		t.Logf("seed %d: TTFT p99 %v, round robin %v", seed, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99))
		if r.TTFTQuantile(0.99) > rr.TTFTQuantile(0.99)*7/10 {
			t.Errorf("seed %d: TTFT p99 %v, above 0.7 x round robin's %v", seed, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99))
		}
	}
}

// TestEqualWorkersArePickedInTurn: with every worker equally loaded (the same report, each
// pick credited as the gateway does), the queue deals a strict rotation: every n consecutive
// picks hold every worker once, as round robin's do. Pairs drawn at random, or dealt from a
// shuffled deck, repeated the previous pick's worker in 11.6% and 3.3% of picks here and
// left some worker out of most windows of n picks: the pattern that put TTFT p99 above round
// robin's on uniform prompts (TestUniformTailOnSimulatedFleet).
func TestEqualWorkersArePickedInTurn(t *testing.T) {
	for _, metric := range []string{MetricExpectedWait, MetricRequests} {
		f := policytest.NewFleet(t, 8, "m")
		for _, w := range f.Workers {
			policytest.SetReport(w, policytest.Report{Running: 4, Throughput: 400, TokenUsage: 0.1}, time.Time{})
		}
		p := build(t, f, metric, 5)
		const picks = 8000
		window := map[*worker.Worker]int{}
		for i := range picks {
			res, err := p.Pick(&policy.Request{})
			if err != nil {
				t.Fatal(err)
			}
			workertest.NoteDispatch(res.Worker, -1)
			window[res.Worker]++
			if (i+1)%len(f.Workers) == 0 {
				if len(window) != len(f.Workers) {
					t.Fatalf("%s: picks %d-%d went to %d distinct workers, want all %d in turn", metric, i+2-len(f.Workers), i+1, len(window), len(f.Workers))
				}
				clear(window)
			}
		}
	}
}

// TestUniformTailOnSimulatedFleet: the traces of TestNoHerdingOnSimulatedFleet (shared
// prefixes, 40 requests/s of model time, about 70% of round robin's capacity). Pairs drawn
// independently gave expected_wait a TTFT p99 of 1.63-1.94 times round robin's; dealt from a
// shuffled deck, 1.25-1.51; the candidate with less work awaiting its first token winning
// (score.Scorer.AwaitingWork), 0.89-1.07; dealt from the least recently picked (queue), with
// the expected wait deciding only past a request's worth of difference, 0.78-0.93. The
// requests metric: 1.37-1.53 before the queue, 0.88-1.11 with it.
func TestUniformTailOnSimulatedFleet(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	for i := range engines {
		engines[i].CacheGroups = 24
	}
	for seed := uint64(1); seed <= 3; seed++ {
		trace := policytest.PoissonTrace(seed, 40, 100*time.Second, policytest.SharedPrefix(64, 16, 2590, 161, 32))
		rr := policytest.Simulate(roundrobin.New().Build(f.Group("m")), f.Workers, trace, policytest.DefaultSimConfig(engines))
		for _, c := range []struct {
			metric   string
			maxRatio float64
		}{{MetricExpectedWait, 1.0}, {MetricRequests, 1.15}} {
			r := policytest.Simulate(build(t, f, c.metric, seed), f.Workers, trace, policytest.DefaultSimConfig(engines))
			ratio := float64(r.TTFTQuantile(0.99)) / float64(rr.TTFTQuantile(0.99))
			t.Logf("seed %d %s: TTFT p99 %v, round robin %v (%.2f x)", seed, c.metric, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99), ratio)
			if ratio > c.maxRatio {
				t.Errorf("seed %d %s: TTFT p99 %.2f x round robin's, want at most %.2f x", seed, c.metric, ratio, c.maxRatio)
			}
		}
	}
}

// TestMultiTurnTailOnSimulatedFleet: the suite's multi-turn case as loadgen runs it (512
// conversations of 6 rounds, a 645-token system prompt, 161-token turns, 32-token answers,
// each turn resending the conversation and ready only once its previous answer is complete:
// policytest.Conversations), engines caching 65,536 prompt tokens, a closed-loop warm-up,
// then 30 s at 52.6 requests/s of model time, where round robin's TTFT p99 is about twice its
// p50 as on the real fleet at 70% (run QT: 239-266 vs 119 ms). Dealt from a shuffled deck,
// expected_wait's p99 was 1.42-1.58 times round robin's on these traces (run QT on the mocks:
// 1.27-1.32); from the queue, 1.00-1.02.
func TestMultiTurnTailOnSimulatedFleet(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	for seed := uint64(1); seed <= 3; seed++ {
		rr := policytest.SimulateMultiTurn(roundrobin.New().Build(f.Group("m")), f.Workers, seed, 52.6)
		r := policytest.SimulateMultiTurn(build(t, f, MetricExpectedWait, seed), f.Workers, seed, 52.6)
		ratio := float64(r.TTFTQuantile(0.99)) / float64(rr.TTFTQuantile(0.99))
		t.Logf("seed %d: TTFT p99 %v, round robin %v (%.2f x); p50 %v, %v", seed, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99), ratio, r.TTFTQuantile(0.5), rr.TTFTQuantile(0.5))
		if ratio > 1.1 {
			t.Errorf("seed %d: TTFT p99 %.2f x round robin's, want at most 1.1 x", seed, ratio)
		}
	}
}

// TestHeterogeneousFleetOnSimulatedFleet: leastload's test of the same name (two of eight
// engines decode twice as slowly, 370 requests/s of model time). With the KV usage read from
// the report alone, expected_wait herded on one seed (a worker took 1.92 times its share of
// a window's picks; TTFT p99 0.68 times round robin's, 0.29-0.32 on the others); with
// LoadReport.KVOccupancyAt, 0.28-0.29 and at most 1.09; the candidate with less work awaiting
// its first token winning, 0.21-0.22. The in-flight metrics: 0.22-0.25 before, 0.23-0.24 with
// the awaiting work breaking their ties (checked on the first trace).
func TestHeterogeneousFleetOnSimulatedFleet(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	engines[6].DecodeFactor, engines[7].DecodeFactor = 2, 2
	for seed := uint64(1); seed <= 3; seed++ {
		trace := policytest.PoissonTrace(seed, 370, 60*time.Second, policytest.Distinct(176, 64))
		rr := policytest.Simulate(roundrobin.New().Build(f.Group("m")), f.Workers, trace, policytest.DefaultSimConfig(engines))
		for _, metric := range Metrics {
			if seed > 1 && metric != MetricExpectedWait {
				continue // the in-flight metrics are not what changed: one trace keeps them honest (-race cost)
			}
			r := policytest.Simulate(build(t, f, metric, seed), f.Workers, trace, policytest.DefaultSimConfig(engines))
			t.Logf("seed %d %s: TTFT p99 %v, round robin %v; busiest window share %.2f; picks %v", seed, metric, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99), r.MaxWindowShare, r.Picks)
			if r.MaxWindowShare > 1.5 {
				t.Errorf("seed %d %s: a worker took %.2f times its fair share of the picks between two reports: herding", seed, metric, r.MaxWindowShare)
			}
			if p99, limit := r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99)/4; p99 > limit {
				t.Errorf("seed %d %s: TTFT p99 %v, above 0.25 x round robin's (%v)", seed, metric, p99, limit)
			}
		}
	}
}

// TestHeterogeneousRowSendsTheSlowEnginesNothing: leastload's TestHeterogeneousRowAfterItsWarmupBurst
// for power_of_two (the suite's heterogeneous load row as it reaches the gateway: a 2.5 s
// warm-up burst of 1,619 requests, 6 s of nothing, 10 s at 101 requests/s of 176-token
// prompts and 64-token answers; two of eight engines decode twice as slowly) and the same at
// 101/s throughout. With the speed flags the slow engines are passed over while two others
// are usable and take a request only when the pair's winner has more than the penalty's work
// awaiting (queue.pick): they take nothing of the measured part and the TTFT p99 is 0.60 ×
// round robin's. Without them (speeds nil) 0.96-1.01 ×, as on the real fleet (run QLD1:
// 0.99/0.99/1.01).
func TestHeterogeneousRowSendsTheSlowEnginesNothing(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	engines := policytest.DefaultEngines(8)
	engines[6].DecodeFactor, engines[7].DecodeFactor = 2, 2
	const measuredFrom = 8500 * time.Millisecond
	for seed := uint64(1); seed <= 3; seed++ {
		burst := policytest.PoissonTrace(seed, 650, 2500*time.Millisecond, policytest.Distinct(176, 64))
		for _, r := range policytest.PoissonTrace(seed+100, 101, 10*time.Second, policytest.Distinct(176, 64)) {
			r.At += measuredFrom
			burst = append(burst, r)
		}
		for _, c := range []struct {
			name  string
			trace []policytest.SimRequest
			from  time.Duration
		}{
			{"after the burst", burst, measuredFrom},
			{"101/s throughout", policytest.PoissonTrace(seed, 101, 30*time.Second, policytest.Distinct(176, 64)), 4 * time.Second},
		} {
			cfg := policytest.DefaultSimConfig(engines)
			cfg.Warmup = c.from
			rr := policytest.Simulate(roundrobin.New().Build(f.Group("m")), f.Workers, c.trace, cfg)
			for _, speeds := range []bool{true, false} {
				p := build(t, f, MetricExpectedWait, seed)
				if !speeds {
					p.(*picker).speeds = nil
				}
				r := policytest.Simulate(p, f.Workers, c.trace, cfg)
				ratio := float64(r.TTFTQuantile(0.99)) / float64(rr.TTFTQuantile(0.99))
				slow := r.Picks[6] + r.Picks[7]
				t.Logf("%s seed %d speeds %v: TTFT p99 %v, round robin %v (%.2f x); measured picks %v", c.name, seed, speeds, r.TTFTQuantile(0.99), rr.TTFTQuantile(0.99), ratio, r.Picks)
				switch {
				case !speeds && ratio < 0.85:
					t.Errorf("%s seed %d: without the speeds TTFT p99 %.2f x round robin's: the case no longer tells them apart", c.name, seed, ratio)
				case speeds && ratio > 0.7:
					t.Errorf("%s seed %d: TTFT p99 %.2f x round robin's, want at most 0.7 x", c.name, seed, ratio)
				case speeds && float64(slow) > 0.01*float64(len(r.TTFT)):
					t.Errorf("%s seed %d: the slow engines took %d of the %d measured requests, want under 1%%", c.name, seed, slow, len(r.TTFT))
				}
			}
		}
	}
}
