package consistenthash

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

func pick(t *testing.T, p policy.Picker, req *policy.Request) *worker.Worker {
	t.Helper()
	res, err := p.Pick(req)
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return res.Worker
}

func TestTargetWorker(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	set := metrics.NewSet()
	p := New(Config{Metrics: set}, testutil.NewRand(1)).Build(f.Group("m"))
	if got := pick(t, p, &policy.Request{TargetWorker: []byte("1"), RoutingKey: []byte("k")}); got != f.Workers[1] {
		t.Fatalf("target 1 went to %s, want %s", got.URL, f.Workers[1].URL)
	}
	for _, v := range []string{"9", "3", "x", "-1", "1.0"} {
		if _, err := p.Pick(&policy.Request{TargetWorker: []byte(v)}); !errors.Is(err, policy.ErrInvalidTargetWorker) {
			t.Fatalf("target %q: err = %v, want ErrInvalidTargetWorker (503, no fallback)", v, err)
		}
	}
	// Indices count available workers: with worker 0 down, index 1 is the third worker.
	f.SetStatus(f.Workers[0], worker.StatusNotReady)
	if got := pick(t, p, &policy.Request{TargetWorker: []byte("1")}); got != f.Workers[2] {
		t.Fatalf("target 1 with worker 0 down went to %s, want %s", got.URL, f.Workers[2].URL)
	}
	if _, err := p.Pick(&policy.Request{TargetWorker: []byte("2")}); !errors.Is(err, policy.ErrInvalidTargetWorker) {
		t.Fatalf("target past the available workers: err = %v", err)
	}
	if got := counter(set, BranchTargetWorkerHit); got != 2 {
		t.Fatalf("target_worker_hit = %d, want 2", got)
	}
	if got := counter(set, BranchTargetWorkerMiss); got != 6 {
		t.Fatalf("target_worker_miss = %d, want 6", got)
	}
}

func TestKeyPriority(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	plain := New(Config{}, testutil.NewRand(1)).Build(f.Group("m"))
	override := New(Config{RoutingKeyOverride: true}, testutil.NewRand(1)).Build(f.Group("m"))
	// Each request below must go where its winning key alone goes.
	cases := []struct {
		name string
		p    policy.Picker
		req  policy.Request
		key  string
	}{
		{"header beats implicit keys", plain, policy.Request{RoutingKey: []byte("hdr"), Authorization: []byte("auth")}, "hdr"},
		{"rid ignored without override", plain, policy.Request{Rid: []byte("rid"), RoutingKey: []byte("hdr")}, "hdr"},
		{"rid first with override", override, policy.Request{Rid: []byte("conv_t3"), RoutingKey: []byte("hdr")}, "conv"},
		{"authorization before forwarded-for", plain, policy.Request{Authorization: []byte("a"), ForwardedFor: []byte("f"), Cookie: []byte("c")}, "a"},
		{"forwarded-for before cookie", plain, policy.Request{ForwardedFor: []byte("f"), Cookie: []byte("c")}, "f"},
		{"cookie last", plain, policy.Request{Cookie: []byte("c")}, "c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := pick(t, plain, &policy.Request{RoutingKey: []byte(c.key)})
			for range 20 {
				if got := pick(t, c.p, &c.req); got != want {
					t.Fatalf("went to %s, want %s (where key %q goes)", got.URL, want.URL, c.key)
				}
			}
		})
	}
}

func TestSameKeySameWorkerAndRandomFallback(t *testing.T) {
	const n = 8
	f := policytest.NewFleet(t, n, "m")
	set := metrics.NewSet()
	p := New(Config{Metrics: set}, testutil.NewRand(3)).Build(f.Group("m"))
	seen := map[*worker.Worker]bool{}
	for k := range 200 {
		req := &policy.Request{RoutingKey: fmt.Appendf(nil, "session-%d", k)}
		first := pick(t, p, req)
		seen[first] = true
		for range 5 {
			if got := pick(t, p, req); got != first {
				t.Fatalf("key %q moved from %s to %s", req.RoutingKey, first.URL, got.URL)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("200 keys used %d of %d workers", len(seen), n)
	}
	counts := policytest.Counts(t, p, &policy.Request{}, 80_000)
	for _, w := range f.Workers {
		if c := counts[w]; math.Abs(float64(c)-10_000) > 500 { // sd ≈ 94
			t.Fatalf("keyless requests: %s got %d, want 10000 ± 500", w.URL, c)
		}
	}
	if got := counter(set, BranchRandomFallback); got != 80_000 {
		t.Fatalf("random_fallback = %d, want 80000", got)
	}
}

// TestScaleMovesAboutOneNth checks the ring through the Builder, as the gateway rebuilds it:
// adding a ninth worker moves at most 1/8 + 2% of the keys, all to the new worker.
func TestScaleMovesAboutOneNth(t *testing.T) {
	const n, keys = 8, 100_000
	f := policytest.NewFleet(t, n, "m")
	b := New(Config{}, nil)
	before := b.Build(f.Group("m"))
	added := f.Add("m", nil)
	after := b.Build(f.Group("m"))
	moved := 0
	for k := range keys {
		req := &policy.Request{RoutingKey: fmt.Appendf(nil, "k%d", k)}
		x, y := pick(t, before, req), pick(t, after, req)
		if x != y {
			moved++
			if y != added {
				t.Fatalf("key %d moved between old workers", k)
			}
		}
	}
	if limit := keys * (1.0/n + 0.02); float64(moved) > limit || moved == 0 {
		t.Fatalf("moved %d of %d keys, want 1..%.0f", moved, keys, limit)
	}
}

func TestNoAvailableWorkers(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	p := New(Config{}, nil).Build(f.Group("m"))
	ex := &policy.Request{Exclude: f.Workers}
	for _, req := range []*policy.Request{
		{Exclude: ex.Exclude, RoutingKey: []byte("k")},
		{Exclude: ex.Exclude},
	} {
		if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
			t.Fatalf("err = %v, want ErrNoAvailableWorkers", err)
		}
	}
	if _, err := New(Config{}, nil).Build(policy.Group{}).Pick(&policy.Request{RoutingKey: []byte("k")}); !errors.Is(err, policy.ErrNoAvailableWorkers) {
		t.Fatalf("empty group: err = %v", err)
	}
}

func counter(set *metrics.Set, branch string) uint64 {
	return set.GetOrCreateCounter(`smg_consistent_hashing_policy_branch_total{branch="` + branch + `"}`).Get()
}
