package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
	"github.com/smg-go/smg/worker/breaker"
)

// Sentinel errors of registry operations.
var (
	ErrAlreadyExists = errors.New("worker already exists")
	ErrNotFound      = errors.New("worker not found")
	ErrClosed        = errors.New("registry closed")
	ErrQueueFull     = errors.New("registry event queue full")
	// ErrTooManyWorkers: the registry holds Config.MaxWorkers workers already.
	ErrTooManyWorkers = errors.New("too many workers")
	// ErrImmutable reports an update that would change what a live worker is: its URL, type,
	// models or PD metadata. Those are read once at registration (by snapshots, pickers and
	// the PD path); changing them takes a removal and a new registration.
	ErrImmutable = errors.New("cannot change this field of a registered worker")
)

// DefaultMaxWorkers is Config.MaxWorkers' default (--max-workers).
const DefaultMaxWorkers = 1024

// Config configures a Registry. Start from DefaultConfig: the zero value fails Validate (a zero
// queue size or worker cap is an error, not a default).
type Config struct {
	// QueueSize bounds the event queue. Default 1024.
	QueueSize int
	// MaxWorkers caps the registered workers (--max-workers, default DefaultMaxWorkers,
	// 1024): each one costs metric series, a connection pool and probes, so a careless or
	// hostile registrar must not add them without bound. Past it Add fails with
	// ErrTooManyWorkers.
	MaxWorkers int
	// Client configures every worker's HostClient. Default DefaultClientOptions().
	Client ClientOptions
	// Breaker configures every worker's circuit breaker (--cb-* flags). Default
	// breaker.DefaultConfig().
	Breaker breaker.Config
	// Metrics receives the per-worker series (smg_worker_requests_active,
	// smg_router_upstream_responses_total) and smg_worker_pool_size. Required;
	// DefaultConfig sets a private set.
	Metrics *metrics.Set
	// Logger is required; DefaultConfig sets slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the registry's defaults, with a private metrics set and the default
// logger (the gateway sets its own).
func DefaultConfig() Config {
	return Config{
		QueueSize:  DefaultQueueSize,
		MaxWorkers: DefaultMaxWorkers,
		Client:     DefaultClientOptions(),
		Breaker:    breaker.DefaultConfig(),
		Metrics:    metrics.NewSet(),
		Logger:     slog.Default(),
	}
}

// WithLogger returns c logging to l.
func (c Config) WithLogger(l *slog.Logger) Config {
	c.Logger = l
	return c
}

// DefaultQueueSize is Config.QueueSize's default.
const DefaultQueueSize = 1024

// Validate reports a setting that cannot work, naming the fix.
func (c *Config) Validate() error {
	if c.QueueSize < 1 {
		return fmt.Errorf("registry queue size %d: give at least 1 (default %d)", c.QueueSize, DefaultQueueSize)
	}
	if c.MaxWorkers < 1 {
		return fmt.Errorf("--max-workers %d: give at least 1 (default %d)", c.MaxWorkers, DefaultMaxWorkers)
	}
	if err := c.Client.Validate(); err != nil {
		return err
	}
	if err := c.Breaker.Validate(); err != nil {
		return err
	}
	if c.Metrics == nil || c.Logger == nil {
		return errors.New("worker registry needs Metrics and Logger: set the nil one (worker.DefaultConfig() sets a private metrics set and slog.Default())")
	}
	return nil
}

// Registry owns the set of workers. See the package documentation for its concurrency model.
type Registry struct {
	cfg     Config
	log     *slog.Logger
	events  chan event
	current atomic.Pointer[Snapshot]
	dropped *metrics.Counter

	// Writer-goroutine state.
	workers     []*Worker
	byID        map[string]*Worker // the registered workers by ID
	byURL       map[string]*Worker // the registered workers by URL
	next        snapshotBuilder    // what changed since the last publication
	freeIndexes []uint32
	nextIndex   uint32
	slab        slab // where new Workers are allocated
	version     uint64
	subscribers []func(*Snapshot)

	replies []pendingReply // answered after the publication that includes their change

	subMu     sync.Mutex
	done      chan struct{}
	closeOnce sync.Once
	stopped   chan struct{}
}

type eventKind uint8

const (
	evAdd eventKind = iota
	evRemove
	evSetStatus
	evSync
	evUpdate
	evLearnModels
)

type event struct {
	kind   eventKind
	spec   Spec
	models []string
	id     string
	status Status
	change func(Spec) (Spec, error)
	reply  chan result
}

type result struct {
	w   *Worker
	err error
}

type pendingReply struct {
	ch  chan result
	res result
}

// reply answers ev once the change it caused has been published, so that a caller who
// added a worker can route to it as soon as Add returns.
func (r *Registry) reply(ev event, w *Worker, err error) {
	if ev.reply != nil {
		r.replies = append(r.replies, pendingReply{ev.reply, result{w, err}})
	}
}

// NewRegistry creates a registry and starts its writer goroutine. Close stops it. Start
// from DefaultConfig: a zero setting is refused, not read as its default.
func NewRegistry(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{
		cfg:     cfg,
		log:     cfg.Logger,
		events:  make(chan event, cfg.QueueSize),
		dropped: cfg.Metrics.GetOrCreateCounter(`smg_registry_events_dropped_total`),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		byID:    map[string]*Worker{},
		byURL:   map[string]*Worker{},
		next:    snapshotBuilder{modelUse: map[string]int{}},
	}
	r.current.Store(&Snapshot{byID: newLookup(), byURL: newLookup()})
	cfg.Metrics.GetOrCreateGauge(`smg_worker_pool_size`, func() float64 {
		return float64(len(r.Current().Workers))
	})
	go r.run()
	return r, nil
}

// Current returns the latest snapshot: one atomic load, safe on the hot path.
func (r *Registry) Current() *Snapshot { return r.current.Load() }

// Subscribe registers fn to run on the writer goroutine after every publication, and runs it
// once now with the current snapshot (also on the writer goroutine). fn must not call
// blocking registry methods.
func (r *Registry) Subscribe(fn func(*Snapshot)) {
	r.subMu.Lock()
	r.subscribers = append(r.subscribers, fn)
	r.subMu.Unlock()
	_ = r.submit(context.Background(), event{kind: evSync}, true)
}

// Republish runs the subscribers again with a snapshot of the same workers, for state
// outside the registry that they read when building (a worker's KV-event slot). It does not
// wait for them.
func (r *Registry) Republish() error {
	return r.submit(context.Background(), event{kind: evSync}, false)
}

// Add registers a worker. spec must be normalized (Spec.Normalize). It returns
// ErrAlreadyExists (with the existing worker) when a worker with the same URL is registered.
// The new worker starts with the given status.
func (r *Registry) Add(ctx context.Context, spec Spec, status Status) (*Worker, error) {
	return r.call(ctx, event{kind: evAdd, spec: spec, status: status})
}

// Remove unregisters the worker with the given id. Requests already dispatched to it finish.
func (r *Registry) Remove(ctx context.Context, id string) (*Worker, error) {
	return r.call(ctx, event{kind: evRemove, id: id})
}

// ErrNotPending refuses LearnModels for a worker that is no longer pending or already has
// models.
var ErrNotPending = errors.New("worker is not a pending worker without models")

// LearnModels gives the models a worker declared to a pending worker registered without any
// (it did not answer at registration), and returns the worker that replaces it. A worker's
// models are read without synchronisation by snapshots and the PD path, so they do not change
// in place: the worker is replaced by one with the same ID, URL and settings, pending too,
// which the health checker probes at once. A pending worker has served nothing, so nothing
// in flight or counted is lost.
func (r *Registry) LearnModels(ctx context.Context, id string, models []string) (*Worker, error) {
	return r.call(ctx, event{kind: evLearnModels, id: id, models: models})
}

// Update changes the settings of the worker with the given id and returns once the change is
// published. change runs on the writer goroutine, so concurrent updates never lose one
// another: it gets the worker's whole current spec, API key included, and returns the new
// one, which is normalized and must keep the URL, type, models and PD labels (ErrImmutable
// otherwise). The worker stays the same *Worker: its in-flight count, breaker and series
// carry on, and requests in flight keep the settings they started with.
func (r *Registry) Update(ctx context.Context, id string, change func(Spec) (Spec, error)) (*Worker, error) {
	return r.call(ctx, event{kind: evUpdate, id: id, change: change})
}

// Drain marks a worker draining (no new requests; those it has finish) and returns once that
// is published. Remove it later, after the settle window.
func (r *Registry) Drain(ctx context.Context, id string) (*Worker, error) {
	return r.call(ctx, event{kind: evSetStatus, id: id, status: StatusDraining})
}

// SetStatus changes a worker's status and republishes. It never blocks: when the queue is
// full the change is dropped, counted, and ErrQueueFull returned (health checks resend).
func (r *Registry) SetStatus(id string, s Status) error {
	return r.submit(context.Background(), event{kind: evSetStatus, id: id, status: s}, false)
}

// Close stops the writer goroutine. Pending events are dropped.
func (r *Registry) Close() {
	r.closeOnce.Do(func() { close(r.done) })
	<-r.stopped
}

// call submits ev, waiting while the queue is full, and returns its reply: the worker it
// changed, or why it could not.
func (r *Registry) call(ctx context.Context, ev event) (*Worker, error) {
	reply := make(chan result, 1)
	ev.reply = reply
	if err := r.submit(ctx, ev, true); err != nil {
		return nil, err
	}
	return wait(ctx, reply)
}

func (r *Registry) submit(ctx context.Context, ev event, block bool) error {
	select {
	case <-r.done:
		return ErrClosed
	default:
	}
	if !block {
		select {
		case r.events <- ev:
			return nil
		default:
			r.dropped.Inc()
			return ErrQueueFull
		}
	}
	select {
	case r.events <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return ErrClosed
	}
}

func wait(ctx context.Context, reply chan result) (*Worker, error) {
	select {
	case res := <-reply:
		return res.w, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *Registry) run() {
	defer close(r.stopped)
	for {
		select {
		case <-r.done:
			return
		case ev := <-r.events:
			changed := r.apply(ev)
			// Drain what else is queued so a burst costs one publication.
			for more := true; more; {
				select {
				case ev := <-r.events:
					changed = r.apply(ev) || changed
				default:
					more = false
				}
			}
			if changed {
				r.publish()
			}
			for _, p := range r.replies {
				p.ch <- p.res
			}
			clear(r.replies)
			r.replies = r.replies[:0]
		}
	}
}

// apply runs one event on the writer goroutine and reports whether a publication is needed.
func (r *Registry) apply(ev event) bool {
	switch ev.kind {
	case evSync:
		return true
	case evAdd:
		return r.add(ev)
	}
	w := r.byID[ev.id] // every other event names its worker by id
	if w == nil {
		r.reply(ev, nil, fmt.Errorf("%w: no worker has id %q", ErrNotFound, ev.id))
		return false
	}
	switch ev.kind {
	case evRemove:
		r.remove(w)
		r.reply(ev, w, nil)
		return true
	case evSetStatus:
		r.reply(ev, w, nil)
		return r.setStatus(w, ev.status)
	case evUpdate:
		err := r.update(w, ev.change)
		r.reply(ev, w, err)
		return err == nil
	case evLearnModels:
		return r.learnModels(ev, w)
	}
	return false
}

// add registers a worker of ev.spec unless its URL is taken, its limits are passed or the
// registry is full, and replies.
func (r *Registry) add(ev event) bool {
	if w := r.byURL[ev.spec.URL]; w != nil {
		r.reply(ev, w, fmt.Errorf("%w: %s is registered as %s", ErrAlreadyExists, w.URL, w.ID))
		return false
	}
	if err := ev.spec.CheckLimits(); err != nil { // a model list learned after Normalize
		r.reply(ev, nil, err)
		return false
	}
	if len(r.workers) >= r.cfg.MaxWorkers {
		r.reply(ev, nil, fmt.Errorf("%w: the gateway holds --max-workers (%d) workers already; remove some or raise the flag", ErrTooManyWorkers, r.cfg.MaxWorkers))
		return false
	}
	w := newWorker(r.slab.next(), ev.spec, r.allocIndex(), r.cfg.Client)
	w.setStatus(ev.status)
	r.registerMetrics(w)
	r.workers = append(r.workers, w)
	r.byID[w.ID], r.byURL[w.URL] = w, w
	r.next.joined(w)
	r.log.Info("Added worker", "worker_id", w.ID, "url", w.URL, "models", w.Models, "worker_type", w.Type())
	r.reply(ev, w, nil)
	return true
}

// remove unregisters w; the requests it has finish.
func (r *Registry) remove(w *Worker) {
	i := slices.Index(r.workers, w)
	r.workers = append(r.workers[:i:i], r.workers[i+1:]...)
	r.freeIndexes = append(r.freeIndexes, w.Index)
	delete(r.byID, w.ID)
	delete(r.byURL, w.URL)
	r.next.left(w)
	r.unregisterMetrics(w)
	w.setStatus(StatusDraining)
	w.closeIdle()
	r.log.Info("Removed worker", "worker_id", w.ID, "url", w.URL)
}

// setStatus gives w the status s and reports whether that changed anything. A draining
// worker only leaves: probes must not revive it.
func (r *Registry) setStatus(w *Worker, s Status) bool {
	if w.Status() == s || w.Status() == StatusDraining {
		return false
	}
	r.log.Info("Worker status changed", "worker_id", w.ID, "url", w.URL, "from", w.Status().String(), "to", s.String())
	r.next.setStatus(w, s)
	return true
}

// learnModels replaces the pending worker w by one with the event's models (LearnModels).
func (r *Registry) learnModels(ev event, w *Worker) bool {
	if w.Status() != StatusPending || len(w.Models) > 0 || len(ev.models) == 0 {
		r.reply(ev, w, fmt.Errorf("%w: %s is %s with models %v", ErrNotPending, w.URL, w.Status(), w.Models))
		return false
	}
	spec := w.settings.Load().spec
	spec.ModelID, spec.Models = ev.models[0], append(ModelList(nil), ev.models[1:]...)
	if err := spec.CheckLimits(); err != nil {
		r.reply(ev, w, err)
		return false
	}
	nw := newWorker(r.slab.next(), spec, w.Index, r.cfg.Client)
	nw.ID = w.ID
	nw.setStatus(StatusPending)
	r.next.left(w)
	r.unregisterMetrics(w)
	w.setStatus(StatusDraining)
	w.closeIdle()
	r.registerMetrics(nw)
	r.workers[slices.Index(r.workers, w)] = nw
	r.byID[nw.ID], r.byURL[nw.URL] = nw, nw
	r.next.joined(nw)
	r.log.Info("Learned the worker's models", "worker_id", nw.ID, "url", nw.URL, "models", nw.Models)
	r.reply(ev, nw, nil)
	return true
}

// update applies one Update on the writer goroutine.
func (r *Registry) update(w *Worker, change func(Spec) (Spec, error)) error {
	cur := w.settings.Load()
	old := cur.spec
	old.Labels = cloneLabels(old.Labels)
	old.Models = append(ModelList(nil), old.Models...)
	next, err := change(old)
	if err != nil {
		return err
	}
	if err := next.Normalize(); err != nil {
		return err
	}
	if err := sameIdentity(&cur.spec, &next); err != nil {
		return err
	}
	w.settings.Store(newSettings(next, cur.revision+1))
	r.next.updated(w)
	r.log.Info("Updated worker", "worker_id", w.ID, "url", w.URL, "revision", cur.revision+1)
	return nil
}

// sameIdentity checks that next keeps what a live worker cannot change.
func sameIdentity(old, next *Spec) error {
	switch {
	case next.URL != old.URL:
		return fmt.Errorf("%w: url %q differs from the worker's %q; to move a worker, DELETE it and POST the new URL", ErrImmutable, next.URL, old.URL)
	case next.WorkerType != old.WorkerType:
		return fmt.Errorf("%w: worker_type %q differs from the worker's %q; DELETE the worker and POST it again", ErrImmutable, next.WorkerType, old.WorkerType)
	case !slices.Equal(next.AllModels(), old.AllModels()):
		return fmt.Errorf("%w: models %v differ from the worker's %v; DELETE the worker and POST it again", ErrImmutable, next.AllModels(), old.AllModels())
	}
	for _, l := range [...]string{LabelBootstrapPort, LabelKVConnector} {
		if next.Labels[l] != old.Labels[l] {
			return fmt.Errorf("%w: label %s (%q) differs from the worker's %q; PD metadata is read at registration: DELETE the worker and POST it again", ErrImmutable, l, next.Labels[l], old.Labels[l])
		}
	}
	return nil
}

func (r *Registry) allocIndex() uint32 {
	if n := len(r.freeIndexes); n > 0 {
		// Reuse the smallest free index so index-keyed arrays stay dense.
		best := 0
		for i, v := range r.freeIndexes {
			if v < r.freeIndexes[best] {
				best = i
			}
		}
		idx := r.freeIndexes[best]
		r.freeIndexes = append(r.freeIndexes[:best], r.freeIndexes[best+1:]...)
		return idx
	}
	idx := r.nextIndex
	r.nextIndex++
	return idx
}

func (r *Registry) publish() {
	r.version++
	s := r.next.next(r.Current(), r.version, r.workers)
	r.current.Store(s)
	r.subMu.Lock()
	subs := r.subscribers
	r.subMu.Unlock()
	for _, fn := range subs {
		fn(s)
	}
}

func (r *Registry) registerMetrics(w *Worker) {
	set := r.cfg.Metrics
	w.cbMetrics = breaker.NewMetrics(set, w.URL, &w.Breaker)
	_ = w.Breaker.Init(r.cfg.Breaker, func(from, to breaker.State) { // validated in NewRegistry
		w.cbMetrics.OnTransition(from, to)
		w.syncBreaker()
		r.log.Info("Circuit breaker changed state", "url", w.URL, "from", from.String(), "to", to.String())
	})
	set.GetOrCreateGauge(workerSeries("smg_worker_requests_active", w.URL, ""), func() float64 {
		return float64(w.InFlight.Load())
	})
	for i := range w.Upstream {
		w.Upstream[i] = set.GetOrCreateCounter(workerSeries("smg_router_upstream_responses_total", w.URL, outcomeNames[i]))
	}
}

func (r *Registry) unregisterMetrics(w *Worker) {
	set := r.cfg.Metrics
	w.cbMetrics.Unregister()
	set.UnregisterMetric(workerSeries("smg_worker_requests_active", w.URL, ""))
	for i := range w.Upstream {
		set.UnregisterMetric(workerSeries("smg_router_upstream_responses_total", w.URL, outcomeNames[i]))
	}
}

func workerSeries(name, url, outcome string) string {
	if outcome == "" {
		return name + `{worker=` + promlabel.Quote(url) + `}`
	}
	return name + `{worker=` + promlabel.Quote(url) + `,outcome=` + promlabel.Quote(outcome) + `}`
}
