package loadmon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
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
}

// New validates cfg and returns a Monitor over the snapshots current returns.
func New(cfg Config, current func() *worker.Snapshot) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fillDefaults()
	m := &Monitor{cfg: cfg, log: cfg.Logger, current: current, prefer: map[*worker.Worker]string{}, polls: map[string]*metrics.Counter{}}
	for _, src := range []string{SourceLoads, SourceMetrics} {
		for _, outcome := range []string{"ok", "error"} {
			m.polls[src+outcome] = cfg.Metrics.GetOrCreateCounter(
				`smg_load_monitor_polls_total{source=` + promlabel.Quote(src) + `,outcome=` + promlabel.Quote(outcome) + `}`)
		}
	}
	return m, nil
}

// Run polls every Interval until ctx is done. The first round starts at once.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if m.active() {
			m.PollOnce(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Monitor) active() bool {
	return !m.cfg.Disable || m.cfg.Overload.Enabled || (m.cfg.Required != nil && m.cfg.Required())
}

// PollOnce polls every registered worker once, at most Concurrency at a time, publishes the
// reports, and drops reports older than MaxReportAge of workers that did not answer. It
// returns when the round is done.
func (m *Monitor) PollOnce(ctx context.Context) {
	snap := m.current()
	ws := snap.Workers
	m.forget(ws)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(m.cfg.Concurrency, len(ws)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ws) || ctx.Err() != nil {
					return
				}
				m.poll(ws[i])
			}
		}()
	}
	wg.Wait()
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
	r, err := m.fetch(w, first)
	src := first
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
	w.SetLoad(r)
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
	if err := w.Client.DoTimeout(req, resp, m.cfg.Timeout); err != nil {
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
