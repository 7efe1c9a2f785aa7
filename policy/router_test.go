package policy_test

import (
	"context"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/worker"
)

func newRouter(t *testing.T, reg *worker.Registry, def string) *policy.Router {
	t.Helper()
	r, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: def, NewBuilder: all.NewBuilderFunc(all.Config{Logger: quiet}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	reg.Subscribe(r.Update)
	_, _ = reg.Remove(context.Background(), "barrier") // returns after the subscription's publication
	return r
}

func TestRouterLookup(t *testing.T) {
	reg, ws := fleet(t, 2)
	r := newRouter(t, reg, "round_robin")
	tab := r.Current()
	rt, ok := tab.Lookup([]byte("m"))
	if !ok || rt.Policy != "round_robin" || len(rt.Candidates) != 2 {
		t.Fatalf("route m: %+v %v", rt, ok)
	}
	if _, ok := tab.Lookup([]byte("other")); ok {
		t.Fatal("a model nobody serves has a route")
	}
	if rt, ok := tab.Lookup(nil); !ok || len(rt.Candidates) != 2 {
		t.Fatal("requests without a model must reach every worker")
	}
	// A worker that is not ready is not a candidate.
	_ = reg.SetStatus(ws[0].ID, worker.StatusNotReady)
	_, _ = reg.Remove(context.Background(), "barrier")
	rt, _ = r.Current().Lookup([]byte("m"))
	if len(rt.Candidates) != 1 || rt.Candidates[0] != ws[1] {
		t.Fatalf("candidates after not_ready: %v", rt.Candidates)
	}
}

func TestFirstWorkerLabelDecidesModelPolicy(t *testing.T) {
	reg, _ := fleet(t, 2, map[string]string{"policy": "random"}, map[string]string{"policy": "passthrough"})
	r := newRouter(t, reg, "round_robin")
	rt, _ := r.Current().Lookup([]byte("m"))
	if rt.Policy != "random" {
		t.Fatalf("model policy %q, want the first worker's label (random)", rt.Policy)
	}
	if rt, _ := r.Current().Lookup(nil); rt.Policy != "round_robin" {
		t.Fatalf("model-less route policy %q", rt.Policy)
	}
}

func TestUnknownPolicyLabelFallsBackToDefault(t *testing.T) {
	reg, _ := fleet(t, 1, map[string]string{"policy": "nonsense"})
	r := newRouter(t, reg, "round_robin")
	if rt, _ := r.Current().Lookup([]byte("m")); rt.Policy != "round_robin" {
		t.Fatalf("policy %q", rt.Policy)
	}
}
