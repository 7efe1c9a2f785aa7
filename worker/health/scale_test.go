package health

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

// fleetChecker is a Checker on a fake clock over a real registry of n Ready gRPC workers,
// whose probe (Config.ProbeGRPC) is probe.
func fleetChecker(tb testing.TB, n int, probe func(ctx context.Context, w *worker.Worker) error) (*Checker, *clock.Fake) {
	tb.Helper()
	reg := workertest.Fleet(tb, n, "grpc")
	clk := clock.NewFake()
	cfg := DefaultConfig()
	cfg.Clock, cfg.Metrics, cfg.Logger, cfg.ProbeGRPC = clk, metrics.NewSet(), testutil.Quiet, probe
	c, err := New(cfg, reg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c, clk
}

// TestProbesOf10000WorkersSpreadOverTheInterval: 10,000 workers registered at once are probed
// at once, then each once per interval in its phase: every slice of the interval (of
// worker.PhaseSlices) probes its share of the fleet, give or take one, in one round per
// slice; at most Concurrency probes run at a time, and the goroutines stay within the round's
// pool whatever the fleet's size.
func TestProbesOf10000WorkersSpreadOverTheInterval(t *testing.T) {
	const n = 10_000
	var mu sync.Mutex
	var probedAt []time.Time
	var running, maxRunning, maxGoroutines atomic.Int64
	var clk *clock.Fake
	c, clk := fleetChecker(t, n, func(context.Context, *worker.Worker) error {
		r := running.Add(1)
		defer running.Add(-1)
		for m := maxRunning.Load(); r > m && !maxRunning.CompareAndSwap(m, r); m = maxRunning.Load() {
		}
		for g, m := int64(runtime.NumGoroutine()), maxGoroutines.Load(); g > m && !maxGoroutines.CompareAndSwap(m, g); m = maxGoroutines.Load() {
		}
		mu.Lock()
		probedAt = append(probedAt, clk.Now())
		mu.Unlock()
		return nil
	})
	baseGoroutines := int64(runtime.NumGoroutine())
	interval := c.cfg.Interval
	t0 := clk.Now()
	next := c.RunRound(context.Background())
	if len(probedAt) != n {
		t.Fatalf("%d probes at registration, want all %d", len(probedAt), n)
	}
	end := t0.Add(2 * interval)
	rounds := 0
	for next.Before(end) {
		clk.Advance(next.Sub(clk.Now()))
		next = c.RunRound(context.Background())
		if !clk.Now().Before(t0.Add(interval)) {
			rounds++
		}
	}
	// Each worker is probed once in [t0+interval, t0+2×interval): count those per slice.
	slice := interval / worker.PhaseSlices
	var perSlice [worker.PhaseSlices]int
	total := 0
	for _, at := range probedAt[n:] {
		if d := at.Sub(t0) - interval; d >= 0 && d < interval {
			perSlice[d/slice]++
			total++
		}
	}
	if total != n {
		t.Fatalf("%d probes in the second interval, want each of the %d workers once", total, n)
	}
	lo, hi := n/worker.PhaseSlices, (n+worker.PhaseSlices-1)/worker.PhaseSlices
	for i, k := range perSlice {
		if k < lo || k > hi {
			t.Errorf("slice %d of the interval probed %d workers, want %d-%d (all slices: %v)", i, k, lo, hi, perSlice)
		}
	}
	if rounds != worker.PhaseSlices {
		t.Errorf("%d rounds in the second interval, want one per slice (%d)", rounds, worker.PhaseSlices)
	}
	if m := maxRunning.Load(); m > int64(c.cfg.Concurrency) {
		t.Errorf("%d probes at once, more than Concurrency %d", m, c.cfg.Concurrency)
	}
	// The round's pool; the previous round's may not have finished exiting.
	if g := maxGoroutines.Load(); g > baseGoroutines+2*int64(c.cfg.Concurrency) {
		t.Errorf("%d goroutines during the probes, more than %d before plus two pools of Concurrency %d", g, baseGoroutines, c.cfg.Concurrency)
	}
}

// BenchmarkIntervalOf10000Workers is the checker's own CPU time per worker per interval at 10,000
// workers: the rounds of one interval (one per phase), each walking the fleet, starting its
// probes and applying their results, with a probe that does nothing (the network's cost,
// the HTTP client's and the engine's, is left out).
func BenchmarkIntervalOf10000Workers(b *testing.B) {
	const n = 10_000
	c, clk := fleetChecker(b, n, func(context.Context, *worker.Worker) error { return nil })
	next := c.RunRound(context.Background()) // the registration round
	runtime.GC()
	b.ResetTimer()
	cpu := workertest.ProcessCPU()
	for b.Loop() {
		end := clk.Now().Add(c.cfg.Interval)
		for next.Before(end) {
			clk.Advance(next.Sub(clk.Now()))
			next = c.RunRound(context.Background())
		}
	}
	b.ReportMetric(float64(workertest.ProcessCPU()-cpu)/float64(b.N)/n, "cpu-ns/worker-interval")
}
