package policy

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
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
	// NewBuilder creates policy instances (policy/all provides it).
	NewBuilder NewBuilderFunc
	// Metrics receives smg_worker_selection_total. Nil: a private set.
	Metrics *metrics.Set
	// Logger defaults to slog.Default().
	Logger *slog.Logger
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
	routes   map[string]*Route
	any      *Route
	unknown  *Route
}

// Lookup returns the route for a request's model. A request naming no model goes to the
// route over every worker; a model no worker declares goes to the workers whose model is
// unknown, if any. ok is false when nothing serves the model (404 model_not_found).
func (t *Table) Lookup(model []byte) (r *Route, ok bool) {
	if len(model) == 0 {
		return t.any, true
	}
	if r, ok := t.routes[string(model)]; ok { // the conversion does not allocate
		return r, true
	}
	if t.unknown != nil {
		return t.unknown, true
	}
	return nil, false
}

// Routes returns the per-model routes, for the admin API and tests.
func (t *Table) Routes() map[string]*Route { return t.routes }

// Router builds a Table from every snapshot. Update runs on the registry's writer goroutine;
// Current is safe from any goroutine.
type Router struct {
	cfg     RouterConfig
	log     *slog.Logger
	current atomic.Pointer[Table]

	// Writer-goroutine state: the policy instance of each model, kept until the model's last
	// worker leaves, so that a model keeps its policy and the policy keeps its state.
	models  map[string]*modelPolicy
	any     *modelPolicy
	unknown *modelPolicy
}

type modelPolicy struct {
	name    string
	builder Builder
	counter *metrics.Counter
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
	r := &Router{cfg: cfg, log: cfg.Logger, models: map[string]*modelPolicy{}}
	var err error
	if r.any, err = r.newModelPolicy("", cfg.DefaultPolicy); err != nil {
		return nil, err
	}
	if r.unknown, err = r.newModelPolicy("", cfg.DefaultPolicy); err != nil {
		return nil, err
	}
	r.current.Store(&Table{Snapshot: &worker.Snapshot{}, routes: map[string]*Route{}, any: &Route{
		Picker: emptyPicker{}, Policy: cfg.DefaultPolicy, Selections: r.any.counter,
	}})
	return r, nil
}

// Current returns the latest table: one atomic load.
func (r *Router) Current() *Table { return r.current.Load() }

func (r *Router) newModelPolicy(model, name string) (*modelPolicy, error) {
	b, err := r.cfg.NewBuilder(name, name == r.cfg.DefaultPolicy)
	if err != nil {
		return nil, err
	}
	return &modelPolicy{
		name:    name,
		builder: b,
		counter: r.cfg.Metrics.GetOrCreateCounter(fmt.Sprintf(
			`smg_worker_selection_total{worker_type="regular",connection_mode="http",model=%q,policy=%q}`, model, name)),
	}, nil
}

// Update builds and publishes the table for s. Call it from the registry's writer goroutine
// (Registry.Subscribe does).
func (r *Router) Update(s *worker.Snapshot) {
	t := &Table{Snapshot: s, routes: make(map[string]*Route, len(s.Models()))}
	for _, model := range s.Models() {
		mp := r.models[model]
		if mp == nil {
			mp = r.policyForNewModel(model, s)
			r.models[model] = mp
		}
		t.routes[model] = buildRoute(model, mp, s, s.ModelWorkers(model))
	}
	for model := range r.models {
		if _, ok := t.routes[model]; !ok {
			delete(r.models, model) // last worker gone: the model forgets its policy
		}
	}
	t.any = buildRoute("", r.any, s, s.Workers)
	if u := s.UnknownModelWorkers(); len(u) > 0 {
		t.unknown = buildRoute("", r.unknown, s, u)
	}
	r.current.Store(t)
}

// policyForNewModel applies the spec's rule: the first worker registered for a model decides
// its policy through its "policy" label; without one the model uses --policy.
func (r *Router) policyForNewModel(model string, s *worker.Snapshot) *modelPolicy {
	name := r.cfg.DefaultPolicy
	for _, w := range s.Workers {
		if containsModel(w.Models, model) {
			if l := w.Label(LabelPolicy); l != "" {
				name = l
			}
			break
		}
	}
	mp, err := r.newModelPolicy(model, name)
	if err != nil {
		r.log.Warn("Unknown policy label; using the default policy", "model", model, "policy", name, "default", r.cfg.DefaultPolicy, "error", err)
		mp, _ = r.newModelPolicy(model, r.cfg.DefaultPolicy)
	}
	return mp
}

func buildRoute(model string, mp *modelPolicy, s *worker.Snapshot, ws []*worker.Worker) *Route {
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

func containsModel(models []string, m string) bool {
	for _, x := range models {
		if x == m {
			return true
		}
	}
	return false
}

type emptyPicker struct{}

func (emptyPicker) Pick(*Request) (Result, error) { return Result{}, ErrNoAvailableWorkers }
