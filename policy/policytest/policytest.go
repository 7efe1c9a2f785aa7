package policytest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Fleet is a registry with its workers, for tests.
type Fleet struct {
	Reg     *worker.Registry
	Workers []*worker.Worker
	tb      testing.TB
	added   int // workers ever added: numbers each new worker's address
}

// BenchFleetSizes are the fleet sizes every policy's Pick benchmark runs: small fleets, and
// 1,000 to 10,000 workers where an O(n) pick's cost per worker shows.
var BenchFleetSizes = []int{8, 64, 512, 1000, 4096, 10000}

// NewFleet registers n Ready workers serving model (empty: unknown model) and closes the
// registry when the test ends. The registry takes any number of workers (the policies'
// benchmarks run 10,000, past --max-workers' default) and 64 more Added later.
func NewFleet(tb testing.TB, n int, model string) *Fleet {
	tb.Helper()
	cfg := worker.DefaultConfig()
	cfg.QueueSize, cfg.MaxWorkers, cfg.Logger = 64, max(n+64, worker.DefaultMaxWorkers), slog.New(slog.DiscardHandler)
	reg, err := worker.NewRegistry(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(reg.Close)
	f := &Fleet{Reg: reg, tb: tb}
	for range n {
		f.Add(model, nil)
	}
	return f
}

// Add registers one more Ready worker with the given model and labels and returns it.
func (f *Fleet) Add(model string, labels map[string]string) *worker.Worker {
	f.tb.Helper()
	i := f.added
	f.added++
	// Distinct loopback addresses and ports; nothing listens there and nothing dials them.
	spec := worker.Spec{
		URL:     fmt.Sprintf("http://127.0.%d.%d:%d", 1+i/250/250%250, 1+i/250%250, 10000+i%250),
		ModelID: model,
		Labels:  labels,
	}
	if err := spec.Normalize(); err != nil {
		f.tb.Fatal(err)
	}
	w, err := f.Reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		f.tb.Fatal(err)
	}
	f.Workers = append(f.Workers, w)
	return w
}

// Remove unregisters w (its status becomes Draining) and drops it from f.Workers.
func (f *Fleet) Remove(w *worker.Worker) {
	f.tb.Helper()
	if _, err := f.Reg.Remove(context.Background(), w.ID); err != nil {
		f.tb.Fatal(err)
	}
	for i, x := range f.Workers {
		if x == w {
			f.Workers = append(f.Workers[:i:i], f.Workers[i+1:]...)
			break
		}
	}
}

// SetStatus changes w's status and returns once the registry has applied it.
func (f *Fleet) SetStatus(w *worker.Worker, s worker.Status) {
	f.tb.Helper()
	if err := f.Reg.SetStatus(w.ID, s); err != nil {
		f.tb.Fatal(err)
	}
	// The registry applies events in order: a blocking call queued after SetStatus returns
	// only once the status change is applied.
	_, _ = f.Reg.Remove(context.Background(), "policytest-sync-barrier")
	if w.Status() != s {
		f.tb.Fatalf("status of %s is %s, want %s", w.URL, w.Status(), s)
	}
}

// Group returns a policy.Group over the Ready workers of ws (default: all of f.Workers), as
// the Router builds it.
func (f *Fleet) Group(model string, ws ...*worker.Worker) policy.Group {
	if ws == nil {
		ws = f.Workers
	}
	var cands []*worker.Worker
	for _, w := range ws {
		if w.Routable() {
			cands = append(cands, w)
		}
	}
	return policy.Group{Model: model, Workers: cands, Snapshot: f.Reg.Current()}
}

// Report is a compact way to write a load report in tests.
type Report struct {
	Waiting, Running int
	WaitingTokens    int64 // -1: not reported
	TokenUsage       float64
	Throughput       float64
}

// SetReport publishes r as w's load report, received at the given time.
func SetReport(w *worker.Worker, r Report, at time.Time) {
	w.SetLoad(&worker.LoadReport{
		At:              at,
		WaitingRequests: r.Waiting,
		RunningRequests: r.Running,
		WaitingTokens:   r.WaitingTokens,
		TokenUsage:      r.TokenUsage,
		GenThroughput:   r.Throughput,
	})
}

// Counts picks n times with req and counts the chosen workers; a pick error fails the test.
func Counts(tb testing.TB, p policy.Picker, req *policy.Request, n int) map[*worker.Worker]int {
	tb.Helper()
	out := map[*worker.Worker]int{}
	for range n {
		res, err := p.Pick(req)
		if err != nil {
			tb.Fatalf("pick: %v", err)
		}
		out[res.Worker]++
	}
	return out
}
