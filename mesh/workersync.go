package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/smg-go/smg/worker"
)

// Registry is what worker sync needs of the worker registry; *worker.Registry implements it.
type Registry interface {
	Current() *worker.Snapshot
	// Subscribe runs fn after every publication; fn must not block.
	Subscribe(fn func(*worker.Snapshot))
	Add(ctx context.Context, spec worker.Spec, status worker.Status) (*worker.Worker, error)
	Remove(ctx context.Context, id string) (*worker.Worker, error)
	SetStatus(id string, s worker.Status) error
}

// workerKeyPrefix starts every worker key: "worker:<owner>:<url>".
const workerKeyPrefix = "worker:"

// DefaultReconcileInterval is how often WorkerSync re-imports peers' workers even without a
// change (the spec's 30 s reconcile pass, which undoes a local delete of an imported worker).
const DefaultReconcileInterval = 30 * time.Second

// workerValue is a published worker: its spec without the API key, and the owner's health.
type workerValue struct {
	Spec    worker.Spec `json:"spec"`
	Healthy bool        `json:"healthy"`
}

// WorkerSync publishes the workers this router registered (from --worker-urls, the worker
// API or discovery) and imports its peers' (spec: Worker Registry Sync):
//
//   - a worker is published as its owner's key when added, when its health changes and
//     (as a tombstone) when removed; its spec never carries the API key, and ipc:// workers
//     are never published;
//   - peers' workers are imported by URL into the local registry, which health-checks them
//     itself; the owner's health sets an import's initial status and afterwards only nudges
//     it (healthy promotes pending or not-ready to ready; unhealthy demotes ready);
//   - a URL this router registered itself is never replaced by a peer's copy;
//   - an import is removed only when no owner publishes the URL any more, so a departed
//     router's workers stay.
//
// All work runs on one goroutine, woken by registry publications and store changes; the
// registry's subscriber callback only signals it.
type WorkerSync struct {
	node     *Node
	reg      Registry
	log      *slog.Logger
	interval time.Duration

	kick chan struct{}
	// refuseImports: peers' workers are not imported (Config.RefusesPeerWorkers); this
	// router still publishes its own.
	refuseImports bool

	mu       sync.Mutex
	imported map[string]bool // URLs this adapter added to the registry
	refused  map[string]bool // URLs not imported because of refuseImports, logged once each
	healthy  map[string]bool // the owner's last published health of each import
}

// NewWorkerSync connects node and reg; Run does the work.
func NewWorkerSync(node *Node, reg Registry, log *slog.Logger) *WorkerSync {
	if log == nil {
		log = slog.Default()
	}
	ws := &WorkerSync{node: node, reg: reg, log: log, interval: DefaultReconcileInterval, kick: make(chan struct{}, 1), imported: map[string]bool{}, refused: map[string]bool{}, healthy: map[string]bool{}}
	node.OnChange(ws.Kick)
	reg.Subscribe(func(*worker.Snapshot) { ws.Kick() })
	return ws
}

// Kick asks for a reconcile pass without blocking.
func (ws *WorkerSync) Kick() {
	select {
	case ws.kick <- struct{}{}:
	default:
	}
}

// Run reconciles on every kick and every reconcile interval until ctx ends.
func (ws *WorkerSync) Run(ctx context.Context) {
	t := ws.node.deps.Clock.NewTicker(ws.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ws.kick:
		case <-t.C():
		}
		ws.Reconcile(ctx)
	}
}

func workerKey(owner, url string) string { return workerKeyPrefix + owner + ":" + url }

// parseWorkerKey splits "worker:<owner>:<url>"; owner names never contain ':'.
func parseWorkerKey(key string) (owner, url string, ok bool) {
	rest, ok := strings.CutPrefix(key, workerKeyPrefix)
	if !ok {
		return "", "", false
	}
	owner, url, ok = strings.Cut(rest, ":")
	return owner, url, ok && owner != "" && url != ""
}

// Reconcile publishes local workers and brings imports in line with the store: one pass.
func (ws *WorkerSync) Reconcile(ctx context.Context) {
	snap := ws.reg.Current()
	ws.mu.Lock()
	imported := maps.Clone(ws.imported)
	ws.mu.Unlock()

	ws.publishOwned(snap, imported)
	want := ws.peersWorkers()
	for _, url := range slices.Sorted(maps.Keys(want)) {
		ws.follow(ctx, url, snap.ByURL(url), imported[url], want[url])
	}
	for url := range imported {
		if _, ok := want[url]; !ok {
			ws.dropImport(ctx, snap, url)
		}
	}
}

// publishOwned publishes the workers of snap this router owns (not imported, not ipc://) and
// deletes its keys of the workers it no longer has.
func (ws *WorkerSync) publishOwned(snap *worker.Snapshot, imported map[string]bool) {
	self := ws.node.Name()
	owned := map[string]bool{}
	for _, w := range snap.Workers {
		if imported[w.URL] || strings.HasPrefix(w.URL, "ipc://") {
			continue
		}
		owned[w.URL] = true
		v, err := json.Marshal(workerValue{Spec: w.Spec(), Healthy: w.Status() == worker.StatusReady})
		if err != nil {
			continue
		}
		ws.node.SetLocal(workerKey(self, w.URL), v)
	}
	for _, key := range ws.node.LocalKeys() {
		if _, url, ok := parseWorkerKey(key); ok && !owned[url] {
			ws.node.DeleteLocal(key)
		}
	}
}

// published is a peer's worker as the store holds it.
type published struct {
	owner string
	v     workerValue
}

// peersWorkers is what peers publish, by URL; with several owners of one URL, the first by
// owner name. Entries that do not decode, or name another URL than their key, are skipped.
func (ws *WorkerSync) peersWorkers() map[string]published {
	self := ws.node.Name()
	want := map[string]published{}
	for _, e := range ws.node.Entries() {
		owner, url, ok := parseWorkerKey(e.Key)
		if !ok || owner == self || strings.HasPrefix(url, "ipc://") {
			continue
		}
		var v workerValue
		if json.Unmarshal(e.Value, &v) != nil || v.Spec.URL != url {
			continue
		}
		if cur, dup := want[url]; !dup || owner < cur.owner {
			want[url] = published{owner, v}
		}
	}
	return want
}

// follow brings the local registry in line with p, a peer's published worker of url: w is the
// registry's worker of url (nil: none), imported whether this adapter added it. A URL this
// router registered itself is left alone.
func (ws *WorkerSync) follow(ctx context.Context, url string, w *worker.Worker, imported bool, p published) {
	switch {
	case w == nil && ws.refuseImports:
		ws.refuse(url, p.owner)
	case w == nil:
		ws.importWorker(ctx, p.v)
	case imported:
		// Only a change of the owner's flag nudges: the local health checker owns the
		// import's status otherwise.
		ws.mu.Lock()
		last, seen := ws.healthy[url]
		ws.healthy[url] = p.v.Healthy
		ws.mu.Unlock()
		if seen && last != p.v.Healthy {
			ws.nudge(w, p.v.Healthy)
		}
	}
}

// dropImport removes the import of url, which no owner publishes any more.
func (ws *WorkerSync) dropImport(ctx context.Context, snap *worker.Snapshot, url string) {
	if w := snap.ByURL(url); w != nil {
		if _, err := ws.reg.Remove(ctx, w.ID); err != nil && !errors.Is(err, worker.ErrNotFound) {
			ws.log.Warn("cannot remove a worker its owner removed", "url", url, "err", err)
			return
		}
	}
	ws.mu.Lock()
	delete(ws.imported, url)
	delete(ws.healthy, url)
	ws.mu.Unlock()
}

func (ws *WorkerSync) importWorker(ctx context.Context, v workerValue) {
	spec := v.Spec
	spec.APIKey = ""
	if err := spec.Normalize(); err != nil {
		ws.log.Warn("ignoring a peer's worker with an invalid spec", "url", spec.URL, "err", err)
		return
	}
	status := worker.StatusNotReady
	if v.Healthy {
		status = worker.StatusReady
	}
	// Mark before adding: the registry's subscriber runs before Add returns, and must not
	// see the import as a worker of this router's own.
	ws.mu.Lock()
	ws.imported[spec.URL] = true
	ws.mu.Unlock()
	if _, err := ws.reg.Add(ctx, spec, status); err != nil {
		if !errors.Is(err, worker.ErrAlreadyExists) {
			ws.log.Warn("cannot import a peer's worker", "url", spec.URL, "err", err)
		}
		ws.mu.Lock()
		delete(ws.imported, spec.URL)
		ws.mu.Unlock()
		return
	}
	ws.mu.Lock()
	ws.healthy[spec.URL] = v.Healthy
	ws.mu.Unlock()
	ws.log.Info("imported worker from mesh peer", "url", spec.URL)
}

// refuse logs, once per URL, a peer's worker that is not imported.
func (ws *WorkerSync) refuse(url, owner string) {
	ws.mu.Lock()
	seen := ws.refused[url]
	ws.refused[url] = true
	ws.mu.Unlock()
	if !seen {
		ws.log.Warn("refused a peer's worker: the mesh is plaintext and --api-key is set", "url", url, "owner", owner)
	}
}

func (ws *WorkerSync) nudge(w *worker.Worker, healthy bool) {
	switch s := w.Status(); {
	case healthy && (s == worker.StatusPending || s == worker.StatusNotReady):
		_ = ws.reg.SetStatus(w.ID, worker.StatusReady)
	case !healthy && s == worker.StatusReady:
		_ = ws.reg.SetStatus(w.ID, worker.StatusNotReady)
	}
}

// Imported returns the URLs imported from peers, sorted.
func (ws *WorkerSync) Imported() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]string, 0, len(ws.imported))
	for u := range ws.imported {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}
