package loadmon

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
	"github.com/valyala/fasthttp"
)

// engine is a fake engine on a loopback port whose answers a test changes at will.
type engine struct {
	url     string
	loads   atomic.Pointer[string] // nil: /v1/loads answers 404
	metrics atomic.Pointer[string] // nil: /metrics answers 404
	down    atomic.Bool            // true: every request gets its connection closed
	hits    sync.Map               // path → *atomic.Int64
	// arrived and release, when set before the first poll, hold /v1/loads: each request
	// sends on arrived, then waits for release to close.
	arrived, release chan struct{}
}

func startEngine(t *testing.T) *engine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{url: "http://" + ln.Addr().String()}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		n, _ := e.hits.LoadOrStore(string(ctx.Path()), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if e.down.Load() {
			ctx.SetConnectionClose()
			ctx.Hijack(func(c net.Conn) {})
			return
		}
		var body *string
		switch string(ctx.Path()) {
		case pathLoads:
			if e.arrived != nil {
				e.arrived <- struct{}{}
				<-e.release
			}
			body = e.loads.Load()
		case pathMetrics:
			body = e.metrics.Load()
		}
		if body == nil {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		ctx.SetBodyString(*body)
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return e
}

func (e *engine) count(path string) int64 {
	n, ok := e.hits.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func str(s string) *string { return &s }

func register(t *testing.T, urls ...string) (*worker.Registry, []*worker.Worker) {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	var ws []*worker.Worker
	for _, u := range urls {
		spec := worker.Spec{URL: u}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := reg.Add(context.Background(), spec, worker.StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return reg, ws
}

// TestReportCreditsWorkSentDuringThePoll: a report's since-report credit counts from the
// moment its poll left, so a request sent while the poll was out (which the engine's answer
// may not include) keeps its credit. Crediting from the publication, as before, dropped it,
// and the expected-wait score took the worker for idler than it was.
func TestReportCreditsWorkSentDuringThePoll(t *testing.T) {
	e := startEngine(t)
	e.loads.Store(str(mockLoads))
	e.arrived, e.release = make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(e.release) }) }
	t.Cleanup(release) // before the engine's shutdown, which waits for the held request
	reg, ws := register(t, e.url)
	m, err := New(DefaultConfig(), reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.PollOnce(context.Background())
	}()
	<-e.arrived
	workertest.NoteDispatch(ws[0], 100) // sent while the poll is out
	release()
	<-done
	r := ws[0].Load()
	if r == nil {
		t.Fatal("no report after the round")
	}
	if req, tokens, _ := ws[0].SinceReport(r); req != 1 || tokens != 100 {
		t.Fatalf("since-report credit %d requests, %d tokens: want the request sent during the poll (1, 100)", req, tokens)
	}
}

func TestMonitorPollsLoadsThenMetrics(t *testing.T) {
	sgl, vllm := startEngine(t), startEngine(t)
	sgl.loads.Store(str(mockLoads))
	sgl.metrics.Store(str(sglangMetrics))
	vllm.metrics.Store(str(vllmMetrics)) // no /v1/loads
	reg, ws := register(t, sgl.url, vllm.url)
	clk := clock.NewFakeAt(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := DefaultConfig()
	cfg = cfg.WithInterval(time.Second)
	cfg.Clock = clk
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	workertest.NoteDispatch(ws[0], 500) // work sent before the report: the report includes it
	m.PollOnce(context.Background())

	r := ws[0].Load()
	if r == nil || r.WaitingTokens != 3072 || r.GenThroughput != 812.5 || !r.At.Equal(clk.Now()) {
		t.Fatalf("SGLang worker report %+v", r)
	}
	if req, _, _ := ws[0].SinceReport(ws[0].Load()); req != 0 {
		t.Fatal("a new report must reset the since-report counters")
	}
	if r := ws[1].Load(); r == nil || r.RunningRequests != 9 || r.WaitingTokens != -1 {
		t.Fatalf("vLLM worker report %+v", r)
	}
	if m.Preferred(ws[0]) != SourceLoads || m.Preferred(ws[1]) != SourceMetrics {
		t.Fatalf("preferred routes %q, %q", m.Preferred(ws[0]), m.Preferred(ws[1]))
	}
	if sgl.count(pathMetrics) != 0 {
		t.Fatal("the SGLang worker answered /v1/loads; /metrics must not be asked")
	}
	// The vLLM worker is remembered: the next round asks /metrics first.
	before := vllm.count(pathLoads)
	m.PollOnce(context.Background())
	if vllm.count(pathLoads) != before {
		t.Fatal("the remembered route was not asked first")
	}
}

func TestSilentWorkerKeepsItsReportForABoundedAge(t *testing.T) {
	e := startEngine(t)
	e.loads.Store(str(mockLoads))
	reg, ws := register(t, e.url)
	clk := clock.NewFakeAt(time.Unix(0, 0))
	cfg := DefaultConfig()
	cfg = cfg.WithInterval(10 * time.Second)
	cfg.Timeout, cfg.Clock = time.Second, clk
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	m.PollOnce(context.Background())
	if ws[0].Load() == nil {
		t.Fatal("no report")
	}
	e.down.Store(true)
	clk.Advance(25 * time.Second) // within 3 intervals
	m.PollOnce(context.Background())
	if ws[0].Load() == nil {
		t.Fatal("report dropped before its max age")
	}
	clk.Advance(10 * time.Second) // 35 s > 30 s
	m.PollOnce(context.Background())
	if ws[0].Load() != nil {
		t.Fatal("report kept past its max age")
	}
	e.down.Store(false)
	m.PollOnce(context.Background())
	if ws[0].Load() == nil {
		t.Fatal("no report after the worker came back")
	}
}

func TestDisabledMonitoringPollsOnlyWhenRequired(t *testing.T) {
	required := atomic.Bool{}
	cfg := DefaultConfig()
	cfg = cfg.WithInterval(time.Second)
	cfg.Disable, cfg.Required = true, required.Load
	m, err := New(cfg, func() *worker.Snapshot { return &worker.Snapshot{} })
	if err != nil {
		t.Fatal(err)
	}
	if m.active() {
		t.Fatal("disabled monitoring polls with no load-aware policy")
	}
	required.Store(true)
	if !m.active() {
		t.Fatal("a load-aware policy must keep polling on")
	}
}

// TestRunPollsOnItsClockAndStopsWithItsContext: Run polls at once, then once per Interval
// of the injected clock (none while the clock stands still), and returns when ctx ends.
func TestRunPollsOnItsClockAndStopsWithItsContext(t *testing.T) {
	e := startEngine(t)
	e.loads.Store(str(mockLoads))
	reg, ws := register(t, e.url)
	clk := clock.NewFake()
	cfg := DefaultConfig()
	cfg = cfg.WithInterval(time.Hour)
	cfg.Clock = clk
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	polls := func() int64 {
		n, ok := e.hits.Load(pathLoads)
		if !ok {
			return 0
		}
		return n.(*atomic.Int64).Load()
	}
	ticks := make(chan struct{}, 1)
	m.afterTick = func() { ticks <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	testutil.Eventually(t, "the first round, at once", func() bool { return ws[0].Load() != nil && clk.Waiting() == 1 })
	if n := polls(); n != 1 {
		t.Fatalf("%d polls before the clock moved, want 1", n)
	}
	// One tick per phase: the worker (index 0, phase 0) is polled again at the interval's
	// last tick, and not before.
	for range worker.PhaseSlices - 1 {
		clk.Advance(time.Hour / worker.PhaseSlices)
		<-ticks
	}
	if n := polls(); n != 1 {
		t.Fatalf("%d polls before the worker's phase came round, want 1", n)
	}
	clk.Advance(time.Hour / worker.PhaseSlices)
	testutil.Eventually(t, "the second round, one interval later", func() bool { return polls() == 2 })
	cancel()
	<-done
	if clk.Waiting() != 0 {
		t.Fatal("Run left its ticker running")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {Interval: time.Second, MaxReportAge: -1}, {Interval: time.Second, Concurrency: -1}, {Interval: time.Second, Timeout: -1}} {
		if c.Validate() == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	// No zero means "the default": a zero age or timeout is refused, and the
	// interval's followers are set by WithInterval.
	for _, zero := range []func(*Config){func(c *Config) { c.MaxReportAge = 0 }, func(c *Config) { c.Timeout = 0 }} {
		c := DefaultConfig()
		zero(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "WithInterval") {
			t.Errorf("zero accepted or unexplained: %v", err)
		}
	}
	if c := DefaultConfig().WithInterval(2 * time.Second); c.MaxReportAge != 6*time.Second || c.Timeout != 2*time.Second {
		t.Errorf("WithInterval(2s): max age %v, timeout %v", c.MaxReportAge, c.Timeout)
	}
	if c := DefaultConfig(); c.Interval != DefaultInterval || c.MaxReportAge != StaleIntervals*DefaultInterval || c.Timeout != DefaultTimeout {
		t.Errorf("DefaultConfig: %v %v %v", c.Interval, c.MaxReportAge, c.Timeout)
	}
}

// Preferred returns the route that last answered for w ("" before any), for the tests.
func (m *Monitor) Preferred(w *worker.Worker) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prefer[w]
}
