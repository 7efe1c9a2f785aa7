package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/smg-go/smg/discovery"
)

// Options are what Start takes besides the flags' Config.
type Options struct {
	// RESTConfig overrides the credential lookup (in-cluster, $KUBECONFIG, ~/.kube/config).
	RESTConfig *rest.Config
	// OnRouterChange receives router membership changes when router discovery runs
	// (--router-selector with --enable-mesh and --service-discovery). It runs on the router
	// informer's goroutine and must not block for long.
	OnRouterChange func([]discovery.Member)
}

// Discovery is a running service discovery.
type Discovery struct {
	// Reconciler is the worker reconciler (tests read its queue and ownership).
	Reconciler *discovery.Reconciler
	cancel     context.CancelFunc
	log        *slog.Logger
	wg         sync.WaitGroup
	once       sync.Once
}

// Stop stops the informers, the reconcile loop and the job queue, and waits for them.
func (d *Discovery) Stop() {
	d.once.Do(func() {
		d.cancel()
		d.wg.Wait()
		d.Reconciler.Close()
		d.log.Info("Service discovery stopped")
	})
}

// Start runs worker discovery (and router discovery when configured) until Stop. Without
// credentials it logs "Failed to start service discovery" then "Continuing without service
// discovery" and returns the error: the caller keeps serving its static workers.
func Start(ctx context.Context, cfg discovery.Config, reg discovery.Registry, opts Options) (*Discovery, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
		cfg.Logger = log
	}
	fail := func(err error) (*Discovery, error) {
		log.Error("Failed to start service discovery", "error", err)
		log.Warn("Continuing without service discovery")
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	sel, err := cfg.WatchSelector()
	if err != nil {
		return fail(err)
	}
	log.Info(fmt.Sprintf("Starting K8s service discovery | selector: '%s'", sel))
	rc := opts.RESTConfig
	if rc == nil {
		if rc, err = restConfig(); err != nil {
			return fail(err)
		}
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail(fmt.Errorf("cannot create a Kubernetes client: %w", err))
	}

	runCtx, cancel := context.WithCancel(ctx)
	d := &Discovery{cancel: cancel, log: log}
	workerErrs := &watchErrors{log: log, msg: "K8s worker watcher error (auto-retrying with backoff)"}
	podInformer := newPodInformer(client, cfg.Namespace, sel, workerErrs)
	if err := podInformer.AddIndexers(cache.Indexers{byPodIP: podIPIndex}); err != nil {
		cancel()
		return fail(err)
	}
	d.Reconciler, err = discovery.NewReconciler(cfg, reg,
		func() []discovery.Pod { return podsOf(podInformer.GetStore().List()) },
		func(ip string) []discovery.Pod {
			objs, _ := podInformer.GetIndexer().ByIndex(byPodIP, ip) // the index exists
			return podsOf(objs)
		})
	if err != nil {
		cancel()
		return fail(err)
	}
	rec := d.Reconciler
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.Changed(podIP(obj)) },
		UpdateFunc: func(old, obj any) { rec.Changed(podIP(old), podIP(obj)) },
		DeleteFunc: func(obj any) { rec.Changed(podIP(obj)) },
	}); err != nil {
		cancel()
		rec.Close()
		return fail(err)
	}
	_ = podInformer.SetWatchErrorHandlerWithContext(workerErrs.handler)
	log.Info(fmt.Sprintf("Starting K8s worker watcher | selector: '%s'", sel))
	d.wg.Add(2)
	go func() { defer d.wg.Done(); podInformer.RunWithContext(runCtx) }()
	go func() {
		defer d.wg.Done()
		if !cache.WaitForCacheSync(runCtx.Done(), podInformer.HasSynced) {
			return
		}
		log.Info(fmt.Sprintf("K8s worker store synced, reconciling on change and every %vs", cfg.Resync.Seconds()))
		rec.Pass(runCtx)
		rec.Run(runCtx)
	}()

	if on, msg := cfg.RouterDiscoveryEnabled(); on {
		d.startRouterDiscovery(runCtx, client, cfg, opts.OnRouterChange)
	} else if msg != "" {
		log.Warn(msg)
	}
	return d, nil
}

// newPodInformer watches the pods matching sel in namespace ("" is all namespaces); the
// selector is sent to the API server so the cache holds candidates only. No informer resync:
// the reconciler's periodic pass reads the cache itself.
func newPodInformer(client kubernetes.Interface, namespace string, sel discovery.Selector, errs *watchErrors) cache.SharedIndexInformer {
	selector := sel.String()
	lw := cache.NewFilteredListWatchFromClient(client.CoreV1().RESTClient(), "pods", namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := list(ctx, o)
		errs.report(ctx, err)
		return obj, err
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		errs.report(ctx, err)
		if err != nil && o.SendInitialEvents != nil && *o.SendInitialEvents &&
			(utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)) {
			// The reflector retries a watch-list refused this way after a backoff of up to
			// 30 s that does not end when the informer stops, so SIGTERM waited for it; hidden
			// from that retry, the error makes it fall back to a list, whose failure goes to
			// the error handler and a backoff that ends at once on stop.
			return nil, &opaqueError{err.Error()}
		}
		return w, err
	}
	lw.ListFunc, lw.WatchFunc = nil, nil // the informer calls the functions with a context
	return cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
}

// opaqueError carries an error's text without the error, so that client-go does not recognise
// its kind.
type opaqueError struct{ msg string }

func (e *opaqueError) Error() string { return e.msg }

// watchErrors logs the spec's watcher error line for every list or watch call that fails.
// client-go's reflector retries some failures itself without calling the informer's error
// handler (a refused connection to an unreachable API server, while it lists through a
// watch), so the calls are wrapped; the handler still logs the errors it sees that no call
// returned (a watch stream that broke), once.
type watchErrors struct {
	log  *slog.Logger
	msg  string
	last atomic.Pointer[error] // the last error a call returned, so the handler does not log it twice
}

// report logs err, unless it is nil or ctx was cancelled (shutting down is not an error).
func (w *watchErrors) report(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	w.last.Store(&err)
	w.log.Warn(w.msg, "error", err)
}

// handler is the informer's watch error handler.
func (w *watchErrors) handler(ctx context.Context, r *cache.Reflector, err error) {
	if last := w.last.Load(); (last == nil || !errors.Is(err, *last)) && ctx.Err() == nil {
		w.log.Warn(w.msg, "error", err)
	}
	cache.DefaultWatchErrorHandler(ctx, r, err)
}

// startRouterDiscovery watches the router pods and reports membership changes.
func (d *Discovery) startRouterDiscovery(ctx context.Context, client kubernetes.Interface, cfg discovery.Config, report func([]discovery.Member)) {
	sel, _ := discovery.ParseSelector(cfg.RouterSelector) // validated
	log := cfg.Logger
	errs := &watchErrors{log: log, msg: "K8s router watcher error (auto-retrying with backoff)"}
	inf := newPodInformer(client, cfg.Namespace, sel, errs)
	tracker := &discovery.RouterTracker{Selector: sel, MeshPort: cfg.MeshPort}
	var mu sync.Mutex
	update := func() {
		mu.Lock()
		defer mu.Unlock()
		changes, warns := tracker.Update(podsOf(inf.GetStore().List()))
		for _, w := range warns {
			log.Warn(w)
		}
		for _, m := range changes {
			log.Info("Router discovery: peer changed", "name", m.Name, "addr", m.Addr, "status", string(m.Status))
		}
		if len(changes) > 0 && report != nil {
			report(changes)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { update() }, UpdateFunc: func(_, _ any) { update() }, DeleteFunc: func(any) { update() },
	})
	_ = inf.SetWatchErrorHandlerWithContext(errs.handler)
	// The spec's troubleshooting table tells operators to look for this line.
	log.Info("Router node discovery enabled", "selector", sel.String())
	d.wg.Add(1)
	go func() { defer d.wg.Done(); inf.RunWithContext(ctx) }()
}
