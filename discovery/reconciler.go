package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/smg-go/smg/worker"
)

// PodSource returns the pods of the informer's cache. It must not call the API server: the
// periodic pass reads the cache alone.
type PodSource func() []Pod

// Reconciler keeps the registry's discovered workers in step with the pods: level-triggered,
// it compares the whole cache with the registry on every pass (spec: Informer and Reconcile
// Loop). See the package documentation for its concurrency model.
type Reconciler struct {
	cfg     Config
	mapping *Mapping
	aliases map[string][]string
	reg     Registry
	pods    PodSource
	queue   *JobQueue
	metrics *discoveryMetrics
	log     *slog.Logger
	wake    chan struct{}

	// probe answers the worker URL to register once the engine at the desired address
	// serves (its http:// URL, or grpc:// when only gRPC answers); models lists what it
	// serves. Tests replace them.
	probe  func(ctx context.Context, url string) (string, error)
	models func(ctx context.Context, url string) ([]string, error)

	passMu sync.Mutex       // one pass at a time
	warned map[Warning]bool // annotation warnings already logged; guarded by passMu

	mu    sync.Mutex
	owned map[string]string // worker id → URL, of the workers this reconciler registered
}

// NewReconciler validates cfg and starts the job queue. Run drives the passes; Close stops
// the queue.
func NewReconciler(cfg Config, reg Registry, pods PodSource) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fillDeps()
	m, err := cfg.Mapping()
	if err != nil {
		return nil, err
	}
	aliases, err := cfg.aliases()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		cfg: cfg, mapping: m, aliases: aliases, reg: reg, pods: pods,
		metrics: newDiscoveryMetrics(cfg.Metrics), log: cfg.Logger,
		wake:  make(chan struct{}, 1),
		owned: map[string]string{}, warned: map[Warning]bool{},
	}
	r.probe = r.protocolProbe
	discover := cfg.DiscoverModels
	if discover == nil {
		discover = worker.DiscoverModels
	}
	r.models = func(ctx context.Context, url string) ([]string, error) { return discover(ctx, url, "") }
	// A finished job can change what the next pass must do (a replaced pod's removal frees
	// its address; a failed registration is retried): wake the loop, coalesced as any event.
	r.queue, err = NewJobQueue(cfg.JobQueueCapacity, cfg.JobQueueConcurrency, func(string, error) { r.Trigger() })
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Trigger asks for a pass. It never blocks; triggers that arrive while one is pending merge.
func (r *Reconciler) Trigger() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run runs passes until ctx ends: one Debounce after a Trigger (so a burst costs one pass),
// and one every Resync from the cache alone.
func (r *Reconciler) Run(ctx context.Context) {
	resync := r.cfg.Clock.After(r.cfg.Resync)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			select {
			case <-r.cfg.Clock.After(r.cfg.Debounce):
			case <-ctx.Done():
				return
			}
			select { // triggers during the debounce window are covered by this pass
			case <-r.wake:
			default:
			}
		case <-resync:
			resync = r.cfg.Clock.After(r.cfg.Resync)
		}
		r.Pass(ctx)
	}
}

// Close stops the job queue: running jobs see their context cancelled.
func (r *Reconciler) Close() { r.queue.Close() }

// Queue returns the job queue (tests and metrics read it).
func (r *Reconciler) Queue() *JobQueue { return r.queue }

// Pass runs one reconcile pass and returns the jobs it submitted. It blocks while the job
// queue is full. Passes are serialised: a Pass called beside Run waits for the running one.
func (r *Reconciler) Pass(ctx context.Context) Plan {
	r.passMu.Lock()
	defer r.passMu.Unlock()
	start := r.cfg.Clock.Now()
	pods := r.pods()
	desired, warns := r.mapping.Desired(pods)
	r.logWarnings(pods, warns)
	r.metrics.discovered.Store(int64(len(desired)))

	owned, snap := r.ownedWorkers()
	plan := Diff(desired, owned, func(url string) bool {
		return snap.ByURL(url) != nil || snap.ByURL("grpc://"+hostPort(url)) != nil
	})
	plan = r.skipBusy(plan)
	if len(plan.Add) == 0 && len(plan.Remove) == 0 {
		return plan
	}
	r.log.Info(fmt.Sprintf("Reconciling workers: %d to add, %d to remove (%d desired)", len(plan.Add), len(plan.Remove), len(desired)))
	var submitted Plan
	for _, rm := range plan.Remove {
		ok, err := r.queue.Submit(ctx, rm.URL, func(ctx context.Context) error { return r.remove(ctx, rm) })
		if err != nil {
			return submitted
		}
		if ok {
			r.metrics.deregistrations.Inc()
			r.log.Info(fmt.Sprintf("Removing worker %s (%d registration(s), pod %s): pod unready, gone, terminating, or replaced",
				hostPort(rm.URL), len(rm.IDs), rm.PodUID))
			submitted.Remove = append(submitted.Remove, rm)
		}
	}
	for _, d := range plan.Add {
		ok, err := r.queue.Submit(ctx, d.URL, func(ctx context.Context) error { return r.register(ctx, d) })
		if err != nil {
			r.metrics.registerFailed.Inc()
			r.log.Warn("Cannot submit worker registration", "url", d.URL, "pod", d.PodName, "error", err)
			if ctx.Err() != nil {
				return submitted
			}
			continue
		}
		if ok {
			r.metrics.registered.Inc()
			r.log.Info(fmt.Sprintf("Registering worker %s (%s) for pod %s", hostPort(d.URL), roleName(d.Role), d.PodName))
			submitted.Add = append(submitted.Add, d)
		}
	}
	r.metrics.syncDuration.Update(r.cfg.Clock.Now().Sub(start).Seconds())
	return submitted
}

// ownedWorkers returns the registry's workers that this reconciler registered, and the
// snapshot it read them from. The owned set is copied before the snapshot is loaded: a job
// records a worker only after Add published it, so an id missing from the later snapshot
// was removed (by auto-recovery or the worker API) and is forgotten.
func (r *Reconciler) ownedWorkers() ([]Registered, *worker.Snapshot) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.owned))
	for id := range r.owned {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	snap := r.reg.Current()
	var out []Registered
	var gone []string
	for _, id := range ids {
		w := snap.ByID(id)
		if w == nil {
			gone = append(gone, id)
			continue
		}
		out = append(out, Registered{ID: id, URL: addressKey(w.URL), PodUID: w.Label(LabelPodUID), Status: w.Status()})
	}
	if len(gone) > 0 {
		r.mu.Lock()
		for _, id := range gone {
			delete(r.owned, id)
		}
		r.mu.Unlock()
	}
	return out, snap
}

func (r *Reconciler) own(id, url string) {
	r.mu.Lock()
	r.owned[id] = url
	r.mu.Unlock()
}

func (r *Reconciler) disown(id string) {
	r.mu.Lock()
	delete(r.owned, id)
	r.mu.Unlock()
}

// skipBusy drops the jobs whose address already has a job pending or running.
func (r *Reconciler) skipBusy(p Plan) Plan {
	var out Plan
	for _, rm := range p.Remove {
		if !r.queue.Busy(rm.URL) {
			out.Remove = append(out.Remove, rm)
		}
	}
	for _, d := range p.Add {
		if !r.queue.Busy(d.URL) {
			out.Add = append(out.Add, d)
		}
	}
	return out
}

// logWarnings logs each annotation warning once per pod, and forgets pods that are gone.
func (r *Reconciler) logWarnings(pods []Pod, warns []Warning) {
	for _, w := range warns {
		if !r.warned[w] {
			r.warned[w] = true
			r.log.Warn(w.Message, "pod_uid", w.PodUID)
		}
	}
	if len(r.warned) == 0 {
		return
	}
	live := make(map[string]bool, len(pods))
	for i := range pods {
		live[pods[i].UID] = true
	}
	for w := range r.warned {
		if !live[w.PodUID] {
			delete(r.warned, w)
		}
	}
}

// addressKey is the desired URL of a registered worker's address: http://host:port for its
// http:// or grpc:// URL and for each DP rank there (grpc://host:port@rank), so a removal
// takes every registration at the address (spec: Removal Flow).
func addressKey(url string) string {
	hp, _, _ := strings.Cut(hostPort(url), "@")
	return "http://" + hp
}

func hostPort(url string) string {
	_, hp, _ := strings.Cut(url, "://")
	return hp
}

func roleName(role string) string {
	if role == "" {
		return "Regular"
	}
	return strings.ToUpper(role[:1]) + role[1:]
}

// wait blocks for d on the reconciler's clock, or until ctx ends.
func (r *Reconciler) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-r.cfg.Clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
