package loadmon

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

// fleetMonitor is a Monitor on a fake clock over a real registry of n Ready gRPC workers,
// whose poll (Config.GRPCLoads) is poll.
func fleetMonitor(tb testing.TB, n int, poll func(ctx context.Context, w *worker.Worker) (*worker.LoadReport, error)) (*Monitor, *clock.Fake) {
	tb.Helper()
	reg := workertest.Fleet(tb, n, "grpc")
	clk := clock.NewFake()
	cfg := DefaultConfig()
	cfg.Clock, cfg.Metrics, cfg.Logger, cfg.GRPCLoads = clk, metrics.NewSet(), testutil.Quiet, poll
	m, err := New(cfg, reg.Current)
	if err != nil {
		tb.Fatal(err)
	}
	return m, clk
}

// TestPollsOf10000WorkersSpreadOverTheInterval: Run polls 10,000 workers at once, then each
// once per interval in its phase: every tick (one per slice of the interval) polls its share
// of the fleet, give or take one; at most Concurrency polls run at a time, and the goroutines
// stay within Run's and its pool whatever the fleet's size.
func TestPollsOf10000WorkersSpreadOverTheInterval(t *testing.T) {
	const n = 10_000
	var mu sync.Mutex
	var polledAt []time.Time
	var running, maxRunning, maxGoroutines atomic.Int64
	var clk *clock.Fake
	m, clk := fleetMonitor(t, n, func(context.Context, *worker.Worker) (*worker.LoadReport, error) {
		r := running.Add(1)
		defer running.Add(-1)
		for m := maxRunning.Load(); r > m && !maxRunning.CompareAndSwap(m, r); m = maxRunning.Load() {
		}
		for g, m := int64(runtime.NumGoroutine()), maxGoroutines.Load(); g > m && !maxGoroutines.CompareAndSwap(m, g); m = maxGoroutines.Load() {
		}
		mu.Lock()
		polledAt = append(polledAt, clk.Now())
		mu.Unlock()
		return &worker.LoadReport{}, nil
	})
	ticks := make(chan struct{}, 1)
	m.afterTick = func() { ticks <- struct{}{} }
	baseGoroutines := int64(runtime.NumGoroutine())
	interval := m.cfg.Interval
	t0 := clk.Now()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	testutil.Eventually(t, "the first round, at once", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(polledAt) == n && clk.Waiting() == 1
	})
	slice := interval / worker.PhaseSlices
	for range 2 * worker.PhaseSlices {
		clk.Advance(slice)
		<-ticks
	}
	cancel()
	<-done
	// Each worker is polled once in (t0, t0+interval] and once in (t0+interval, t0+2×interval]:
	// count the second per tick.
	var perTick [worker.PhaseSlices]int
	total := 0
	for _, at := range polledAt[n:] {
		if d := at.Sub(t0) - interval; d > 0 && d <= interval {
			perTick[d/slice-1]++
			total++
		}
	}
	if total != n {
		t.Fatalf("%d polls in the second interval, want each of the %d workers once", total, n)
	}
	lo, hi := n/worker.PhaseSlices, (n+worker.PhaseSlices-1)/worker.PhaseSlices
	for i, k := range perTick {
		if k < lo || k > hi {
			t.Errorf("tick %d of the interval polled %d workers, want %d-%d (all ticks: %v)", i, k, lo, hi, perTick)
		}
	}
	if r := maxRunning.Load(); r > int64(m.cfg.Concurrency) {
		t.Errorf("%d polls at once, more than Concurrency %d", r, m.cfg.Concurrency)
	}
	// Run's goroutine and its pool; the previous tick's pool may not have finished exiting.
	if g := maxGoroutines.Load(); g > baseGoroutines+1+2*int64(m.cfg.Concurrency) {
		t.Errorf("%d goroutines during the polls, more than %d before plus Run plus two pools of Concurrency %d", g, baseGoroutines, m.cfg.Concurrency)
	}
}

// BenchmarkIntervalOf10000Workers is the monitor's own CPU per worker per interval at 10,000
// workers: the ticks of one interval (one per phase), each selecting its phase's workers,
// polling them and publishing their reports, with a poll that answers a fixed report at once
// (the network's cost, the client's and the engine's, is left out).
func BenchmarkIntervalOf10000Workers(b *testing.B) {
	const n = 10_000
	m, _ := fleetMonitor(b, n, func(context.Context, *worker.Worker) (*worker.LoadReport, error) {
		return &worker.LoadReport{WaitingTokens: 100, RunningRequests: 4, GenThroughput: 1500, TokenUsage: 0.3}, nil
	})
	m.PollOnce(context.Background())
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := workertest.ProcessCPU()
	for b.Loop() {
		for phase := range worker.PhaseSlices {
			m.PollPhase(context.Background(), phase)
		}
	}
	b.ReportMetric(float64(workertest.ProcessCPU()-cpu)/float64(b.N)/n, "cpu-ns/worker-interval")
}
