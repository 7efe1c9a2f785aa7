package policy_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/worker"
)

// quietPolicies is every policy with the default settings, logging nothing (PD legs only
// when pdMode).
func quietPolicies(t *testing.T, pdMode bool) policy.NewBuilderFunc {
	t.Helper()
	pc := all.DefaultConfig()
	pc.Logger, pc.PDMode = testutil.Quiet, pdMode
	nb, err := all.NewBuilderFunc(pc)
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

func newRouter(t *testing.T, reg *worker.Registry, def string) *policy.Router {
	t.Helper()
	r, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: def, NewBuilder: quietPolicies(t, false), Logger: testutil.Quiet})
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

// A worker whose model is unknown is offered for every model (the gateway cannot tell what it
// serves), beside the workers that declare the model.
func TestUnknownModelWorkersServeEveryModel(t *testing.T) {
	reg, ws := fleet(t, 1)
	spec := worker.Spec{URL: "http://anything:8000"}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	anything, err := reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	tab := newRouter(t, reg, "round_robin").Current()
	if rt, ok := tab.Lookup([]byte("m")); !ok || !slices.Equal(rt.Candidates, []*worker.Worker{ws[0], anything}) {
		t.Fatalf("route m: %v %v", rt, ok)
	}
	if rt, ok := tab.Lookup([]byte("other")); !ok || !slices.Equal(rt.Candidates, []*worker.Worker{anything}) {
		t.Fatalf("route of an undeclared model: %v %v", rt, ok)
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

func TestPDLegsRouteByWorkerTypeWithTheirPolicies(t *testing.T) {
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	add := func(url, typ string, labels map[string]string) *worker.Worker {
		spec := worker.Spec{URL: url, ModelID: "m", WorkerType: typ, Labels: labels}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := reg.Add(context.Background(), spec, worker.StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// A policy label does not change a leg's policy in PD mode (spec: Policy Scope).
	p1 := add("http://p1:1", worker.TypePrefill, map[string]string{"policy": "random"})
	p2 := add("http://p2:1", worker.TypePrefill, nil)
	d1 := add("http://d1:1", worker.TypeDecode, nil)
	set := metrics.NewSet()
	r, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: "cache_aware", PD: &policy.PDPolicies{Prefill: "bucket", Decode: "round_robin"},
		NewBuilder: quietPolicies(t, true), Logger: testutil.Quiet, Metrics: set})
	if err != nil {
		t.Fatal(err)
	}
	reg.Subscribe(r.Update)
	_, _ = reg.Remove(context.Background(), "barrier")
	tab := r.Current()
	if !tab.PD {
		t.Fatal("table not in PD mode")
	}
	pr, ok := tab.LookupLeg(policy.LegPrefill, []byte("m"))
	if !ok || pr.Policy != "bucket" || !slices.Equal(pr.Candidates, []*worker.Worker{p1, p2}) {
		t.Fatalf("prefill route %+v", pr)
	}
	dr, ok := tab.LookupLeg(policy.LegDecode, []byte("m"))
	if !ok || dr.Policy != "round_robin" || !slices.Equal(dr.Candidates, []*worker.Worker{d1}) {
		t.Fatalf("decode route %+v", dr)
	}
	if rt, ok := tab.Lookup([]byte("m")); ok {
		t.Fatalf("no regular worker serves m, yet the regular leg has %+v", rt)
	}
	for range 3 {
		res, err := dr.Picker.Pick(&policy.Request{Text: []byte("x")})
		if err != nil || res.Worker != d1 {
			t.Fatalf("decode pick %v %v", res.Worker, err)
		}
		dr.Selections.Inc()
	}
	var sb strings.Builder
	set.WritePrometheus(&sb)
	if !strings.Contains(sb.String(), `smg_worker_selection_total{worker_type="decode",connection_mode="http",model="m",policy="round_robin"} 3`) {
		t.Fatalf("per-leg selection series missing:\n%s", sb.String())
	}
}

// panicky builds pickers with round_robin until boom is set, then panics in Build.
type panicky struct {
	policy.Builder
	boom *atomic.Bool
}

func (p panicky) Build(g policy.Group) policy.Picker {
	if p.boom.Load() {
		panic("picker build failed")
	}
	return p.Builder.Build(g)
}

// A picker build that panics on the registry's goroutine keeps the previous table, is logged
// and counted, and the next snapshot whose build succeeds is published again.
func TestPanickingPickerBuildKeepsThePreviousTable(t *testing.T) {
	reg, ws := fleet(t, 2)
	var boom atomic.Bool
	set := metrics.NewSet()
	logger, logs := testutil.Logger(slog.LevelInfo)
	rr := quietPolicies(t, false)
	r, err := policy.NewRouter(policy.RouterConfig{
		DefaultPolicy: "round_robin", Metrics: set, Logger: logger,
		NewBuilder: func(name string, fromFlags bool) (policy.Builder, error) {
			b, err := rr(name, fromFlags)
			return panicky{b, &boom}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.Subscribe(r.Update)
	_, _ = reg.Remove(context.Background(), "barrier")
	before := r.Current()
	if rt, ok := before.Lookup([]byte("m")); !ok || len(rt.Candidates) != 2 {
		t.Fatalf("route before the failure: %+v %v", rt, ok)
	}

	boom.Store(true)
	_ = reg.SetStatus(ws[0].ID, worker.StatusNotReady)
	_, _ = reg.Remove(context.Background(), "barrier") // the registry goroutine survived to answer
	if r.Current() != before {
		t.Fatal("a failed build replaced the table")
	}
	var out strings.Builder
	set.WritePrometheus(&out)
	if !strings.Contains(out.String(), `smg_router_picker_build_failures_total{policy="round_robin"} `) {
		t.Fatalf("failure not counted:\n%s", out.String())
	}
	if !strings.Contains(logs.String(), "Cannot build the route table; requests keep the previous one") || !strings.Contains(logs.String(), "picker build failed") {
		t.Fatalf("failure not logged: %s", logs.String())
	}

	boom.Store(false)
	_ = reg.SetStatus(ws[1].ID, worker.StatusNotReady)
	_, _ = reg.Remove(context.Background(), "barrier")
	if rt, ok := r.Current().Lookup([]byte("m")); !ok || len(rt.Candidates) != 0 {
		t.Fatalf("route after recovery: %+v %v", rt, ok)
	}
}

// RoutedWorkers are the workers a table routes to: a worker not ready when the table was
// built is not among them, though it may be routable now (the next table routes to it).
func TestRoutedWorkersAreTheTablesCandidates(t *testing.T) {
	reg, ws := fleet(t, 2)
	_ = reg.SetStatus(ws[0].ID, worker.StatusNotReady)
	r := newRouter(t, reg, "round_robin")
	tab := r.Current()
	if got := tab.RoutedWorkers(); !slices.Equal(got, []*worker.Worker{ws[1]}) {
		t.Fatalf("routed %v, want only the ready worker", got)
	}
	_ = reg.SetStatus(ws[0].ID, worker.StatusReady)
	_, _ = reg.Remove(context.Background(), "barrier")
	if got := tab.RoutedWorkers(); len(got) != 1 {
		t.Fatalf("the old table routes to %d workers, want 1", len(got))
	}
	if got := r.Current().RoutedWorkers(); len(got) != 2 {
		t.Fatalf("the new table routes to %d workers, want 2", len(got))
	}
}
