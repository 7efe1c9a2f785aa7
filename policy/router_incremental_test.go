package policy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// TestIncrementalTableMatchesAWholeBuild applies 400 random changes to a registry (workers of
// five models, multi-model ones, of unknown model, of every PD role, joining, leaving, changing readiness,
// several at once, and republications of the same workers) and after each one compares the
// table the router updates with the table a new router builds from the same snapshot: the
// same routes, policies and candidates in the same order, leg by leg. Routes the changes did
// not touch must be kept, not rebuilt.
func TestIncrementalTableMatchesAWholeBuild(t *testing.T) {
	for _, pd := range []bool{false, true} {
		t.Run(fmt.Sprintf("pd=%v", pd), func(t *testing.T) {
			cfg := policy.RouterConfig{DefaultPolicy: "round_robin", NewBuilder: quietPolicies(t, pd), Logger: testutil.Quiet}
			if pd {
				cfg.PD = &policy.PDPolicies{Prefill: "random", Decode: "round_robin"}
			}
			reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(reg.Close)
			incremental, err := policy.NewRouter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rnd := rand.New(rand.NewPCG(1, 2))
			models := []string{"a", "b", "c", "d", ""} // "": a worker of unknown model
			// Each model's workers carry its policy label, so that the model's policy does not
			// depend on which of its workers a whole build sees first.
			labels := map[string]string{"a": "random", "b": "round_robin", "c": "power_of_two"}
			types := []string{worker.TypeRegular, worker.TypePrefill, worker.TypeDecode}
			var ws []*worker.Worker
			added := 0
			add := func() {
				m := models[rnd.IntN(len(models))]
				spec := worker.Spec{URL: fmt.Sprintf("http://w%d:8000", added), ModelID: m}
				added++
				if m == "d" && rnd.IntN(2) == 0 {
					spec.Models = worker.ModelList{"e"} // a multi-model worker
				}
				if l := labels[m]; l != "" {
					spec.Labels = map[string]string{policy.LabelPolicy: l}
				}
				if pd {
					spec.WorkerType = types[rnd.IntN(len(types))]
				}
				if err := spec.Normalize(); err != nil {
					t.Fatal(err)
				}
				status := worker.StatusReady
				if rnd.IntN(4) == 0 {
					status = worker.StatusNotReady
				}
				w, err := reg.Add(context.Background(), spec, status)
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, w)
			}
			for range 20 {
				add()
			}
			incremental.Update(reg.Current())
			reused := 0 // routes an update kept from the table before
			for step := range 400 {
				// One to three edits per publication; the registry publishes them together
				// when they arrive together, and the router sees each publication.
				for range 1 + rnd.IntN(3) {
					switch op := rnd.IntN(10); {
					case op < 3 || len(ws) < 4:
						add()
					case op < 6:
						i := rnd.IntN(len(ws))
						if _, err := reg.Remove(context.Background(), ws[i].ID); err != nil {
							t.Fatal(err)
						}
						ws = slices.Delete(ws, i, i+1)
					case op < 9:
						w := ws[rnd.IntN(len(ws))]
						status := worker.StatusReady
						if w.Ready() {
							status = worker.StatusNotReady
						}
						if err := reg.SetStatus(w.ID, status); err != nil {
							t.Fatal(err)
						}
						_, _ = reg.Remove(context.Background(), "barrier") // applied once this returns
					default:
						// The same workers published again.
					}
				}
				s := reg.Current()
				before := incremental.Current()
				incremental.Update(s)
				for leg := policy.LegRegular; leg <= policy.LegEncode; leg++ {
					for model, rt := range incremental.Current().LegRoutes(leg) {
						if before.LegRoutes(leg)[model] == rt {
							reused++
						}
					}
				}
				whole, err := policy.NewRouter(cfg)
				if err != nil {
					t.Fatal(err)
				}
				whole.Update(s)
				if diff := tableDiff(incremental.Current(), whole.Current()); diff != "" {
					t.Fatalf("step %d (snapshot %d): the updated table differs from a whole build: %s", step, s.Version, diff)
				}
			}
			if reused == 0 {
				t.Fatal("no update kept a route of the table before: every table was built whole")
			}
			t.Logf("%d routes kept from the table before over 400 updates", reused)
		})
	}
}

// tableDiff describes the first difference between two tables' routes, or returns "".
func tableDiff(got, want *policy.Table) string {
	for leg := policy.LegRegular; leg <= policy.LegEncode; leg++ {
		g, w := got.LegRoutes(leg), want.LegRoutes(leg)
		if len(g) != len(w) {
			return fmt.Sprintf("leg %s: %d model routes, want %d", leg, len(g), len(w))
		}
		for model, wr := range w {
			if d := routeDiff(g[model], wr); d != "" {
				return fmt.Sprintf("leg %s, model %q: %s", leg, model, d)
			}
		}
		gr, gok := got.LookupLeg(leg, nil)
		wr, wok := want.LookupLeg(leg, nil)
		if gok != wok {
			return fmt.Sprintf("leg %s: route over every worker %v, want %v", leg, gok, wok)
		}
		if d := routeDiff(gr, wr); gok && d != "" {
			return fmt.Sprintf("leg %s, route over every worker: %s", leg, d)
		}
		gr, gok = got.LookupLeg(leg, []byte("undeclared"))
		wr, wok = want.LookupLeg(leg, []byte("undeclared"))
		if gok != wok {
			return fmt.Sprintf("leg %s: route of unknown-model workers %v, want %v", leg, gok, wok)
		}
		if d := routeDiff(gr, wr); gok && d != "" {
			return fmt.Sprintf("leg %s, route of unknown-model workers: %s", leg, d)
		}
	}
	return ""
}

func routeDiff(got, want *policy.Route) string {
	switch {
	case got == nil:
		return "missing"
	case got.Model != want.Model || got.Policy != want.Policy:
		return fmt.Sprintf("route %q/%s, want %q/%s", got.Model, got.Policy, want.Model, want.Policy)
	case !slices.Equal(got.Candidates, want.Candidates):
		return fmt.Sprintf("candidates %v, want %v", urls(got.Candidates), urls(want.Candidates))
	}
	return ""
}

func urls(ws []*worker.Worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.URL
	}
	return out
}

// TestRebuildAllRebuildsRoutesNoWorkerChanged: pickers read state outside the registry when
// built (a worker's KV-event slot), and the republication that reports it may come with
// another change: after RebuildAll, the next table rebuilds the routes of the models none of
// whose workers changed too; without it, those routes are kept.
func TestRebuildAllRebuildsRoutesNoWorkerChanged(t *testing.T) {
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	var ws []*worker.Worker
	for i, m := range []string{"a", "a", "b"} {
		spec := worker.Spec{URL: fmt.Sprintf("http://w%d:8000", i), ModelID: m}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := reg.Add(context.Background(), spec, worker.StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	r := newRouter(t, reg, "round_robin")
	toggle := func(s worker.Status) {
		if err := reg.SetStatus(ws[0].ID, s); err != nil {
			t.Fatal(err)
		}
		_, _ = reg.Remove(context.Background(), "barrier")
	}
	routeB := r.Current().Routes()["b"]
	toggle(worker.StatusNotReady)
	if got := r.Current().Routes()["b"]; got != routeB {
		t.Fatal("a change of model a's workers rebuilt model b's route")
	}
	r.RebuildAll()
	toggle(worker.StatusReady)
	if got := r.Current().Routes()["b"]; got == routeB {
		t.Fatal("after RebuildAll, model b's route was kept")
	}
	if got := r.Current().Routes()["a"]; len(got.Candidates) != 2 {
		t.Fatalf("model a's candidates %v, want both workers", urls(got.Candidates))
	}
}
