package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
)

// Exporter takes every finished record after the metrics and the access log have read it
// (the OpenTelemetry tracer is one). It runs on the sink's goroutine, one record at a time,
// and must not keep r: the sink reuses it.
type Exporter interface {
	Export(r *Record)
}

// Config configures a Sink.
type Config struct {
	// QueueSize bounds the records handed over and not yet consumed. A record handed over
	// while the queue is full is dropped and counted (smg_telemetry_records_dropped_total):
	// the data plane never waits for telemetry.
	QueueSize int
	// AccessLog logs one INFO line per request (--disable-access-log turns it off).
	AccessLog bool
	// ErrorLinesPerSecond bounds the error-answer lines logged per error code and second;
	// the lines past it are counted, and a line each second says how many were suppressed.
	ErrorLinesPerSecond int
	// Metrics receives the per-model series. Logger receives the access and error lines.
	Metrics *metrics.Set
	Logger  *slog.Logger
	// Clock times the error lines' sampling windows.
	Clock clock.Clock
	// Exporters take each record after the metrics and the logs (the tracer).
	Exporters []Exporter
	// AdmissionLimits reports that the data plane's admission limits requests (a
	// concurrency cap or a rate limit): its decisions are then counted as
	// smg_http_rate_limit_total{result="allowed"|"rejected"}.
	AdmissionLimits bool
}

// Defaults of Config.
const (
	DefaultQueueSize           = 16384
	DefaultErrorLinesPerSecond = 10
)

// DefaultConfig returns the defaults: a 16,384-record queue, the access log on, at most 10
// error lines per error code and second, a new metrics set, the default logger and the
// real clock.
func DefaultConfig() Config {
	return Config{
		QueueSize:           DefaultQueueSize,
		AccessLog:           true,
		ErrorLinesPerSecond: DefaultErrorLinesPerSecond,
		Metrics:             metrics.NewSet(),
		Logger:              slog.Default(),
		Clock:               clock.Real{},
	}
}

// Validate reports a setting that cannot work, naming the fix.
func (c *Config) Validate() error {
	switch {
	case c.QueueSize < 1:
		return fmt.Errorf("telemetry queue size %d: give at least 1 (default %d)", c.QueueSize, DefaultQueueSize)
	case c.ErrorLinesPerSecond < 1:
		return fmt.Errorf("telemetry error lines per second %d: give at least 1 (default %d)", c.ErrorLinesPerSecond, DefaultErrorLinesPerSecond)
	case c.Metrics == nil || c.Logger == nil || c.Clock == nil:
		return errors.New("telemetry needs Metrics, Logger and Clock (start from DefaultConfig)")
	}
	for i, e := range c.Exporters {
		if e == nil {
			return fmt.Errorf("telemetry exporter %d is nil", i)
		}
	}
	return nil
}

// Sink takes the records of finished requests from the data plane and consumes them on one
// goroutine: the per-model metrics, the access log, the error lines, then the exporters.
// Submit never blocks and never allocates; it may be called from any goroutine.
type Sink struct {
	cfg     Config
	queue   chan Record
	dropped *metrics.Counter
	metrics *modelMetrics
	log     *requestLog
	stop    chan struct{}
	done    chan struct{}
	started bool
	once    sync.Once
}

// New returns a sink that consumes nothing until Start.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sink{
		cfg:     cfg,
		queue:   make(chan Record, cfg.QueueSize),
		dropped: cfg.Metrics.GetOrCreateCounter(`smg_telemetry_records_dropped_total`),
		metrics: newModelMetrics(cfg.Metrics, cfg.AdmissionLimits),
		log:     newRequestLog(cfg.Logger, cfg.AccessLog, cfg.ErrorLinesPerSecond),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}, nil
}

// Submit hands r over, copying it: false when the queue was full and r was dropped
// (counted). A nil sink takes nothing.
func (s *Sink) Submit(r *Record) bool {
	if s == nil {
		return false
	}
	select {
	case s.queue <- *r:
		return true
	default:
		s.dropped.Inc()
		return false
	}
}

// Start starts the consuming goroutine. Call it once, before Close.
func (s *Sink) Start() {
	s.started = true
	go s.run()
}

// Close consumes the records already handed over, then stops the goroutine. Records
// submitted after Close are not consumed.
func (s *Sink) Close() {
	if !s.started {
		return
	}
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (s *Sink) run() {
	defer close(s.done)
	window := s.cfg.Clock.NewTicker(samplingWindow)
	defer window.Stop()
	// The queue is polled, not waited on: a data plane's send then never has a parked
	// goroutine to wake (a futex call on the loop's thread per request otherwise).
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
			s.drain()
		case now := <-window.C():
			s.drain()
			s.log.flushSuppressed(now)
		case <-s.stop:
			s.drain()
			s.log.flushSuppressed(s.cfg.Clock.Now())
			return
		}
	}
}

// pollInterval is how often the sink takes what was handed over: at most this late, and
// the queue holds QueueSize records per interval (1.6 M a second by default).
const pollInterval = 10 * time.Millisecond

// drain consumes every record queued.
func (s *Sink) drain() {
	var r Record
	for {
		select {
		case r = <-s.queue:
			s.consume(&r)
		default:
			return
		}
	}
}

// consume feeds one record to every consumer.
func (s *Sink) consume(r *Record) {
	s.metrics.observe(r)
	s.log.record(r, s.cfg.Clock)
	for _, e := range s.cfg.Exporters {
		e.Export(r)
	}
}
