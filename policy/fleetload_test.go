package policy_test

import (
	"math"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

func TestFleetMeanRefreshesAndSkipsUnavailable(t *testing.T) {
	f := policytest.NewFleet(t, 32, "m")
	for i, w := range f.Workers {
		w.InFlight.Store(int64(i % 4)) // mean 1.5
	}
	m := policy.NewFleetMean(f.Workers)
	if got := m.Mean(); got != 1.5 {
		t.Fatalf("mean = %v, want 1.5", got)
	}
	for _, w := range f.Workers {
		w.InFlight.Add(2)
	}
	f.SetStatus(f.Workers[3], worker.StatusNotReady) // one of the 5s leaves: mean of the rest
	want := (3.5*32 - 5) / 31
	// Within len/RefreshDivisor = 2 reads the new value shows.
	got := m.Mean()
	if got != want {
		got = m.Mean()
	}
	if math.Abs(got-want) > 1e-12 {
		t.Fatalf("mean = %v, want %v", got, want)
	}
}

func TestLeastInFlight(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	for i, w := range f.Workers {
		w.InFlight.Store([]int64{3, 1, 1, 2}[i])
	}
	counts := map[*worker.Worker]int{}
	rnd := testutil.NewRand(5)
	for range 10_000 {
		counts[policy.LeastInFlight(&policy.Request{}, f.Workers, rnd, policy.NoHotLimit)]++
	}
	if counts[f.Workers[0]]+counts[f.Workers[3]] != 0 || math.Abs(float64(counts[f.Workers[1]])-5000) > 300 {
		t.Fatalf("counts %v: want the two 1s to split evenly", counts)
	}
	if w := policy.LeastInFlight(&policy.Request{}, f.Workers, rnd, 0.5); w != nil {
		t.Fatalf("everyone above the limit: got %s", w.URL)
	}
	if w := policy.LeastInFlight(&policy.Request{Exclude: f.Workers[1:3]}, f.Workers, rnd, policy.NoHotLimit); w != f.Workers[3] {
		t.Fatalf("with the 1s excluded got %v, want the 2", w)
	}
}

func TestFleetRate(t *testing.T) {
	f := policytest.NewFleet(t, 6, "m")
	r := policy.NewFleetRate(f.Workers, 2000)
	if got := r.TokensPerSecond(); got != 2000 {
		t.Fatalf("no reports: rate = %v, want the fallback 2000", got)
	}
	// Only positive, finite throughputs of available workers count: an idle engine's 0 (and
	// a nonsense report) says nothing about the fleet's rate.
	for i, tp := range []float64{300, 900, 0, math.Inf(1), math.NaN(), 600} {
		policytest.SetReport(f.Workers[i], policytest.Report{Throughput: tp}, time.Time{})
	}
	f.SetStatus(f.Workers[5], worker.StatusNotReady)
	want := 600.0 // (300 + 900) / 2
	got := r.TokensPerSecond()
	for range policy.RateRefreshFactor * 6 { // refreshed within that many reads
		if got == want {
			break
		}
		got = r.TokensPerSecond()
	}
	if got != want {
		t.Fatalf("rate = %v, want %v", got, want)
	}
}

func TestFleetStepSeconds(t *testing.T) {
	f := policytest.NewFleet(t, 5, "m")
	r := policy.NewFleetRate(f.Workers, 2000)
	if got := r.StepSeconds(); got != 0 {
		t.Fatalf("no reports: step = %v, want 0", got)
	}
	// Steps of 10 and 30 ms; an engine that has never run anything shows none, and an
	// unavailable worker does not count.
	for i, rep := range []policytest.Report{{Running: 10, Throughput: 1000}, {Running: 3, Throughput: 100}, {}, {Running: 1, Throughput: 1}, {Running: 4, Throughput: 400}} {
		policytest.SetReport(f.Workers[i], rep, time.Time{})
	}
	f.SetStatus(f.Workers[3], worker.StatusNotReady)
	want := (0.01 + 0.03 + 0.01) / 3
	got := r.StepSeconds()
	for range policy.RateRefreshFactor * 5 {
		if math.Abs(got-want) < 1e-12 {
			break
		}
		got = r.StepSeconds()
	}
	if math.Abs(got-want) > 1e-12 {
		t.Fatalf("step = %v, want %v", got, want)
	}
}
