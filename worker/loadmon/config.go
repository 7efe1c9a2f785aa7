package loadmon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/enginemetrics"
	"github.com/smg-go/smg/worker"
)

// Defaults.
const (
	// DefaultInterval is --load-monitor-interval.
	DefaultInterval = 10 * time.Second
	// StaleIntervals is how many intervals a report outlives its last successful poll by
	// default, tolerating a couple of missed or slow polls (as the spec product does).
	StaleIntervals = 3
	// DefaultConcurrency bounds the polls in flight at once.
	DefaultConcurrency = 32
	// DefaultTimeout bounds one poll (capped at the interval).
	DefaultTimeout = 5 * time.Second
	// DefaultMaxEngineBody bounds the /metrics body kept per worker with --engine-metrics.
	DefaultMaxEngineBody = 4 << 20
)

// Config configures a Monitor.
type Config struct {
	// Interval (--load-monitor-interval) is the time between polling rounds. Default 10 s.
	Interval time.Duration
	// Disable (--disable-load-monitoring) stops polling unless Required says a load-aware
	// policy needs the reports (spec: cache_aware, least_load and power_of_two keep polling).
	Disable bool
	// Required reports whether a load-aware policy is in use; consulted only when Disable is
	// set. Nil: nothing requires the reports.
	Required func() bool
	// MaxReportAge drops a worker's report once this long has passed since it was received
	// and no newer one came: the worker falls back to the in-flight signal instead of routing
	// on an old picture. Positive; WithInterval sets it to StaleIntervals × Interval.
	MaxReportAge time.Duration
	// Timeout bounds one poll. Positive; WithInterval sets it to min(5 s, Interval).
	Timeout time.Duration
	// Concurrency bounds the polls in flight (default DefaultConcurrency; at least 1).
	Concurrency int
	// Clock stamps and ages reports. Required; DefaultConfig sets clock.Real.
	Clock clock.Clock
	// Overload is overload protection: workers whose report passes its limits are vetoed.
	Overload OverloadConfig
	// EngineMetrics (--engine-metrics) also polls each worker's Prometheus /metrics every
	// round and keeps it for WriteEngineMetrics, which re-exports the engines' series on the
	// gateway's metrics port with a worker label. Polling then runs even with Disable.
	EngineMetrics bool
	// MaxEngineSeries bounds the re-exported engine samples, all workers together; the rest
	// are dropped and counted. Default 50,000; at least 1 with EngineMetrics.
	MaxEngineSeries int
	// MaxEngineBody bounds the /metrics body kept per worker, in bytes; a larger one is not
	// kept (and counted as a failed poll). Default 4 MiB; at least 1 with EngineMetrics.
	MaxEngineBody int
	// GRPCLoads asks a gRPC worker (grpc://) for its load: the engine's GetLoads RPC within
	// ctx's deadline, as /v1/loads reports it. Nil: gRPC workers are polled over HTTP.
	GRPCLoads func(ctx context.Context, w *worker.Worker) (*worker.LoadReport, error)
	// Metrics receives smg_load_monitor_polls_total. Required; DefaultConfig sets a private
	// set.
	Metrics *metrics.Set
	// Logger is required; DefaultConfig sets slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the spec's defaults: polling every DefaultInterval (reports kept
// StaleIntervals intervals, polls bounded by DefaultTimeout), overload protection off with its
// default limits, the real clock, a private metrics set and the default logger.
func DefaultConfig() Config {
	return Config{
		Concurrency: DefaultConcurrency,
		// Used only with EngineMetrics.
		MaxEngineSeries: enginemetrics.DefaultMaxSeries,
		MaxEngineBody:   DefaultMaxEngineBody,
		Overload:        OverloadConfig{WaitingRequests: DefaultOverloadWaitingRequests, TokenUsage: DefaultOverloadTokenUsage},
		Clock:           clock.Real{},
		Metrics:         metrics.NewSet(),
		Logger:          slog.Default(),
	}.WithInterval(DefaultInterval)
}

// WithInterval returns c polling every d, with the settings that follow the interval set to
// match: MaxReportAge StaleIntervals × d, Timeout min(DefaultTimeout, d). Change Interval
// through it (cmd/smg does for --load-monitor-interval).
func (c Config) WithInterval(d time.Duration) Config {
	c.Interval, c.MaxReportAge, c.Timeout = d, StaleIntervals*d, min(DefaultTimeout, d)
	return c
}

// OverloadConfig is overload protection (--worker-overload-*): a worker whose latest load
// report shows WaitingRequests or more waiting requests, or a KV-cache usage of TokenUsage or
// more, takes no new requests under any policy until a report shows it below both.
type OverloadConfig struct {
	// Enabled is --worker-overload-protection.
	Enabled bool
	// WaitingRequests is --worker-overload-waiting-requests (default 128; 0: no queue limit).
	WaitingRequests int
	// TokenUsage is --worker-overload-token-usage, a fraction (default 0.98; 0: no KV limit).
	TokenUsage float64
}

// Defaults of OverloadConfig.
const (
	DefaultOverloadWaitingRequests = 128
	DefaultOverloadTokenUsage      = 0.98
)

// vetoes reports whether r passes the overload limits.
func (o OverloadConfig) vetoes(r *worker.LoadReport) bool {
	if !o.Enabled || r == nil {
		return false
	}
	return (o.WaitingRequests > 0 && r.WaitingRequests >= o.WaitingRequests) ||
		(o.TokenUsage > 0 && r.TokenUsage >= o.TokenUsage)
}

// Validate reports a setting out of range.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("--load-monitor-interval is %v s: give a positive number of seconds (default %v)", c.Interval.Seconds(), DefaultInterval.Seconds())
	case c.MaxReportAge <= 0:
		return fmt.Errorf("load report max age is %v: give a positive duration (Config.WithInterval sets %d intervals)", c.MaxReportAge, StaleIntervals)
	case c.Timeout <= 0:
		return fmt.Errorf("load poll timeout is %v: give a positive duration (Config.WithInterval sets min(%v, the interval))", c.Timeout, DefaultTimeout)
	case c.Overload.WaitingRequests < 0:
		return fmt.Errorf("--worker-overload-waiting-requests %d: give 0 (no limit) or a positive count", c.Overload.WaitingRequests)
	case c.Overload.TokenUsage < 0 || c.Overload.TokenUsage > 1:
		return fmt.Errorf("--worker-overload-token-usage %v: give a fraction from 0 to 1 (0: no limit)", c.Overload.TokenUsage)
	case c.EngineMetrics && (c.MaxEngineSeries < 1 || c.MaxEngineBody < 1):
		return fmt.Errorf("engine metrics bounds are %d series and %d bytes: give positive bounds (defaults %d and %d)", c.MaxEngineSeries, c.MaxEngineBody, enginemetrics.DefaultMaxSeries, DefaultMaxEngineBody)
	case c.Concurrency < 1:
		return fmt.Errorf("load poll concurrency is %d: give a positive count (default %d)", c.Concurrency, DefaultConcurrency)
	}
	return worker.CheckCollaborators("loadmon", c.Clock, c.Metrics, c.Logger)
}
