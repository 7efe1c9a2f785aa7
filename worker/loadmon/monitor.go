package loadmon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/enginemetrics"
	"github.com/smg-go/smg/internal/promlabel"
	"github.com/smg-go/smg/worker"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// Sources of a load report.
const (
	SourceLoads   = "loads"   // GET /v1/loads
	SourceMetrics = "metrics" // GET /metrics
)

const (
	pathLoads   = "/v1/loads"
	pathMetrics = "/metrics"
)

// errNotAnswered marks a route that answered, but not with a load report (404, an error
// status, a body that does not parse): the other route is worth trying.
var errNotAnswered = errors.New("route did not answer with a load report")

// Monitor polls every worker of the current snapshot for its load and publishes the reports on
// the workers (Worker.SetLoad). See the package documentation.
type Monitor struct {
	cfg     Config
	log     *slog.Logger
	current func() *worker.Snapshot

	// mu guards prefer: per worker, the route that answered last (SourceLoads or
	// SourceMetrics), so each poll asks one route first.
	mu     sync.Mutex
	prefer map[*worker.Worker]string

	parsers sync.Pool // *fastjson.Parser
	polls   map[string]*metrics.Counter

	// engine holds, with --engine-metrics, each worker's last /metrics body; guarded by mu.
	engine        map[*worker.Worker][]byte
	engineDropped *metrics.Counter

	// afterTick, when set (by tests, before Run), runs after each of Run's ticks is handled.
	afterTick func()
}

// New validates cfg and returns a Monitor over the snapshots current returns.
func New(cfg Config, current func() *worker.Snapshot) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{cfg: cfg, log: cfg.Logger, current: current, prefer: map[*worker.Worker]string{}, polls: map[string]*metrics.Counter{},
		engine: map[*worker.Worker][]byte{}}
	sources := []string{SourceLoads, SourceMetrics}
	if cfg.EngineMetrics {
		m.engineDropped = cfg.Metrics.GetOrCreateCounter(`smg_engine_metrics_dropped_samples_total`)
		sources = append(sources, sourceEngine)
	}
	for _, src := range sources {
		for _, outcome := range []string{"ok", "error"} {
			m.polls[src+outcome] = cfg.Metrics.GetOrCreateCounter(
				`smg_load_monitor_polls_total{source=` + promlabel.Quote(src) + `,outcome=` + promlabel.Quote(outcome) + `}`)
		}
	}
	return m, nil
}

// Run polls until ctx is done: every worker at once, then each worker once per Interval in
// its phase (worker.Worker.Phase): a tick every Interval ÷ worker.PhaseSlices polls the
// workers of one phase, so a fleet is never polled in one burst.
func (m *Monitor) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(max(m.cfg.Interval/worker.PhaseSlices, 1))
	defer t.Stop()
	if m.active() {
		m.PollOnce(ctx)
	}
	for phase := 1; ; phase = (phase + 1) % worker.PhaseSlices {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if m.active() {
			m.PollPhase(ctx, phase)
		}
		if m.afterTick != nil {
			m.afterTick()
		}
	}
}

func (m *Monitor) active() bool { return m.loadsWanted() || m.cfg.EngineMetrics }

// loadsWanted reports whether load reports are polled: always, unless
// --disable-load-monitoring, and then still when overload protection or a load-aware policy
// needs them (spec: Passthrough).
func (m *Monitor) loadsWanted() bool {
	return !m.cfg.Disable || m.cfg.Overload.Enabled || (m.cfg.Required != nil && m.cfg.Required())
}

// PollOnce polls every registered worker once, at most Concurrency at a time, publishes the
// reports, and drops reports older than MaxReportAge of workers that did not answer. It
// returns when the round is done.
//
// Each report is published as its poll returns and credits the work dispatched since the
// poll was sent (Worker.SetLoadSince): the work sent while a poll was on its way, which the
// report may not include, used to lose its since-report credit at the publication
// (docs/differences.md).
func (m *Monitor) PollOnce(ctx context.Context) {
	ws := m.current().Workers
	m.forget(ws)
	m.pollAll(ctx, ws)
}

// PollPhase is PollOnce for the workers of one phase (worker.Worker.Phase) only; phase 0
// also forgets the workers no longer registered.
func (m *Monitor) PollPhase(ctx context.Context, phase int) {
	ws := m.current().Workers
	if phase == 0 {
		m.forget(ws)
	}
	buf := phaseBufs.Get().(*[]*worker.Worker)
	mine := (*buf)[:0]
	for _, w := range ws {
		if w.Phase() == phase {
			mine = append(mine, w)
		}
	}
	m.pollAll(ctx, mine)
	clear(mine)
	*buf = mine[:0]
	phaseBufs.Put(buf)
}

// phaseBufs holds PollPhase's lists of workers between calls.
var phaseBufs = sync.Pool{New: func() any { return new([]*worker.Worker) }}

// pollAll polls ws, at most Concurrency at a time, with goroutines that exit when it returns.
func (m *Monitor) pollAll(ctx context.Context, ws []*worker.Worker) {
	loads := m.loadsWanted()
	worker.ForEach(ctx, m.cfg.Concurrency, ws, func(w *worker.Worker) {
		if loads {
			m.poll(w)
		}
		if m.cfg.EngineMetrics {
			m.pollEngine(w)
		}
	})
}

// forget drops the route preference of workers no longer registered.
func (m *Monitor) forget(ws []*worker.Worker) {
	live := make(map[*worker.Worker]bool, len(ws))
	for _, w := range ws {
		live[w] = true
	}
	m.mu.Lock()
	for w := range m.prefer {
		if !live[w] {
			delete(m.prefer, w)
		}
	}
	for w := range m.engine {
		if !live[w] {
			delete(m.engine, w)
		}
	}
	m.mu.Unlock()
}

// poll asks w for its load on its preferred route, then on the other one if the first does
// not answer with a report, and publishes what it gets.
func (m *Monitor) poll(w *worker.Worker) {
	m.mu.Lock()
	first := m.prefer[w]
	m.mu.Unlock()
	if first == "" {
		first = SourceLoads // the spec: ask /v1/loads whatever the engine
	}
	second := SourceMetrics
	if first == SourceMetrics {
		second = SourceLoads
	}
	mark := w.DispatchMark() // what the since-report credit of this poll's report counts from
	var r *worker.LoadReport
	var err error
	src := first
	if w.Protocol() == worker.ProtocolGRPC && m.cfg.GRPCLoads != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
		r, err = m.cfg.GRPCLoads(ctx, w)
		cancel()
		if r != nil {
			r.At = m.cfg.Clock.Now()
		}
	} else {
		r, err = m.fetch(w, first)
	}
	if errors.Is(err, errNotAnswered) {
		r, err = m.fetch(w, second)
		src = second
	}
	if err != nil {
		m.log.Debug("Load poll failed", "worker", w.URL, "error", err)
		if old := w.Load(); old != nil && m.cfg.Clock.Now().Sub(old.At) > m.cfg.MaxReportAge {
			w.SetLoad(nil) // too old to route on: fall back to in-flight counts
			w.SetOverloaded(false)
		}
		return
	}
	m.mu.Lock()
	m.prefer[w] = src
	m.mu.Unlock()
	w.SetLoadSince(r, mark)
	if veto := m.cfg.Overload.vetoes(r); veto != w.Overloaded() {
		w.SetOverloaded(veto)
		m.log.Info("Overload protection changed", "worker", w.URL, "overloaded", veto,
			"waiting_requests", r.WaitingRequests, "token_usage", r.TokenUsage)
	}
}

// fetch GETs one route of w and parses it. A transport error is returned as is; an answer
// that is not a load report wraps errNotAnswered.
func (m *Monitor) fetch(w *worker.Worker, src string) (*worker.LoadReport, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	path := pathLoads
	if src == SourceMetrics {
		path = pathMetrics
	}
	req.SetRequestURI(w.URL + path)
	req.Header.SetMethod(fasthttp.MethodGet)
	if auth := w.AuthHeader(); len(auth) > 0 {
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, auth)
	}
	if err := w.Probe(req, resp, m.cfg.Timeout); err != nil {
		m.polls[src+"error"].Inc()
		return nil, fmt.Errorf("cannot poll %s%s: %w", w.URL, path, err)
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		m.polls[src+"error"].Inc()
		return nil, fmt.Errorf("%w: %s%s returned %d", errNotAnswered, w.URL, path, code)
	}
	r := &worker.LoadReport{At: m.cfg.Clock.Now()}
	var err error
	if src == SourceLoads {
		p, _ := m.parsers.Get().(*fastjson.Parser)
		if p == nil {
			p = new(fastjson.Parser)
		}
		err = ParseLoads(p, resp.Body(), r)
		m.parsers.Put(p)
	} else {
		err = ParseMetrics(resp.Body(), r)
	}
	if err != nil {
		m.polls[src+"error"].Inc()
		return nil, fmt.Errorf("%w: %s%s: %v", errNotAnswered, w.URL, path, err)
	}
	m.polls[src+"ok"].Inc()
	return r, nil
}

// sourceEngine labels the --engine-metrics polls in smg_load_monitor_polls_total.
const sourceEngine = "engine_metrics"

// pollEngine fetches w's Prometheus /metrics for WriteEngineMetrics. A failed poll keeps
// nothing: the worker's series disappear until it answers again, rather than freeze.
func (m *Monitor) pollEngine(w *worker.Worker) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(w.URL + pathMetrics)
	req.Header.SetMethod(fasthttp.MethodGet)
	if auth := w.AuthHeader(); len(auth) > 0 {
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, auth)
	}
	var body []byte
	err := w.Probe(req, resp, m.cfg.Timeout)
	switch {
	case err != nil:
	case resp.StatusCode() != fasthttp.StatusOK:
		err = fmt.Errorf("%s%s returned %d", w.URL, pathMetrics, resp.StatusCode())
	case len(resp.Body()) > m.cfg.MaxEngineBody:
		err = fmt.Errorf("%s%s answered %d bytes, more than the %d kept", w.URL, pathMetrics, len(resp.Body()), m.cfg.MaxEngineBody)
	default:
		body = append([]byte(nil), resp.Body()...)
	}
	if err != nil {
		m.polls[sourceEngine+"error"].Inc()
		m.log.Debug("Engine metrics poll failed", "worker", w.URL, "error", err)
	} else {
		m.polls[sourceEngine+"ok"].Inc()
	}
	m.mu.Lock()
	if body != nil {
		m.engine[w] = body
	} else {
		delete(m.engine, w)
	}
	m.mu.Unlock()
}

// WriteEngineMetrics writes, with --engine-metrics, the engines' own series from the last
// poll of each worker still registered (a removed worker's series go with it), every sample
// labelled worker="<url>", at most MaxEngineSeries samples (worker/enginemetrics). The
// gateway's metrics handler calls it after its own series. Without --engine-metrics it
// writes nothing.
func (m *Monitor) WriteEngineMetrics(w io.Writer) {
	if !m.cfg.EngineMetrics {
		return
	}
	type kept struct {
		url  string
		body []byte
	}
	var bodies []kept
	m.mu.Lock()
	for _, wk := range m.current().Workers {
		if body := m.engine[wk]; body != nil { // immutable once stored: parsed after unlocking
			bodies = append(bodies, kept{wk.URL, body})
		}
	}
	m.mu.Unlock()
	merged := enginemetrics.Merger{MaxSeries: m.cfg.MaxEngineSeries}
	for _, k := range bodies {
		merged.Add(k.url, k.body)
	}
	if merged.Dropped > 0 {
		m.engineDropped.Add(merged.Dropped)
	}
	_, _ = merged.WriteTo(w)
}
