package manual

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/sticky"
	"github.com/smg-go/smg/worker"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newBuilder(t testing.TB, mode string) (*Builder, *metrics.Set) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AssignmentMode = mode
	cfg.Metrics = metrics.NewSet()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return New(cfg, testutil.NewRand(1), t0), cfg.Metrics
}

func pick(t *testing.T, p policy.Picker, req *policy.Request) *worker.Worker {
	t.Helper()
	res, err := p.Pick(req)
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return res.Worker
}

func keyed(k string) *policy.Request { return &policy.Request{RoutingKey: []byte(k)} }

func branch(set *metrics.Set, b string) uint64 {
	return set.GetOrCreateCounter(`smg_manual_policy_branch_total{branch="` + b + `"}`).Get()
}

func TestSameKeySameWorker(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	b, set := newBuilder(t, sticky.AssignRandom)
	p := b.Build(f.Group("m"))
	first := pick(t, p, keyed("user-1"))
	for range 10 {
		if got := pick(t, p, keyed("user-1")); got != first {
			t.Fatalf("key moved from %s to %s", first.URL, got.URL)
		}
	}
	if branch(set, sticky.BranchVacant) != 1 || branch(set, sticky.BranchOccupiedHit) != 10 {
		t.Fatalf("vacant %d, occupied_hit %d; want 1, 10", branch(set, sticky.BranchVacant), branch(set, sticky.BranchOccupiedHit))
	}
	if got := set.GetOrCreateGauge(`smg_manual_policy_cache_entries`, nil).Get(); got != 1 {
		t.Fatalf("cache entries gauge = %v, want 1", got)
	}
}

func TestAddingWorkersNeverMovesAPinnedKey(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	b, _ := newBuilder(t, sticky.AssignRandom)
	p := b.Build(f.Group("m"))
	before := map[string]*worker.Worker{}
	for i := range 300 {
		k := fmt.Sprintf("k%d", i)
		before[k] = pick(t, p, keyed(k))
	}
	for range 5 {
		f.Add("m", nil)
	}
	p = b.Build(f.Group("m"))
	for k, w := range before {
		if got := pick(t, p, keyed(k)); got != w {
			t.Fatalf("key %s moved from %s to %s after workers were added", k, w.URL, got.URL)
		}
	}
}

func TestFailoverAndBack(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	b, set := newBuilder(t, sticky.AssignRandom)
	p := b.Build(f.Group("m"))
	home := pick(t, p, keyed("conv"))
	f.SetStatus(home, worker.StatusNotReady)
	away := pick(t, p, keyed("conv"))
	if away == home {
		t.Fatal("served by the unavailable worker")
	}
	if branch(set, sticky.BranchOccupiedMiss) != 1 {
		t.Fatal("failover not counted as occupied_miss")
	}
	for range 5 {
		if got := pick(t, p, keyed("conv")); got != away {
			t.Fatalf("while home is down the key moved again to %s", got.URL)
		}
	}
	f.SetStatus(home, worker.StatusReady)
	if got := pick(t, p, keyed("conv")); got != home {
		t.Fatalf("after recovery the key went to %s, want back home to %s", got.URL, home.URL)
	}
	// A retry that excludes the worker fails over the same way.
	if got := pick(t, p, &policy.Request{RoutingKey: []byte("conv"), Exclude: []*worker.Worker{home}}); got != away {
		t.Fatalf("retry went to %s, want the failover %s", got.URL, away.URL)
	}
	// Both candidates down: a third worker replaces the oldest (home), so home's recovery
	// no longer brings the key back.
	f.SetStatus(home, worker.StatusNotReady)
	f.SetStatus(away, worker.StatusNotReady)
	if third := pick(t, p, keyed("conv")); third == home || third == away {
		t.Fatalf("with both candidates down the key went to %s", third.URL)
	}
	f.SetStatus(home, worker.StatusReady)
	f.SetStatus(away, worker.StatusReady)
	if got := pick(t, p, keyed("conv")); got != away {
		t.Fatalf("with candidates [away, third] the key went to %s, want %s", got.URL, away.URL)
	}
}

func TestIdleKeysAreEvicted(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	b, set := newBuilder(t, sticky.AssignRandom)
	p := b.Build(f.Group("m"))
	pick(t, p, keyed("old"))
	b.Maintain(t0.Add(sticky.DefaultMaxIdle - time.Minute))
	pick(t, p, keyed("fresh")) // used at the advanced clock
	if b.Pins().Len() != 2 {
		t.Fatalf("%d pins, want 2", b.Pins().Len())
	}
	b.Maintain(t0.Add(sticky.DefaultMaxIdle + 2*time.Minute))
	if b.Pins().Len() != 1 {
		t.Fatalf("after max idle %d pins remain, want 1 (the fresh key)", b.Pins().Len())
	}
	vacant := branch(set, sticky.BranchVacant)
	pick(t, p, keyed("old"))
	if branch(set, sticky.BranchVacant) != vacant+1 {
		t.Fatal("an evicted key was not treated as new")
	}
}

func TestUnkeyedRequestsAreSpreadNotPinned(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	b, set := newBuilder(t, sticky.AssignRandom)
	counts := policytest.Counts(t, b.Build(f.Group("m")), &policy.Request{}, 40_000)
	for _, w := range f.Workers {
		if math.Abs(float64(counts[w])-10_000) > 450 { // sd ≈ 87
			t.Fatalf("%s: %d of 40000", w.URL, counts[w])
		}
	}
	if b.Pins().Len() != 0 || branch(set, sticky.BranchNoRoutingID) != 40_000 {
		t.Fatalf("pins %d, no_routing_id %d", b.Pins().Len(), branch(set, sticky.BranchNoRoutingID))
	}
}

func TestAssignmentModes(t *testing.T) {
	t.Run("min_load", func(t *testing.T) {
		f := policytest.NewFleet(t, 3, "m")
		f.Workers[0].InFlight.Store(3)
		f.Workers[1].InFlight.Store(0)
		f.Workers[2].InFlight.Store(5)
		for _, mode := range []string{sticky.AssignMinLoad, sticky.AssignDelegate} {
			b, _ := newBuilder(t, mode)
			if got := pick(t, b.Build(f.Group("m")), keyed("k")); got != f.Workers[1] {
				t.Fatalf("%s placed the key on %s, want the least loaded", mode, got.URL)
			}
		}
	})
	t.Run("min_group", func(t *testing.T) {
		f := policytest.NewFleet(t, 4, "m")
		b, _ := newBuilder(t, sticky.AssignMinGroup)
		p := b.Build(f.Group("m"))
		counts := map[*worker.Worker]int{}
		for i := range 400 {
			counts[pick(t, p, keyed(fmt.Sprintf("k%d", i)))]++
		}
		for _, w := range f.Workers {
			if counts[w] != 100 {
				t.Fatalf("min_group placed %d keys on %s, want exactly 100", counts[w], w.URL)
			}
		}
		// The counts follow idle eviction: with every key evicted, all counts are zero.
		b.Maintain(t0.Add(sticky.DefaultMaxIdle + 2*time.Minute))
		for _, w := range f.Workers {
			if n := b.pinner.Table().CountPins(w); n != 0 {
				t.Fatalf("%d pins left on %s", n, w.URL)
			}
		}
	})
}

func TestRidKeyWithOverride(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	cfg := DefaultConfig()
	cfg.RoutingKeyOverride = true
	p := New(cfg, testutil.NewRand(3), t0).Build(f.Group("m"))
	first := pick(t, p, &policy.Request{Rid: []byte("chat42_t1")})
	for _, rid := range []string{"chat42_t2", "chat42_t3_r1", "chat42"} {
		if got := pick(t, p, &policy.Request{Rid: []byte(rid), RoutingKey: []byte("other")}); got != first {
			t.Fatalf("rid %s went to %s, want the conversation's %s", rid, got.URL, first.URL)
		}
	}
}

func TestNoAvailableWorkers(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	b, set := newBuilder(t, sticky.AssignRandom)
	p := b.Build(f.Group("m"))
	for _, req := range []*policy.Request{{RoutingKey: []byte("k"), Exclude: f.Workers}, {Exclude: f.Workers}} {
		if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
			t.Fatalf("err = %v", err)
		}
	}
	if branch(set, sticky.BranchNoHealthyWorkers) != 2 {
		t.Fatal("no_healthy_workers not counted")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{AssignmentMode: "sticky"}, {AssignmentMode: sticky.AssignRandom, MaxIdle: -time.Second}} {
		if c.Validate() == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}
