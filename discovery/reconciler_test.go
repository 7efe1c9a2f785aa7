package discovery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// harness is a reconciler over a real worker.Registry, a settable pod list, a fake clock
// and a fake engine prober.
type harness struct {
	t     *testing.T
	reg   *worker.Registry
	rec   *Reconciler
	clock *clock.Fake
	set   *metrics.Set
	logs  *syncbuf.Buffer

	mu   sync.Mutex
	pods []Pod
	down map[string]bool // URLs whose engine does not answer
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	h := &harness{t: t, reg: reg, clock: clock.NewFake(), set: metrics.NewSet(), down: map[string]bool{}}
	cfg := DefaultConfig()
	cfg.Enabled = true
	cfg.Selector = []string{"app=sglang"}
	cfg.Port = 8000
	cfg.WorkerStartupCheckInterval = time.Second
	cfg.WorkerStartupTimeout = 3 * time.Second
	cfg.Clock, cfg.Metrics = h.clock, h.set
	cfg.Logger, h.logs = testutil.Logger(slog.LevelDebug)
	if mutate != nil {
		mutate(&cfg)
	}
	h.rec, err = NewReconciler(cfg, reg, func() []Pod {
		h.mu.Lock()
		defer h.mu.Unlock()
		return append([]Pod(nil), h.pods...)
	}, func(ip string) []Pod {
		h.mu.Lock()
		defer h.mu.Unlock()
		var at []Pod
		for _, p := range h.pods {
			if p.IP == ip {
				at = append(at, p)
			}
		}
		return at
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.rec.Close)
	h.rec.probe = func(_ context.Context, url string) (string, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down[url] {
			return "", errors.New("connection refused")
		}
		return url, nil
	}
	h.rec.models = func(context.Context, string) ([]string, error) { return []string{"llama"}, nil }
	return h
}

func (h *harness) setPods(p ...Pod) {
	h.mu.Lock()
	h.pods = p
	h.mu.Unlock()
}

func (h *harness) setDown(url string, down bool) {
	h.mu.Lock()
	h.down[url] = down
	h.mu.Unlock()
}

// settle waits until no job is pending or running.
func (h *harness) settle() {
	h.t.Helper()
	testutil.Eventually(h.t, "job queue empty", func() bool { return h.rec.queue.Len() == 0 })
}

func (h *harness) urls() map[string]worker.Status {
	out := map[string]worker.Status{}
	for _, w := range h.reg.Current().Workers {
		out[w.URL] = w.Status()
	}
	return out
}

func TestReconcileAddsAndRemoves(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	h.setPods(readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: "8000,8001"}), readyPod("b", "10.0.0.2", app, nil))
	plan := h.rec.Pass(context.Background())
	if len(plan.Add) != 3 {
		t.Fatalf("first pass added %d, want 3", len(plan.Add))
	}
	h.settle()
	got := h.urls()
	if len(got) != 3 || got["http://10.0.0.1:8001"] != worker.StatusReady {
		t.Fatalf("registry %v", got)
	}
	w := h.reg.Current().ByURL("http://10.0.0.1:8001")
	if w.Label(LabelPodName) != "a" || w.Label(LabelPodUID) != "uid-a" || w.Label(LabelDiscovered) != "true" || w.Models[0] != "llama" {
		t.Fatalf("worker %s: labels %v models %v", w.URL, w.Spec().Labels, w.Models)
	}
	if plan := h.rec.Pass(context.Background()); len(plan.Add)+len(plan.Remove) != 0 {
		t.Fatalf("a pass in step submitted %+v", plan)
	}
	unready := readyPod("b", "10.0.0.2", app, nil)
	unready.Ready = false
	h.setPods(readyPod("a", "10.0.0.1", app, nil), unready)
	plan = h.rec.Pass(context.Background())
	if len(plan.Remove) != 2 || len(plan.Add) != 0 {
		t.Fatalf("plan %+v, want 2 removals (port 8001 gone, pod b unready)", plan)
	}
	h.settle()
	if got := h.urls(); len(got) != 1 || got["http://10.0.0.1:8000"] != worker.StatusReady {
		t.Fatalf("registry %v", got)
	}
	for _, line := range []string{"Reconciling workers: 3 to add, 0 to remove (3 desired)",
		"Registering worker 10.0.0.1:8000 (Regular) for pod a",
		"Reconciling workers: 0 to add, 2 to remove (1 desired)",
		"Removing worker 10.0.0.2:8000 (1 registration(s), pod uid-b): pod unready, gone, terminating, or replaced"} {
		if !strings.Contains(h.logs.String(), line) {
			t.Errorf("log lacks %q", line)
		}
	}
	var buf bytes.Buffer
	h.set.WritePrometheus(&buf)
	for _, series := range []string{`smg_discovery_workers_discovered{source="kubernetes"} 1`,
		`smg_discovery_registrations_total{source="kubernetes",result="success"} 3`,
		`smg_discovery_deregistrations_total{source="kubernetes",reason="reconciled"} 2`,
		`smg_discovery_sync_duration_seconds_count{source="kubernetes"} 2`} {
		if !strings.Contains(buf.String(), series) {
			t.Errorf("metrics lack %s\n%s", series, buf.String())
		}
	}
}

func TestReconcileNeverTouchesOthersWorkers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	ctx := context.Background()
	// A worker from the API at a desired address, one carrying discovery's labels (as a mesh
	// peer's would), and one unrelated: none is discovery's.
	for _, s := range []worker.Spec{
		{URL: "http://10.0.0.1:8000"},
		{URL: "http://10.0.0.9:8000", Labels: map[string]string{LabelPodUID: "peer", LabelDiscovered: "true"}},
		{URL: "http://10.0.0.10:8000"},
	} {
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.reg.Add(ctx, s, worker.StatusReady); err != nil {
			t.Fatal(err)
		}
	}
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	for range 3 {
		if plan := h.rec.Pass(ctx); len(plan.Add)+len(plan.Remove) != 0 {
			t.Fatalf("pass submitted %+v over foreign workers", plan)
		}
	}
	h.setPods()
	if plan := h.rec.Pass(ctx); len(plan.Add)+len(plan.Remove) != 0 {
		t.Fatalf("pass submitted %+v with no pods", plan)
	}
	if n := len(h.reg.Current().Workers); n != 3 {
		t.Fatalf("%d workers left, want the 3 foreign ones", n)
	}
}

func TestReconcileReplacedPodAtSameAddress(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	ctx := context.Background()
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	h.rec.Pass(ctx)
	h.settle()
	replaced := readyPod("a", "10.0.0.1", app, nil)
	replaced.UID = "uid-a2"
	h.setPods(replaced)
	if plan := h.rec.Pass(ctx); len(plan.Remove) != 1 || len(plan.Add) != 0 {
		t.Fatalf("plan %+v, want the old registration removed first", plan)
	}
	h.settle()
	if plan := h.rec.Pass(ctx); len(plan.Add) != 1 {
		t.Fatalf("plan %+v, want the new pod registered", plan)
	}
	h.settle()
	if w := h.reg.Current().ByURL("http://10.0.0.1:8000"); w == nil || w.Label(LabelPodUID) != "uid-a2" {
		t.Fatalf("worker %v, want the new pod's", w)
	}
}

func TestReconcileDrainsForSettleWindow(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 5 * time.Second })
	ctx := context.Background()
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	h.rec.Pass(ctx)
	h.settle()
	terminating := readyPod("a", "10.0.0.1", app, nil)
	terminating.Terminating = true
	h.setPods(terminating)
	h.rec.Pass(ctx)
	testutil.Eventually(t, "drain wait", func() bool { return h.clock.Waiting() == 1 })
	if got := h.urls()["http://10.0.0.1:8000"]; got != worker.StatusDraining {
		t.Fatalf("status %v during the settle window, want draining", got)
	}
	if plan := h.rec.Pass(ctx); len(plan.Remove) != 0 {
		t.Fatalf("a pass resubmitted the running removal: %+v", plan)
	}
	h.clock.Advance(4 * time.Second)
	if _, ok := h.urls()["http://10.0.0.1:8000"]; !ok {
		t.Fatal("removed before the settle window ended")
	}
	h.clock.Advance(time.Second)
	h.settle()
	if len(h.urls()) != 0 {
		t.Fatalf("registry %v after the settle window", h.urls())
	}
	if !strings.Contains(h.logs.String(), "Draining 1 worker(s) for 5s before removal") {
		t.Error("log lacks the drain line")
	}
}

func TestReconcileNotReadyWorkerSkipsSettle(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = time.Hour })
	ctx := context.Background()
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	h.rec.Pass(ctx)
	h.settle()
	w := h.reg.Current().ByURL("http://10.0.0.1:8000")
	if err := h.reg.SetStatus(w.ID, worker.StatusNotReady); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "not ready published", func() bool { return h.urls()[w.URL] == worker.StatusNotReady })
	h.setPods()
	h.rec.Pass(ctx)
	h.settle()
	if len(h.urls()) != 0 {
		t.Fatal("a not-ready worker waited for the settle window")
	}
}

func TestReconcileRetriesFailedRegistration(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	url := "http://10.0.0.1:8000"
	h.setDown(url, true)
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	h.rec.Pass(ctx)
	// Startup probing: every check interval until the timeout (3 s), then the job fails.
	for i := 0; i < 3; i++ {
		testutil.Eventually(t, "startup probe wait", func() bool { return h.clock.Waiting() == 1 })
		h.clock.Advance(time.Second)
	}
	h.settle()
	if len(h.urls()) != 0 {
		t.Fatal("registered a worker whose engine never answered")
	}
	h.setDown(url, false)
	if plan := h.rec.Pass(ctx); len(plan.Add) != 1 {
		t.Fatalf("failed registration not resubmitted: %+v", plan)
	}
	h.settle()
	if h.urls()[url] != worker.StatusReady {
		t.Fatalf("registry %v", h.urls())
	}
}

func TestReconcileForgetsWorkersRemovedElsewhere(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	h.rec.Pass(ctx)
	h.settle()
	w := h.reg.Current().ByURL("http://10.0.0.1:8000")
	// Auto-recovery removes a failed worker; the pod is still Ready, so it comes back.
	if _, err := h.reg.Remove(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if plan := h.rec.Pass(ctx); len(plan.Add) != 1 {
		t.Fatalf("plan %+v, want the worker registered again", plan)
	}
	h.settle()
	if h.rec.Owns(w.ID) {
		t.Fatal("the removed worker's id is still owned")
	}
}

func TestReconcileModelAliasAndModelID(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ModelIDFrom = "label:model"
		c.ModelAliases = []string{"gpt=llama-3"}
	})
	h.setPods(readyPod("a", "10.0.0.1", map[string]string{"app": "sglang", "model": "llama-3"}, nil))
	h.rec.Pass(context.Background())
	h.settle()
	w := h.reg.Current().ByURL("http://10.0.0.1:8000")
	if w == nil || strings.Join(w.Models, ",") != "llama-3,gpt" {
		t.Fatalf("worker %v, want models llama-3 and its alias gpt", w)
	}
}

func TestRunCoalescesTriggers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.rec.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	testutil.Eventually(t, "resync timer", func() bool { return h.clock.Waiting() == 1 })
	for range 5 {
		h.rec.Trigger()
	}
	testutil.Eventually(t, "debounce timer", func() bool { return h.clock.Waiting() == 2 })
	h.clock.Advance(DefaultDebounce)
	h.settle()
	testutil.Eventually(t, "registered", func() bool { return len(h.urls()) == 1 })
	// The finished job asks for an address pass, which finds nothing to do and starts no
	// timer: only the resync is left. A pod that vanishes unseen is found by the resync.
	testutil.Eventually(t, "idle", func() bool { return h.clock.Waiting() == 1 })
	if n := strings.Count(h.logs.String(), "Reconciling workers"); n != 1 {
		t.Fatalf("%d passes submitted jobs for one burst, want 1", n)
	}
	h.setPods()
	h.clock.Advance(DefaultResync)
	h.settle()
	testutil.Eventually(t, "removed by the periodic pass", func() bool { return len(h.urls()) == 0 })
}

// run runs the reconcile loop until the test ends; it returns once the loop waits for its
// resync timer.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.rec.Run(ctx); close(done) }()
	h.t.Cleanup(func() { cancel(); <-done })
	testutil.Eventually(h.t, "resync timer", func() bool { return h.clock.Waiting() == 1 })
}

func TestChangedReconcilesItsAddressAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	h.run()
	a, b := readyPod("a", "10.0.0.1", app, nil), readyPod("b", "10.0.0.2", app, nil)
	h.setPods(a, b)
	h.rec.Changed("10.0.0.1")
	// The fake clock does not move: only an address pass, which waits for no debounce, can
	// register a's worker; b's address was not named, so only the full pass adds it.
	testutil.Eventually(t, "a registered", func() bool { return h.reg.Current().ByURL("http://10.0.0.1:8000") != nil })
	h.settle()
	if got := h.urls(); len(got) != 1 {
		t.Fatalf("registry %v after an address pass for 10.0.0.1, want only its worker", got)
	}
	h.clock.Advance(DefaultResync) // the periodic full pass
	testutil.Eventually(t, "b registered by the full pass", func() bool { return len(h.urls()) == 2 })

	a.Ready = false
	moved := b
	moved.IP = "10.0.0.3" // b's pod object now carries a new IP: both addresses are named
	h.setPods(a, moved)
	h.rec.Changed("10.0.0.1")
	h.rec.Changed("10.0.0.2", "10.0.0.3")
	testutil.Eventually(t, "a removed, b moved", func() bool {
		got := h.urls()
		return len(got) == 1 && got["http://10.0.0.3:8000"] == worker.StatusReady
	})
	if w := h.reg.Current().ByURL("http://10.0.0.3:8000"); w.Label(LabelPodUID) != "uid-b" {
		t.Fatalf("worker at b's new address has pod uid %q", w.Label(LabelPodUID))
	}
}

func TestChangedKeepsOwnershipRules(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	h.run()
	// Someone else registered the address (--worker-urls, the worker API, a mesh peer).
	if _, err := h.reg.Add(context.Background(), worker.Spec{URL: "http://10.0.0.1:8000", ModelID: "llama",
		Labels: map[string]string{LabelPodUID: "uid-a"}}, worker.StatusReady); err != nil {
		t.Fatal(err)
	}
	// Two Serving pods claim 10.0.0.2 (a stale object beside its replacement): the first by
	// name wins, as in a full pass.
	h.setPods(readyPod("a", "10.0.0.1", app, nil), readyPod("c-new", "10.0.0.2", app, nil), readyPod("b-old", "10.0.0.2", app, nil))
	h.rec.Changed("10.0.0.1", "10.0.0.2")
	testutil.Eventually(t, "10.0.0.2 registered", func() bool { return h.reg.Current().ByURL("http://10.0.0.2:8000") != nil })
	h.settle()
	if w := h.reg.Current().ByURL("http://10.0.0.2:8000"); w.Label(LabelPodName) != "b-old" {
		t.Fatalf("10.0.0.2 registered for pod %q, want b-old (first by name)", w.Label(LabelPodName))
	}
	h.setPods()
	h.rec.Changed("10.0.0.1", "10.0.0.2")
	testutil.Eventually(t, "10.0.0.2 removed", func() bool { return h.reg.Current().ByURL("http://10.0.0.2:8000") == nil })
	if h.reg.Current().ByURL("http://10.0.0.1:8000") == nil {
		t.Fatal("an address pass removed a worker discovery did not register")
	}
}

func TestFullPassLeavesAddressesChangedAfterItReadTheCache(t *testing.T) {
	h := newHarness(t, nil)
	plan := Plan{
		Add:    []Desired{{URL: "http://10.0.0.1:8000"}, {URL: "http://10.0.0.2:8000"}},
		Remove: []Removal{{URL: "http://10.0.0.1:8001"}, {URL: "http://10.0.0.3:8000"}},
	}
	clone := func(p Plan) Plan { return Plan{Add: slices.Clone(p.Add), Remove: slices.Clone(p.Remove)} }
	h.rec.Changed("10.0.0.1") // change number 1
	// A pass that read the cache before change 1 leaves 10.0.0.1 to its address pass.
	got := h.rec.skipChangedSince(0, clone(plan))
	if len(got.Add) != 1 || got.Add[0].URL != "http://10.0.0.2:8000" || len(got.Remove) != 1 || got.Remove[0].URL != "http://10.0.0.3:8000" {
		t.Fatalf("pass that read before the change kept %+v", got)
	}
	// One that read it after sees the change itself, keeps every job and forgets the number.
	if got := h.rec.skipChangedSince(1, clone(plan)); len(got.Add) != 2 || len(got.Remove) != 2 {
		t.Fatalf("pass that read after the change kept %+v", got)
	}
	if got := h.rec.skipChangedSince(0, clone(plan)); len(got.Add) != 2 {
		t.Fatalf("change number not forgotten: %+v", got)
	}
}

func TestHostOf(t *testing.T) {
	for url, want := range map[string]string{
		"http://10.0.0.1:8000":      "10.0.0.1",
		"grpc://10.0.0.1:8000@3":    "10.0.0.1",
		"http://[fd00::1]:8000":     "fd00::1",
		"grpc://[fd00::1]:8000@0":   "fd00::1",
		"http://worker.local:30000": "worker.local",
	} {
		if got := hostOf(url); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Enabled = true
	ok.Selector = []string{"app=x"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"--selector":                func(c *Config) { c.Selector = nil },
		"key=value":                 func(c *Config) { c.Selector = []string{"app"} },
		"--service-discovery-port":  func(c *Config) { c.Port = 70000 },
		"--model-id-from":           func(c *Config) { c.ModelIDFrom = "pod" },
		"--model-alias":             func(c *Config) { c.ModelAliases = []string{"x"} },
		"--job-queue-capacity":      func(c *Config) { c.JobQueueCapacity = -1 },
		"--kv-connector-annotation": func(c *Config) { c.KVConnectorAnnotation = " x" },
		"--router-selector":         func(c *Config) { c.RouterSelector = []string{"x"} },
		"--prefill-selector":        func(c *Config) { c.PrefillSelector = []string{"x"} },
	} {
		c := ok
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v does not name it", name, err)
		}
	}
	pd := DefaultConfig()
	pd.Enabled = true
	pd.PrefillSelector = []string{"app=vllm", "role=prefill"}
	pd.DecodeSelector = []string{"app=vllm", "role=decode"}
	if err := pd.Validate(); err != nil {
		t.Fatalf("PD config without --selector: %v", err)
	}
	if sel, _ := pd.WatchSelector(); sel.String() != "app=vllm" {
		t.Fatalf("watch selector %q, want the shared app=vllm", sel.String())
	}
	off := Config{Port: -1}
	if err := off.Validate(); err != nil {
		t.Fatalf("disabled discovery validated its flags: %v", err)
	}
}

// Owns reports whether the worker with the given id was registered by this reconciler.
func (r *Reconciler) Owns(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.owned[id]
	return ok
}
