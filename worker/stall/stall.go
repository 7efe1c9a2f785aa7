package stall

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/worker"
)

// Defaults of Config.
const (
	// DefaultMinSilence is --worker-stall-secs: the shortest silence that makes a worker
	// silent, whatever the fleet's typical time to first byte.
	DefaultMinSilence = 2 * time.Second
	// DefaultFactor is how many typical times to first byte a silence must also exceed.
	DefaultFactor = 8
	// DefaultInterval is the time between checks.
	DefaultInterval = 250 * time.Millisecond
	// DefaultProbeTimeout bounds a probe of a worker going silent. The probe is a GET /health
	// on a fresh connection when the pooled ones are busy: an engine's HTTP server answers it
	// in milliseconds even while its GPU is busy (SGLang and vLLM answer /health from the
	// API server's event loop), and a stopped process never does. It is shorter than the
	// health checker's 5 s because a probe that times out costs no worker: it only cuts the
	// requests that have waited the whole threshold for a first byte, and they are retried
	// elsewhere.
	DefaultProbeTimeout = time.Second
	// DefaultAlpha is the weight of one interval's mean in the typical time to first byte.
	DefaultAlpha = 0.1
)

// Config configures a Monitor. Start from DefaultConfig.
type Config struct {
	// MinSilence (--worker-stall-secs) is the shortest silence that makes a worker silent.
	// 0 turns stall detection off. Default 2 s.
	MinSilence time.Duration
	// Factor: a silence must also exceed Factor times the fleet's typical time to first byte.
	// At least 1. Default 8.
	Factor float64
	// Alpha is the weight of one interval's mean time to first byte in the typical one, in
	// (0, 1]. Default 0.1.
	Alpha float64
	// Interval is the time between checks. Default 250 ms.
	Interval time.Duration
	// ProbeTimeout bounds a probe of a worker going silent (started at half the threshold;
	// a probe gets at most half the threshold, so that its verdict is known when the silence
	// reaches the threshold). Default 1 s.
	ProbeTimeout time.Duration
	// Probe asks a worker whether it answers at all. Nil: GET /health on its client, any HTTP
	// answer within the timeout counts.
	Probe func(ctx context.Context, w *worker.Worker, timeout time.Duration) bool
	// Clock ticks the checks and tells their time (Nanos, the unit of the workers' stamps).
	// Required; DefaultConfig sets clock.Real.
	Clock clock.Clock
	// Metrics receives smg_worker_stalls_total. Required; DefaultConfig sets a private set.
	Metrics *metrics.Set
	// Logger is required; DefaultConfig sets slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults above, with the real clock, a private metrics set and the
// default logger.
func DefaultConfig() Config {
	return Config{MinSilence: DefaultMinSilence, Factor: DefaultFactor, Alpha: DefaultAlpha,
		Interval: DefaultInterval, ProbeTimeout: DefaultProbeTimeout,
		Clock: clock.Real{}, Metrics: metrics.NewSet(), Logger: slog.Default()}
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	switch {
	case c.MinSilence < 0:
		return fmt.Errorf("--worker-stall-secs %v: give a positive number of seconds, or 0 to turn stall detection off (default %v)", c.MinSilence.Seconds(), DefaultMinSilence.Seconds())
	case c.Factor < 1:
		return fmt.Errorf("stall factor %v: give 1 or more (default %d)", c.Factor, DefaultFactor)
	case c.Alpha <= 0 || c.Alpha > 1:
		return fmt.Errorf("stall alpha %v: give a weight in (0, 1] (default %v)", c.Alpha, DefaultAlpha)
	case c.Interval <= 0:
		return fmt.Errorf("stall check interval %v: give a positive duration (default %v)", c.Interval, DefaultInterval)
	case c.ProbeTimeout <= 0:
		return fmt.Errorf("stall probe timeout %v: give a positive duration (default %v)", c.ProbeTimeout, DefaultProbeTimeout)
	}
	return worker.CheckCollaborators("stall", c.Clock, c.Metrics, c.Logger)
}

// Monitor marks the workers that stopped answering (see the package documentation).
type Monitor struct {
	cfg     Config
	log     *slog.Logger
	current func() *worker.Snapshot
	// typical is the fleet's typical time to first byte, in nanoseconds; 0 until measured.
	typical float64
	probes  map[*worker.Worker]*probe
	// answering counts the workers that answer per group, at the last check.
	answering map[group]int
	silent    *metrics.Counter
	cut       *metrics.Counter
	ctx       context.Context
	// probing counts the probes under way (tests wait for them).
	probing sync.WaitGroup
}

// probe is the last probe of one worker.
type probe struct {
	started int64 // Clock.Nanos
	done    atomic.Bool
	alive   atomic.Bool
}

// New returns a Monitor over the workers of the snapshots current returns.
func New(cfg Config, current func() *worker.Snapshot) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Probe == nil {
		cfg.Probe = httpProbe
	}
	return &Monitor{cfg: cfg, log: cfg.Logger, current: current, probes: map[*worker.Worker]*probe{},
		silent: cfg.Metrics.GetOrCreateCounter(`smg_worker_stalls_total{state="silent"}`),
		cut:    cfg.Metrics.GetOrCreateCounter(`smg_worker_stalls_total{state="unresponsive"}`),
		ctx:    context.Background()}, nil
}

// Run checks every Interval until ctx is done. With MinSilence 0 it returns at once.
func (m *Monitor) Run(ctx context.Context) {
	if m.cfg.MinSilence == 0 {
		return
	}
	m.ctx = ctx
	t := m.cfg.Clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Check(m.cfg.Clock.Nanos())
		}
	}
}

// Threshold is the silence past which a worker is silent.
func (m *Monitor) Threshold() time.Duration {
	return max(m.cfg.MinSilence, time.Duration(m.cfg.Factor*m.typical))
}

// Check applies the rule at now (Clock.Nanos). Run calls it every Interval.
func (m *Monitor) Check(now int64) {
	snap := m.current()
	if snap == nil {
		return
	}
	m.learn(snap)
	limit := m.Threshold()
	m.countAnswering(snap, now, limit)
	for _, w := range snap.Workers {
		m.checkWorker(w, now, limit)
	}
	for w := range m.probes {
		if snap.ByID(w.ID) != w {
			delete(m.probes, w)
		}
	}
}

// learn folds the times to first byte measured since the last check into the typical one.
func (m *Monitor) learn(snap *worker.Snapshot) {
	var sum time.Duration
	var n int64
	for _, w := range snap.Workers {
		s, k := w.TakeFirstByteTimes()
		sum, n = sum+s, n+k
	}
	if n == 0 {
		return
	}
	mean := float64(sum) / float64(n)
	if m.typical == 0 {
		m.typical = mean
	} else {
		m.typical += m.cfg.Alpha * (mean - m.typical)
	}
}

// group is the set of workers a worker's requests could go to instead: those of its type
// (a PD leg picks among its own type) serving the same model. Model "" stands for the
// workers whose model is unknown, which serve any model no worker declares and take part in
// every model's route of their type (policy.Router's grouping).
type group struct{ typ, model string }

// countAnswering counts, per group, the ready workers that answer at now (answers).
func (m *Monitor) countAnswering(snap *worker.Snapshot, now int64, limit time.Duration) {
	if m.answering == nil {
		m.answering = map[group]int{}
	}
	clear(m.answering)
	// Runs of workers in the same group (a fleet serving one model is one run) are counted
	// before they are added: a map update per run, not per worker, every Interval.
	var run group
	n := 0
	count := func(g group) {
		if n > 0 && g == run {
			n++
			return
		}
		if n > 0 {
			m.answering[run] += n
		}
		run, n = g, 1
	}
	for _, w := range snap.Workers {
		if !answers(w, now, limit) {
			continue
		}
		if len(w.Models) == 0 {
			count(group{w.Type(), ""})
		}
		for _, model := range w.Models {
			count(group{w.Type(), model})
		}
	}
	if n > 0 {
		m.answering[run] += n
	}
}

// answers reports whether w counts as answering at now: ready, not stalled, and not silent
// past limit.
func answers(w *worker.Worker, now int64, limit time.Duration) bool {
	return w.Ready() && w.StallState() == worker.StallNone && w.Silence(now) <= limit
}

// othersAnswer reports whether every model w serves has another worker that answers (w
// itself is not counted): only then may w be kept from new requests. The lone worker of a
// model keeps its requests, whatever other models' workers do.
func (m *Monitor) othersAnswer(w *worker.Worker, now int64, limit time.Duration) bool {
	self := 0
	if answers(w, now, limit) {
		self = 1
	}
	unknown := m.answering[group{w.Type(), ""}]
	if len(w.Models) == 0 {
		return unknown-self > 0
	}
	for _, model := range w.Models {
		if m.answering[group{w.Type(), model}]-self+unknown == 0 {
			return false
		}
	}
	return true
}

// probedInSilence reports whether p started during the silence w shows at now (a probe from
// before the worker's last first byte says nothing about this silence).
func probedInSilence(p *probe, now int64, silence time.Duration) bool {
	return p != nil && p.started >= now-int64(silence)
}

func (m *Monitor) checkWorker(w *worker.Worker, now int64, limit time.Duration) {
	silence := w.Silence(now)
	state := w.StallState()
	if state == worker.StallNone && (silence <= limit/2 || !w.Ready()) {
		return // most workers, every Interval: no map lookup
	}
	p := m.probes[w]
	switch state {
	case worker.StallNone:
		if !m.othersAnswer(w, now, limit) {
			return
		}
		if !probedInSilence(p, now, silence) {
			// Half the threshold: probe now, so that its answer (or its timeout) is known
			// by the time the silence reaches the threshold.
			m.startProbe(w, now)
			return
		}
		if silence <= limit || !w.CompareAndSetStallState(worker.StallNone, worker.StallSilent) {
			return
		}
		m.silent.Inc()
		m.log.Warn("Worker stopped answering: no new requests until it does", "worker", w.URL,
			"waiting", w.Waiting(), "silence", silence.Round(time.Millisecond), "threshold", limit.Round(time.Millisecond))
		m.cutIfUnanswered(w, p, silence)
		return
	case worker.StallSilent:
		if probedInSilence(p, now, silence) && m.cutIfUnanswered(w, p, silence) {
			break
		}
		if silence <= limit && w.CompareAndSetStallState(worker.StallSilent, worker.StallNone) {
			m.log.Info("Worker answers again", "worker", w.URL)
			return
		}
	case worker.StallUnresponsive:
		if p != nil && p.done.Load() && p.alive.Load() && w.CompareAndSetStallState(worker.StallUnresponsive, worker.StallSilent) {
			m.log.Info("Worker answers a probe again", "worker", w.URL)
			if silence <= limit && w.CompareAndSetStallState(worker.StallSilent, worker.StallNone) {
				m.log.Info("Worker answers again", "worker", w.URL)
				return
			}
		}
	}
	// Still stalled: probe again once the last probe ended and MinSilence has passed since it
	// started.
	if p == nil || p.done.Load() && time.Duration(now-p.started) >= m.cfg.MinSilence {
		m.startProbe(w, now)
	}
}

// cutIfUnanswered makes a silent worker whose probe p ended unanswered unresponsive: the
// requests waiting on it are cut. It reports whether it did.
func (m *Monitor) cutIfUnanswered(w *worker.Worker, p *probe, silence time.Duration) bool {
	if p == nil || !p.done.Load() || p.alive.Load() || !w.CompareAndSetStallState(worker.StallSilent, worker.StallUnresponsive) {
		return false
	}
	m.cut.Inc()
	m.log.Warn("Worker does not answer a probe either: cutting the requests waiting on it", "worker", w.URL,
		"waiting", w.Waiting(), "silence", silence.Round(time.Millisecond), "probe_timeout", min(m.cfg.ProbeTimeout, m.Threshold()/2))
	return true
}

func (m *Monitor) startProbe(w *worker.Worker, now int64) {
	if p := m.probes[w]; p != nil && !p.done.Load() {
		return
	}
	p := &probe{started: now}
	m.probes[w] = p
	timeout := min(m.cfg.ProbeTimeout, m.Threshold()/2)
	m.probing.Add(1)
	go func() {
		defer m.probing.Done()
		p.alive.Store(m.cfg.Probe(m.ctx, w, timeout))
		p.done.Store(true)
	}()
}

// httpProbe asks for GET /health on w's client: any HTTP answer says the worker's server
// reads and answers. A fresh connection is dialled when the pooled ones are busy with the
// requests that wait.
func httpProbe(_ context.Context, w *worker.Worker, timeout time.Duration) bool {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI("/health")
	w.Address(req)
	return w.Client.DoTimeout(req, resp, timeout) == nil
}
