package policy

import (
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/promlabel"
	"github.com/smg-go/smg/worker"
)

// LabelPolicy is the worker label that selects a per-model policy (spec: Policy Scope).
const LabelPolicy = "policy"

// NewBuilderFunc creates a Builder for the policy called name. fromFlags is true when the
// instance should use the gateway's CLI flags (the --policy itself, or a label naming the same
// policy) and false when it should use the policy's built-in defaults (a label naming another
// policy), as the spec's Policy Scope section says.
type NewBuilderFunc func(name string, fromFlags bool) (Builder, error)

// RouterConfig configures a Router.
type RouterConfig struct {
	// DefaultPolicy is --policy.
	DefaultPolicy string
	// PD, when set, turns on prefill-decode disaggregation: the table then also holds a
	// prefill and a decode route set over the workers of those types.
	PD *PDPolicies
	// NewBuilder creates policy instances (policy/all provides it).
	NewBuilder NewBuilderFunc
	// Metrics receives smg_worker_selection_total and smg_router_picker_build_failures_total.
	// Nil: a private set.
	Metrics *metrics.Set
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// PDPolicies names the policy of each PD leg (--prefill-policy, --decode-policy; each
// defaults to --policy). In PD mode the legs use these whatever the workers' policy labels
// say (spec: PD and EPD Legs).
type PDPolicies struct {
	Prefill, Decode string
	// Encode, when set, turns on EPD mode (--epd-disaggregation): the table then also holds
	// an encode route set over the encode workers, picked with this policy
	// (--encode-policy: random, round_robin or consistent_hashing).
	Encode string
}

// Leg is a set of routes over the workers of one role.
type Leg uint8

// The legs of a table. LegRegular covers every worker outside PD mode and the regular workers
// in it.
const (
	LegRegular Leg = iota
	LegPrefill
	LegDecode
	// LegEncode routes the multimodal inputs of a request in EPD mode to an encode worker.
	LegEncode
	legCount
)

// String is the worker_type a leg routes to and labels its metrics with.
func (l Leg) String() string {
	return [...]string{worker.TypeRegular, worker.TypePrefill, worker.TypeDecode, worker.TypeEncode}[l]
}

// Route is where requests for one model go.
type Route struct {
	// Model is the model id ("" for requests naming no model).
	Model string
	// Policy is the name of the policy that picks for this route.
	Policy string
	// Picker picks a worker for one request.
	Picker Picker
	// Candidates are the workers the picker was built with.
	Candidates []*worker.Worker
	// Selections counts picks on this route (smg_worker_selection_total).
	Selections *metrics.Counter
	// Builder is the policy instance behind Picker (the mesh reads cache_aware's trees
	// through it). Callers must not call Build: only the registry's writer goroutine does.
	Builder Builder
}

// Table is the immutable route table of one snapshot.
type Table struct {
	// Snapshot is the registry snapshot the table was built from.
	Snapshot *worker.Snapshot
	// PD is set in PD mode: generation requests then take a prefill and a decode route.
	PD bool
	// EPD is set in EPD mode (PD is then set too): multimodal generation requests also
	// take an encode route.
	EPD  bool
	legs [legCount]routeSet
}

// routeSet is one leg's routes.
type routeSet struct {
	routes  map[string]*Route
	any     *Route
	unknown *Route
}

// Lookup returns the regular route for a request's model. A request naming no model goes to
// the route over every worker; a model no worker declares goes to the workers whose model is
// unknown, if any. ok is false when nothing serves the model (404 model_not_found).
func (t *Table) Lookup(model []byte) (r *Route, ok bool) { return t.legs[LegRegular].lookup(model) }

// LookupLeg is Lookup on one leg's workers.
func (t *Table) LookupLeg(leg Leg, model []byte) (r *Route, ok bool) {
	return t.legs[leg].lookup(model)
}

func (rs *routeSet) lookup(model []byte) (*Route, bool) {
	if len(model) == 0 {
		return rs.any, rs.any != nil
	}
	if r, ok := rs.routes[string(model)]; ok { // the conversion does not allocate
		return r, true
	}
	if rs.unknown != nil {
		return rs.unknown, true
	}
	return nil, false
}

// RoutedWorkers returns, once each, the workers the table routes to: every leg's workers
// that were ready when it was built. A worker that turned ready since is routable but not
// routed to until the next table.
func (t *Table) RoutedWorkers() []*worker.Worker {
	var ws []*worker.Worker
	seen := map[*worker.Worker]bool{}
	for i := range t.legs {
		if r := t.legs[i].any; r != nil {
			for _, w := range r.Candidates {
				if !seen[w] {
					seen[w] = true
					ws = append(ws, w)
				}
			}
		}
	}
	return ws
}

// Routes returns the regular per-model routes, for the admin API and tests.
func (t *Table) Routes() map[string]*Route { return t.legs[LegRegular].routes }

// LegRoutes returns one leg's per-model routes.
func (t *Table) LegRoutes(leg Leg) map[string]*Route { return t.legs[leg].routes }

// Router builds a Table from every snapshot. Update runs on the registry's writer goroutine;
// Current is safe from any goroutine.
type Router struct {
	cfg     RouterConfig
	log     *slog.Logger
	current atomic.Pointer[Table]
	// legs holds the writer-goroutine state of each leg in use: one leg outside PD mode,
	// three in it.
	legs []*legPolicies
	// building names the policy whose picker is being built, for the report of a build that
	// panics (writer goroutine only).
	building string
	// seen is what the last published table was built from, for the next Update to find what
	// changed (writer goroutine only).
	seen membership
	// rebuildAll makes the next Update rebuild every route (RebuildAll).
	rebuildAll atomic.Bool
}

// legPolicies is one leg's policy instances: one per model, kept until the model's last
// worker leaves, so that a model keeps its policy and the policy keeps its state.
type legPolicies struct {
	leg Leg
	// policy is the leg's policy name; labels may override it only on the regular leg.
	policy  string
	labels  bool
	models  map[string]*modelPolicy
	any     *modelPolicy
	unknown *modelPolicy
	// all makes the leg take every worker whatever its type (the regular leg outside PD mode).
	all bool
}

type modelPolicy struct {
	name    string
	builder Builder
	counter *metrics.Counter
	// workers is how many workers the model's last route was built over: the room its next
	// list of workers starts with.
	workers int
}

// NewRouter validates cfg and returns a Router whose table is empty until the first Update.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.NewBuilder == nil {
		return nil, fmt.Errorf("policy router: NewBuilder is required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Router{cfg: cfg, log: cfg.Logger}
	r.legs = append(r.legs, &legPolicies{leg: LegRegular, policy: cfg.DefaultPolicy, labels: true, all: cfg.PD == nil})
	if cfg.PD != nil {
		r.legs = append(r.legs,
			&legPolicies{leg: LegPrefill, policy: cfg.PD.Prefill},
			&legPolicies{leg: LegDecode, policy: cfg.PD.Decode})
		if cfg.PD.Encode != "" {
			r.legs = append(r.legs, &legPolicies{leg: LegEncode, policy: cfg.PD.Encode})
		}
	}
	empty := r.newTable(&worker.Snapshot{})
	for _, lp := range r.legs {
		lp.models = map[string]*modelPolicy{}
		var err error
		if lp.any, err = r.newModelPolicy(lp, "", lp.policy); err != nil {
			return nil, err
		}
		if lp.unknown, err = r.newModelPolicy(lp, "", lp.policy); err != nil {
			return nil, err
		}
		empty.legs[lp.leg] = routeSet{routes: map[string]*Route{}, any: &Route{
			Picker: emptyPicker{}, Policy: lp.policy, Selections: lp.any.counter,
		}}
	}
	r.current.Store(empty)
	return r, nil
}

// RebuildAll makes the next Update rebuild every route, not only those of the workers that
// changed: call it before Registry.Republish when state outside the registry that pickers
// read when built moved (a worker's KV-event slot), since the registry may publish that
// republication together with other changes. Safe from any goroutine.
func (r *Router) RebuildAll() { r.rebuildAll.Store(true) }

// Current returns the latest table: one atomic load.
func (r *Router) Current() *Table { return r.current.Load() }

// newModelPolicy creates the policy instance of one model on one leg. The leg policies of PD
// mode come from their flags; on the regular leg, a label naming another policy than
// --policy gets that policy's defaults (spec: Policy Scope).
func (r *Router) newModelPolicy(lp *legPolicies, model, name string) (*modelPolicy, error) {
	b, err := r.cfg.NewBuilder(name, !lp.labels || name == r.cfg.DefaultPolicy)
	if err != nil {
		return nil, err
	}
	return &modelPolicy{
		name:    name,
		builder: b,
		counter: r.cfg.Metrics.GetOrCreateCounter(
			`smg_worker_selection_total{worker_type=` + promlabel.Quote(lp.leg.String()) + `,connection_mode="http",model=` + promlabel.Quote(model) +
				`,policy=` + promlabel.Quote(name) + `}`),
	}, nil
}

// Update builds and publishes the table for s. Call it from the registry's writer goroutine
// (Registry.Subscribe does).
//
// A picker build that panics (a bug in a policy) must not end the process, which serves
// every other model: the table is then not published, so requests keep the previous one
// until the next snapshot; the panic is logged and counted in
// smg_router_picker_build_failures_total{policy}.
//
// A table change costs what changed: the workers that joined, left or changed readiness since
// the last table (membership.diff) name the models whose routes are rebuilt; every other
// route, and every leg none of them belongs to, is the previous table's. A snapshot in which
// no worker changed (Registry.Republish: state outside the registry moved), and the first
// after RebuildAll, rebuild every route.
func (r *Router) Update(s *worker.Snapshot) {
	defer func() {
		if p := recover(); p != nil {
			r.seen.forget() // the next table is built whole
			r.cfg.Metrics.GetOrCreateCounter(`smg_router_picker_build_failures_total{policy=` + promlabel.Quote(r.building) + `}`).Inc()
			r.log.Error("Cannot build the route table; requests keep the previous one", "policy", r.building, "snapshot", s.Version, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	prev := r.current.Load()
	changed, whole := r.seen.diff(s)
	whole = r.rebuildAll.Swap(false) || whole
	t := r.newTable(s)
	for _, lp := range r.legs {
		if whole || len(changed) == 0 {
			t.legs[lp.leg] = r.buildLeg(lp, s)
		} else {
			t.legs[lp.leg] = r.updateLeg(lp, s, prev.legs[lp.leg], changed)
		}
	}
	r.current.Store(t)
}

// newTable returns an empty table of the router's mode over s.
func (r *Router) newTable(s *worker.Snapshot) *Table {
	pd := r.cfg.PD
	return &Table{Snapshot: s, PD: pd != nil, EPD: pd != nil && pd.Encode != ""}
}

// legWorkers returns the snapshot's workers of the leg's type.
func (lp *legPolicies) legWorkers(s *worker.Snapshot) []*worker.Worker {
	if lp.all {
		return s.Workers
	}
	ws := make([]*worker.Worker, 0, len(s.Workers))
	for _, w := range s.Workers {
		if lp.takes(w) {
			ws = append(ws, w)
		}
	}
	return ws
}

// takes reports whether w is a worker of the leg.
func (lp *legPolicies) takes(w *worker.Worker) bool { return lp.all || w.Type() == lp.leg.String() }

// buildLeg builds one leg's routes from the snapshot's workers of the leg's type.
func (r *Router) buildLeg(lp *legPolicies, s *worker.Snapshot) routeSet {
	ws := lp.legWorkers(s)
	byModel, unknown := lp.groupByModel(ws, nil)
	rs := routeSet{routes: make(map[string]*Route, len(byModel))}
	r.buildModelRoutes(lp, s, rs.routes, byModel, unknown)
	for model := range lp.models {
		if _, ok := rs.routes[model]; !ok {
			delete(lp.models, model) // last worker gone: the model forgets its policy
		}
	}
	rs.any = r.buildRoute("", lp.any, s, ws)
	if len(unknown) > 0 {
		rs.unknown = r.buildRoute("", lp.unknown, s, unknown)
	}
	return rs
}

// updateLeg is buildLeg for a snapshot in which only the workers of changed (not empty) joined,
// left or changed readiness since prev, the leg's last routes: the models the leg's changed
// workers declare get their routes rebuilt, and the route over every worker; the other
// routes are prev's. A changed worker of unknown model is a candidate of every model: the
// whole leg is rebuilt.
func (r *Router) updateLeg(lp *legPolicies, s *worker.Snapshot, prev routeSet, changed []*worker.Worker) routeSet {
	var affected map[string]bool
	for _, w := range changed {
		if !lp.takes(w) {
			continue
		}
		if len(w.Models) == 0 {
			return r.buildLeg(lp, s)
		}
		if affected == nil {
			affected = map[string]bool{}
		}
		for _, m := range w.Models {
			affected[m] = true
		}
	}
	if affected == nil {
		return prev // no worker of the leg changed
	}
	ws := lp.legWorkers(s)
	byModel, unknown := lp.groupByModel(ws, affected)
	rs := routeSet{routes: maps.Clone(prev.routes), unknown: prev.unknown}
	for model, declared := range byModel {
		if len(declared) == 0 {
			delete(rs.routes, model)
			delete(lp.models, model) // last worker gone: the model forgets its policy
			delete(byModel, model)
		}
	}
	r.buildModelRoutes(lp, s, rs.routes, byModel, unknown)
	rs.any = r.buildRoute("", lp.any, s, ws)
	return rs
}

// buildModelRoutes builds into routes the route of each model of byModel (its declared
// workers, none empty) over those workers and the unknown ones, creating the policy of a
// model new to the leg.
func (r *Router) buildModelRoutes(lp *legPolicies, s *worker.Snapshot, routes map[string]*Route, byModel map[string][]*worker.Worker, unknown []*worker.Worker) {
	for model, declared := range byModel {
		mp := lp.models[model]
		if mp == nil {
			mp = r.policyForNewModel(lp, model, declared[0])
			lp.models[model] = mp
		}
		routes[model] = r.buildRoute(model, mp, s, append(declared, unknown...))
		mp.workers = len(declared) + len(unknown)
	}
}

// room is the capacity a new list of model's workers starts with: its last route's worker
// count and a few more, so that a list grows in place as workers join.
func (lp *legPolicies) room(model string) int {
	if mp := lp.models[model]; mp != nil {
		return mp.workers + 8
	}
	return 8
}

// groupByModel returns the workers of each declared model in order (each list a fresh slice
// with room to append), and the workers whose model is unknown. When only is not nil, it
// groups only the models only holds, each of them in byModel (its list nil when no worker
// declares it).
func (lp *legPolicies) groupByModel(ws []*worker.Worker, only map[string]bool) (byModel map[string][]*worker.Worker, unknown []*worker.Worker) {
	byModel = make(map[string][]*worker.Worker, len(only))
	for m := range only {
		byModel[m] = nil
	}
	// Fleets list the workers of a model in runs: the current run's list is appended to
	// without hashing its model's name for every worker.
	var (
		run     []*worker.Worker
		runOf   string
		running bool
	)
	for _, w := range ws {
		if len(w.Models) == 0 {
			unknown = append(unknown, w)
			continue
		}
		for _, m := range w.Models {
			if running && m == runOf {
				run = append(run, w)
				continue
			}
			if only != nil && !only[m] {
				continue
			}
			if running {
				byModel[runOf] = run
			}
			run, runOf, running = byModel[m], m, true
			if run == nil {
				run = make([]*worker.Worker, 0, lp.room(m))
			}
			run = append(run, w)
		}
	}
	if running {
		byModel[runOf] = run
	}
	return byModel, unknown
}

// policyForNewModel applies the spec's rule: the first worker registered for a model decides
// its policy through its "policy" label; without one the model uses --policy. PD legs ignore
// labels.
func (r *Router) policyForNewModel(lp *legPolicies, model string, first *worker.Worker) *modelPolicy {
	name := lp.policy
	if l := first.Label(LabelPolicy); lp.labels && l != "" {
		name = l
	}
	mp, err := r.newModelPolicy(lp, model, name)
	if err != nil {
		r.log.Warn("Unknown policy label; using the default policy", "model", model, "policy", name, "default", lp.policy, "error", err)
		mp, _ = r.newModelPolicy(lp, model, lp.policy)
	}
	return mp
}

func (r *Router) buildRoute(model string, mp *modelPolicy, s *worker.Snapshot, ws []*worker.Worker) *Route {
	r.building = mp.name
	cands := make([]*worker.Worker, 0, len(ws))
	for _, w := range ws {
		if w.Ready() { // the breaker is checked live, per pick: it changes without a snapshot
			cands = append(cands, w)
		}
	}
	return &Route{
		Model:      model,
		Policy:     mp.name,
		Picker:     mp.builder.Build(Group{Model: model, Workers: cands, Snapshot: s}),
		Candidates: cands,
		Selections: mp.counter,
		Builder:    mp.builder,
	}
}

type emptyPicker struct{}

func (emptyPicker) Pick(*Request) (Result, error) { return Result{}, ErrNoAvailableWorkers }
