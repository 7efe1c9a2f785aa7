package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/smg-go/smg/worker"
)

// PodSource returns the pods of the informer's cache. It must not call the API server: the
// periodic pass reads the cache alone.
type PodSource func() []Pod

// PodsAt returns the cached pods whose IP is ip, from an index of the informer's cache: an
// address pass reads the pods at one IP without listing the others.
type PodsAt func(ip string) []Pod

// Reconciler keeps the registry's discovered workers in step with the pods: level-triggered,
// it compares the whole cache with the registry on every pass (spec: Informer and Reconcile
// Loop). See the package documentation for its concurrency model.
type Reconciler struct {
	cfg     Config
	mapping *Mapping
	aliases map[string][]string
	reg     Registry
	pods    PodSource
	podsAt  PodsAt
	queue   *JobQueue
	metrics *discoveryMetrics
	log     *slog.Logger
	wake    chan struct{}

	// changedIPs are the pod IPs whose pods changed since the last address pass; changed
	// wakes Run for it. changeSeq numbers the Changed calls and changedAt holds each IP's
	// latest number, so a full pass leaves alone the addresses that changed after it read
	// the cache: their address passes saw newer pods.
	changedMu  sync.Mutex
	changedIPs map[string]struct{}
	changed    chan struct{}
	changeSeq  uint64
	changedAt  map[string]uint64

	// probe answers the worker URL to register once the engine at the desired address
	// serves (its http:// URL, or grpc:// when only gRPC answers); models lists what it
	// serves. Tests replace them.
	probe  func(ctx context.Context, url string) (string, error)
	models func(ctx context.Context, url string) ([]string, error)

	fullMu sync.Mutex       // one full pass at a time
	passMu sync.Mutex       // one pass at a time submits; the full pass's O(n) reading is outside it
	warned map[Warning]bool // annotation warnings already logged; guarded by passMu
	// desiredAt counts the desired workers per pod IP and desired their sum, as the latest
	// pass over each address saw them; guarded by passMu.
	desiredAt map[string]int
	desired   int

	mu      sync.Mutex
	owned   map[string]string              // worker id → URL, of the workers this reconciler registered
	ownedAt map[string]map[string]struct{} // host IP → ids of owned, for address passes
}

// NewReconciler validates cfg and starts the job queue. Run drives the passes; Close stops
// the queue. podsAt may be nil: then Changed only triggers the debounced pass.
func NewReconciler(cfg Config, reg Registry, pods PodSource, podsAt PodsAt) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := cfg.Mapping()
	if err != nil {
		return nil, err
	}
	aliases, err := cfg.aliases()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		cfg: cfg, mapping: m, aliases: aliases, reg: reg, pods: pods, podsAt: podsAt,
		metrics: newDiscoveryMetrics(cfg.Metrics), log: cfg.Logger,
		wake:       make(chan struct{}, 1),
		changedIPs: map[string]struct{}{}, changed: make(chan struct{}, 1), changedAt: map[string]uint64{},
		owned: map[string]string{}, ownedAt: map[string]map[string]struct{}{}, warned: map[Warning]bool{},
		desiredAt: map[string]int{},
	}
	r.probe = r.protocolProbe
	discover := cfg.DiscoverModels
	if discover == nil {
		discover = worker.DiscoverModels
	}
	r.models = func(ctx context.Context, url string) ([]string, error) { return discover(ctx, url, "") }
	// A finished job can change what the next pass must do: a replaced pod's removal frees
	// its address, at once for its address pass; a failed registration is retried by the
	// debounced full pass, so that a job failing at once cannot spin.
	r.queue, err = NewJobQueue(cfg.JobQueueCapacity, cfg.JobQueueConcurrency, func(key string, err error) {
		if err != nil {
			r.Trigger()
		} else {
			r.Changed(hostOf(key))
		}
	})
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

// Changed tells the reconciler that pods at these IPs were added, changed or deleted (the
// informer's event handler calls it with a pod's old and new IP; "" is ignored). Run
// reconciles those addresses at once; without a PodsAt it Triggers the debounced full pass
// instead. It never blocks.
func (r *Reconciler) Changed(ips ...string) {
	if r.podsAt == nil {
		r.Trigger()
		return
	}
	r.changedMu.Lock()
	r.changeSeq++
	for _, ip := range ips {
		if ip != "" {
			r.changedIPs[ip] = struct{}{}
			r.changedAt[ip] = r.changeSeq
		}
	}
	r.changedMu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Run runs passes until ctx ends: an address pass as soon as Changed names pod IPs, a full
// pass one Debounce after a Trigger (so a burst costs one full pass), and one every Resync
// from the cache alone.
//
// The address passes reconcile one pod's change without the debounce, at a cost that does
// not grow with the fleet; the full passes (at start, every Resync, after a failed job) stay
// the level-triggered safety net. Full passes run on a second goroutine, so that an address
// pass never waits for one to read the whole cache.
func (r *Reconciler) Run(ctx context.Context) {
	full := make(chan struct{}, 1) // one full pass pending covers every later request
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-full:
				r.Pass(ctx)
			}
		}
	}()
	defer func() { <-done }()
	resync := r.cfg.Clock.After(r.cfg.Resync)
	var debounce <-chan time.Time // nil: no full pass pending
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.changed:
			r.passChanged(ctx)
			continue
		case <-r.wake:
			if debounce == nil { // triggers during the debounce window are covered by its pass
				debounce = r.cfg.Clock.After(r.cfg.Debounce)
			}
			continue
		case <-debounce:
			debounce = nil
			select {
			case <-r.wake: // a trigger already waiting is covered by the pass this starts
			default:
			}
		case <-resync:
			resync = r.cfg.Clock.After(r.cfg.Resync)
		}
		select {
		case full <- struct{}{}:
		default:
		}
	}
}

// Close stops the job queue: running jobs see their context cancelled.
func (r *Reconciler) Close() { r.queue.Close() }

// Queue returns the job queue (tests and metrics read it).
func (r *Reconciler) Queue() *JobQueue { return r.queue }

// Pass runs one full reconcile pass and returns the jobs it submitted. It blocks while the
// job queue is full. Full passes are serialised: a Pass called beside Run waits for the
// running one. It reads the cache and the registry without holding up the address passes,
// then submits its jobs but for the addresses Changed named since it read the cache.
func (r *Reconciler) Pass(ctx context.Context) Plan {
	r.fullMu.Lock()
	defer r.fullMu.Unlock()
	start := r.cfg.Clock.Now()
	r.changedMu.Lock()
	seen := r.changeSeq
	r.changedMu.Unlock()
	pods := r.pods()
	desired, warns := r.mapping.Desired(pods)
	owned, snap := r.ownedWorkers()
	plan := Diff(desired, owned, occupiedIn(snap))

	r.passMu.Lock()
	defer r.passMu.Unlock()
	r.logWarnings(pods, warns)
	clear(r.desiredAt)
	for i := range desired {
		r.desiredAt[hostOf(desired[i].URL)]++
	}
	r.desired = len(desired)
	r.metrics.discovered.Store(int64(r.desired))

	plan = r.skipBusy(r.skipChangedSince(seen, plan))
	if len(plan.Add) == 0 && len(plan.Remove) == 0 {
		return plan
	}
	r.log.Info(fmt.Sprintf("Reconciling workers: %d to add, %d to remove (%d desired)", len(plan.Add), len(plan.Remove), len(desired)))
	submitted := r.submit(ctx, plan)
	r.metrics.syncDuration.Update(r.cfg.Clock.Now().Sub(start).Seconds())
	return submitted
}

// passChanged runs an address pass for every IP Changed named since the last one: the full
// pass's rules over the pods at that IP and the owned workers there, which is all the full
// pass would change at that address (the mapping and the diff match workers by address).
func (r *Reconciler) passChanged(ctx context.Context) {
	r.changedMu.Lock()
	ips := r.changedIPs
	r.changedIPs = map[string]struct{}{}
	r.changedMu.Unlock()
	r.passMu.Lock()
	defer r.passMu.Unlock()
	var plan Plan
	for ip := range ips {
		desired, warns := r.mapping.Desired(r.podsAt(ip))
		r.noteWarnings(warns)
		r.desired += len(desired) - r.desiredAt[ip]
		if r.desiredAt[ip] = len(desired); len(desired) == 0 {
			delete(r.desiredAt, ip)
		}
		owned, snap := r.ownedAtIP(ip)
		at := r.skipBusy(Diff(desired, owned, occupiedIn(snap)))
		plan.Add, plan.Remove = append(plan.Add, at.Add...), append(plan.Remove, at.Remove...)
	}
	r.metrics.discovered.Store(int64(r.desired))
	if len(plan.Add) == 0 && len(plan.Remove) == 0 {
		return
	}
	r.log.Info(fmt.Sprintf("Reconciling workers: %d to add, %d to remove (%d desired)", len(plan.Add), len(plan.Remove), r.desired))
	r.submit(ctx, plan)
}

// occupiedIn reports the desired URLs whose address snap holds a worker at, over HTTP or gRPC.
func occupiedIn(snap *worker.Snapshot) func(url string) bool {
	return func(url string) bool {
		return snap.ByURL(url) != nil || snap.ByURL("grpc://"+hostPort(url)) != nil
	}
}

// submit queues plan's jobs and returns those it queued: it stops early when ctx ends or the
// queue closes. Called with passMu held.
func (r *Reconciler) submit(ctx context.Context, plan Plan) Plan {
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
	return r.registered(ids)
}

// ownedAtIP is ownedWorkers for the workers at one host IP.
func (r *Reconciler) ownedAtIP(ip string) ([]Registered, *worker.Snapshot) {
	r.mu.Lock()
	ids := make([]string, 0, len(r.ownedAt[ip]))
	for id := range r.ownedAt[ip] {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	return r.registered(ids)
}

// registered looks the owned ids up in the current snapshot, forgetting those it no longer
// holds.
func (r *Reconciler) registered(ids []string) ([]Registered, *worker.Snapshot) {
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
	for _, id := range gone {
		r.disown(id)
	}
	return out, snap
}

func (r *Reconciler) own(id, url string) {
	host := hostOf(url)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned[id] = url
	if r.ownedAt[host] == nil {
		r.ownedAt[host] = map[string]struct{}{}
	}
	r.ownedAt[host][id] = struct{}{}
}

func (r *Reconciler) disown(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	url, ok := r.owned[id]
	if !ok {
		return
	}
	delete(r.owned, id)
	host := hostOf(url)
	delete(r.ownedAt[host], id)
	if len(r.ownedAt[host]) == 0 {
		delete(r.ownedAt, host)
	}
}

// noteWarnings logs the warnings not logged yet for their pod.
func (r *Reconciler) noteWarnings(warns []Warning) {
	for _, w := range warns {
		if !r.warned[w] {
			r.warned[w] = true
			r.log.Warn(w.Message, "pod_uid", w.PodUID)
		}
	}
}

// skipChangedSince drops the jobs at addresses Changed named after change number seen, and
// forgets the numbers up to seen (no later pass can have read the cache before them).
func (r *Reconciler) skipChangedSince(seen uint64, p Plan) Plan {
	r.changedMu.Lock()
	defer r.changedMu.Unlock()
	newer := func(url string) bool { return r.changedAt[hostOf(url)] > seen }
	p.Remove = slices.DeleteFunc(p.Remove, func(rm Removal) bool { return newer(rm.URL) })
	p.Add = slices.DeleteFunc(p.Add, func(d Desired) bool { return newer(d.URL) })
	maps.DeleteFunc(r.changedAt, func(_ string, n uint64) bool { return n <= seen })
	return p
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
	r.noteWarnings(warns)
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

// hostOf is a worker URL's host as a pod IP is written: no port, DP rank or IPv6 brackets.
func hostOf(url string) string {
	hp, _, _ := strings.Cut(hostPort(url), "@")
	if h, _, err := net.SplitHostPort(hp); err == nil {
		return h
	}
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
