package k8s_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
	"github.com/smg-go/smg/worker"
)

// goroutineSlack is how many goroutines a gateway holding a large discovered fleet may run
// beyond the same gateway idle: the API server connections, the model query client's
// cleaner and the like, and no goroutine per pod or worker.
const goroutineSlack = 64

// TestScaleGoroutinesBounded registers 1,000 pods through the real API server, changes a few,
// and checks that the gateway's goroutines stay bounded however many pods it holds (no
// goroutine per pod, worker or job). The 10,000-pod run with its figures is
// BenchmarkDiscoveryScale (make bench-scale).
func TestScaleGoroutinesBounded(t *testing.T) {
	figs := runScale(t, 1000, 10)
	t.Log(figs)
}

// BenchmarkDiscoveryScale is make bench-scale: $SMG_SCALE_PODS pods (default 10,000) made
// Ready through the real API server beside discovery wired to a real worker registry in this
// process, then 60 single-pod changes and a gateway restart. It prints the figures of
// docs/benchmarks.md (Scale) and reports them as benchmark metrics; run it once:
//
//	go test -run '^$' -bench '^BenchmarkDiscoveryScale$' -benchtime 1x -timeout 30m ./discovery/k8s/
func BenchmarkDiscoveryScale(b *testing.B) {
	n := k8stest.ScalePods(b)
	for range b.N {
		figs := runScale(b, n, 60)
		fmt.Println(figs)
		b.ReportMetric(figs.readyToRoutable.Seconds(), "s/ready-to-routable")
		b.ReportMetric(figs.restart.Seconds(), "s/restart-to-routable")
		b.ReportMetric(float64(figs.addLatency.P99.Microseconds())/1000, "ms/change-p99")
		b.ReportMetric(float64(figs.heapPerPod), "B/pod")
	}
}

// scaleFigures are one run's measurements.
type scaleFigures struct {
	pods              int
	created           time.Duration        // creating the pods and writing their Ready status
	readyToRoutable   time.Duration        // last status write sent → the registry publishes all pods' workers Ready
	removeLatency     testutil.Percentiles // a pod's status write (unready) → its worker no longer routable
	addLatency        testutil.Percentiles // a pod's status write (Ready again) → its worker routable
	restart           time.Duration        // a new gateway started → all pods' workers routable
	restartSynced     time.Duration        // a new gateway started → its informer holds every pod
	heapPerPod        int64                // live heap after all pods are routable, minus before, per pod
	goroutinesIdle    int                  // the gateway with no pod
	goroutinesHolding int                  // the gateway holding every pod (after its jobs finished)
	load              string               // /proc/loadavg when the run ended
}

func (f scaleFigures) String() string {
	return fmt.Sprintf("discovery scale: %d pods created and Ready through the API in %v; last status write → all %d workers routable %v; "+
		"one pod's change beside them: unready → not routable %v, Ready → routable %v; restart → all routable %v (informer synced after %v); "+
		"live heap %d B per pod; goroutines %d idle, %d holding every pod; loadavg %s",
		f.pods, f.created.Round(time.Millisecond), f.pods, f.readyToRoutable.Round(time.Millisecond),
		f.removeLatency, f.addLatency, f.restart.Round(time.Millisecond), f.restartSynced.Round(time.Millisecond), f.heapPerPod, f.goroutinesIdle, f.goroutinesHolding, f.load)
}

// runScale makes n pods Ready beside a gateway, measures, changes `changes` pods one at a
// time, and restarts the gateway. Figures are measured, never asserted; what is asserted is
// that every worker becomes routable and that the goroutines stay bounded.
func runScale(t testing.TB, n, changes int) scaleFigures {
	ctx := context.Background()
	figs := scaleFigures{pods: n}
	ns := namespace(t)

	// One engine on every loopback address answers for all pods (each pod has its own IP).
	mc := mockworker.DefaultConfig()
	mc.Host, mc.Count, mc.EventLoops = "0.0.0.0", 1, 2
	engine := mockworkertest.Start(t, mc)
	_, portStr, err := net.SplitHostPort(engine.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(ns, "app=scale")
	cfg.Debounce = discovery.DefaultDebounce // the spec's 1 s coalescing, not the tests' short one
	cfg.Port, _ = strconv.Atoi(portStr)
	cfg.JobQueueCapacity = n // the spec's advice: at least the number of discovered workers
	regCfg := worker.DefaultConfig()
	regCfg.MaxWorkers = n + 16 // --max-workers defaults to 1,024
	var logs *sightingHandler
	regCfg.Logger, logs = newSightingLogger("K8s worker store synced")

	g := startGatewayWith(t, cfg, nil, regCfg)
	watch := watchSnapshots(g.reg)
	testutil.Eventually(t, "the gateway's informer synced", logs.seen)
	figs.goroutinesIdle = settledGoroutines()
	heapIdle := liveHeap()

	fleet, err := api.NewFleet()
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]k8stest.PodSpec, n)
	for i := range specs {
		specs[i] = k8stest.PodSpec{Namespace: ns, Name: "w-" + strconv.Itoa(i), Labels: map[string]string{"app": "scale"}}
	}
	allReady := func(s *worker.Snapshot) bool { return len(s.Workers) == n && s.ReadyCount() == n }
	all := watch.when(allReady)
	begin := time.Now()
	lastWrite, err := fleet.ReadyPods(ctx, specs, k8stest.LoopbackIP)
	if err != nil {
		t.Fatal(err)
	}
	figs.created = time.Since(begin)
	figs.readyToRoutable = wait(t, all, "all workers routable").Sub(lastWrite)
	checkRoutable(t, g, n)
	testutil.Eventually(t, "the job queue idle", func() bool { return g.disc.Reconciler.Queue().Len() == 0 })
	figs.heapPerPod = (liveHeap() - heapIdle) / int64(n)
	figs.goroutinesHolding = settledGoroutines()
	if figs.goroutinesHolding > figs.goroutinesIdle+goroutineSlack {
		t.Fatalf("the gateway runs %d goroutines holding %d pods, %d idle: more than %d extra is a goroutine per pod or job left behind",
			figs.goroutinesHolding, n, figs.goroutinesIdle, goroutineSlack)
	}

	// Single-pod changes beside the fleet: unready (the worker leaves routing), Ready again.
	var removed, added []time.Duration
	for k := range changes {
		i := (k*7919 + 13) % n
		name, url := "w-"+strconv.Itoa(i), "http://"+k8stest.LoopbackIP(i)+":"+portStr
		pod, err := fleet.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gone := watch.when(func(s *worker.Snapshot) bool { w := s.ByURL(url); return w == nil || !w.Routable() })
		sent := time.Now()
		if pod, err = k8stest.WriteStatus(ctx, fleet.Client, pod, k8stest.LoopbackIP(i), true, false); err != nil {
			t.Fatal(err)
		}
		removed = append(removed, wait(t, gone, url+" not routable").Sub(sent))
		back := watch.when(func(s *worker.Snapshot) bool { w := s.ByURL(url); return w != nil && w.Routable() })
		sent = time.Now()
		if _, err = k8stest.WriteStatus(ctx, fleet.Client, pod, k8stest.LoopbackIP(i), true, true); err != nil {
			t.Fatal(err)
		}
		added = append(added, wait(t, back, url+" routable again").Sub(sent))
	}
	figs.removeLatency, figs.addLatency = testutil.PercentilesOf(removed), testutil.PercentilesOf(added)
	checkRoutable(t, g, n)

	// A gateway (re)started beside the Ready pods: every registration at once.
	g.stop()
	regCfg.Logger, logs = newSightingLogger("K8s worker store synced")
	begin = time.Now()
	second := startGatewayWith(t, cfg, nil, regCfg)
	again := watchSnapshots(second.reg).when(allReady)
	figs.restart = wait(t, again, "all workers routable after a restart").Sub(begin)
	figs.restartSynced = logs.at.Load().Sub(begin)
	checkRoutable(t, second, n)
	figs.load = testutil.LoadAverage()
	return figs
}

// sightingHandler passes records on to a text handler that discards them (formatted as in
// production, not kept: kept, they would count as heap) and notes when a message containing
// want first went by.
type sightingHandler struct {
	slog.Handler
	want string
	at   atomic.Pointer[time.Time]
}

func newSightingLogger(want string) (*slog.Logger, *sightingHandler) {
	h := &sightingHandler{Handler: slog.NewTextHandler(io.Discard, nil), want: want}
	return slog.New(h), h
}

func (h *sightingHandler) seen() bool { return h.at.Load() != nil }

func (h *sightingHandler) note(r slog.Record) {
	if h.at.Load() == nil && strings.Contains(r.Message, h.want) {
		now := time.Now()
		h.at.CompareAndSwap(nil, &now)
	}
}

func (h *sightingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.note(r)
	return h.Handler.Handle(ctx, r)
}

func (h *sightingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sightingAttrs{Handler: h.Handler.WithAttrs(as), parent: h}
}

func (h *sightingHandler) WithGroup(name string) slog.Handler {
	return &sightingAttrs{Handler: h.Handler.WithGroup(name), parent: h}
}

// sightingAttrs is a sightingHandler's derived handler: it reports to its parent.
type sightingAttrs struct {
	slog.Handler
	parent *sightingHandler
}

func (h *sightingAttrs) Handle(ctx context.Context, r slog.Record) error {
	h.parent.note(r)
	return h.Handler.Handle(ctx, r)
}

// checkRoutable fails the test unless the registry holds exactly n routable workers.
func checkRoutable(t testing.TB, g *gateway, n int) {
	t.Helper()
	s := g.reg.Current()
	ok := 0
	for _, w := range s.Workers {
		if w.Routable() {
			ok++
		}
	}
	if len(s.Workers) != n || ok != n {
		t.Fatalf("registry holds %d workers, %d routable; want %d routable", len(s.Workers), ok, n)
	}
}

// snapshotWatch tells when the registry first publishes a snapshot meeting a condition: the
// time is taken on the registry's writer goroutine, as the snapshot becomes current.
type snapshotWatch struct {
	reg     *worker.Registry
	mu      sync.Mutex
	waiters []snapshotWaiter
}

type snapshotWaiter struct {
	cond func(*worker.Snapshot) bool
	at   chan time.Time
}

func watchSnapshots(reg *worker.Registry) *snapshotWatch {
	w := &snapshotWatch{reg: reg}
	reg.Subscribe(w.published)
	return w
}

func (w *snapshotWatch) published(s *worker.Snapshot) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiters = slices.DeleteFunc(w.waiters, func(x snapshotWaiter) bool {
		if x.cond(s) {
			x.at <- now
			return true
		}
		return false
	})
}

// when returns a channel that receives the time of the first publication meeting cond; if
// the current snapshot meets it already, it receives now.
func (w *snapshotWatch) when(cond func(*worker.Snapshot) bool) <-chan time.Time {
	at := make(chan time.Time, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if cond(w.reg.Current()) {
		at <- time.Now()
		return at
	}
	w.waiters = append(w.waiters, snapshotWaiter{cond, at})
	return at
}

// wait receives from at; Patience only keeps a broken run from hanging.
func wait(t testing.TB, at <-chan time.Time, what string) time.Time {
	t.Helper()
	select {
	case v := <-at:
		return v
	case <-time.After(5 * testutil.Patience):
		t.Fatalf("timed out waiting for %s", what)
		return time.Time{}
	}
}

// settledGoroutines is the goroutine count once it stops falling (goroutines of finished
// connections and jobs take a moment to exit).
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
