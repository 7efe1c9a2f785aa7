package health

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/worker"
)

// Defaults, as the spec product sets its flags.
const (
	// DefaultEndpoint is --health-check-endpoint.
	DefaultEndpoint = "/health"
	// DefaultInterval is --health-check-interval-secs.
	DefaultInterval = 60 * time.Second
	// DefaultTimeout is --health-check-timeout-secs.
	DefaultTimeout = 5 * time.Second
	// DefaultSuccessThreshold is --health-success-threshold.
	DefaultSuccessThreshold = 2
	// DefaultFailureThreshold is --health-failure-threshold.
	DefaultFailureThreshold = 3
	// DefaultConcurrency bounds the probes in flight at once.
	DefaultConcurrency = 64
	// FailedFactor: a worker is failed after FailedFactor × the failure threshold consecutive
	// failed probes, 12 at the defaults, which at the default 60 s interval is the spec's
	// "about 12 minutes" of sustained failure.
	FailedFactor = 4
	// DefaultPendingBackoff is the first wait before a pending worker is probed again, so that
	// an engine that starts after the gateway is used within about a second of answering.
	DefaultPendingBackoff = time.Second
)

// Config configures the Checker.
type Config struct {
	// Endpoint (--health-check-endpoint, default /health) is the path probed with GET.
	Endpoint string
	// Interval (--health-check-interval-secs, default 60 s) is the time between two probes
	// of a worker.
	Interval time.Duration
	// Timeout (--health-check-timeout-secs, default 5 s) bounds one probe.
	Timeout time.Duration
	// SuccessThreshold (--health-success-threshold, default 2) is how many probes in a row
	// must succeed to bring a not_ready or failed worker back to ready. A pending worker
	// needs one: registration in the spec product waits for the engine to answer once.
	SuccessThreshold int
	// FailureThreshold (--health-failure-threshold, default 3) is how many probes in a row
	// must fail to make a ready worker not_ready; FailedFactor times as many make it failed.
	FailureThreshold int
	// RemoveUnhealthy (--remove-unhealthy-workers, alias --worker-auto-recovery) removes a
	// worker from the registry when it becomes failed. The spec turns it on by default with
	// --service-discovery; cmd/smg applies that default when the flag is not given.
	RemoveUnhealthy bool
	// Disable (--disable-health-check) stops probing: pending workers become ready at once.
	// A worker whose spec sets health.disable_health_check=false is still probed.
	Disable bool
	// Concurrency bounds the probes in flight at once (default DefaultConcurrency; at least 1).
	Concurrency int
	// PendingBackoff is the first wait before probing a pending worker again after a failed
	// probe (default DefaultPendingBackoff); each further wait doubles up to Interval, with
	// jitter. These extra probes only make the worker ready: their failures do not count
	// toward failed, which the probes at Interval decide as for any worker.
	PendingBackoff time.Duration
	// LearnModels, when set, runs when a pending worker registered without models answers its
	// first probe: it asks the worker for its models and, if it learned some, replaces the
	// worker in the registry (worker.Registry.LearnModels) and returns true; the replacement,
	// pending too, is probed at once. false: the worker becomes ready as it is.
	LearnModels func(ctx context.Context, w *worker.Worker) bool
	// ProbeGRPC probes a gRPC worker (grpc://), which has no HTTP health route: the
	// engine's HealthCheck RPC within ctx's deadline (the worker's timeout); nil is
	// healthy. Nil: gRPC workers are probed over HTTP like the others.
	ProbeGRPC func(ctx context.Context, w *worker.Worker) error
	// Clock drives the probe schedule. Required; DefaultConfig sets clock.Real.
	Clock clock.Clock
	// Metrics receives smg_worker_health and smg_worker_health_checks_total. Required;
	// DefaultConfig sets a private set.
	Metrics *metrics.Set
	// Logger is required; DefaultConfig sets slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the spec product's defaults, with the real clock, a private metrics
// set and the default logger.
func DefaultConfig() Config {
	return Config{
		Endpoint:         DefaultEndpoint,
		Interval:         DefaultInterval,
		Timeout:          DefaultTimeout,
		SuccessThreshold: DefaultSuccessThreshold,
		FailureThreshold: DefaultFailureThreshold,
		Concurrency:      DefaultConcurrency,
		PendingBackoff:   DefaultPendingBackoff,
		Clock:            clock.Real{},
		Metrics:          metrics.NewSet(),
		Logger:           slog.Default(),
	}
}

// Validate reports a setting out of range, naming the flag to fix.
func (c Config) Validate() error {
	switch {
	case !strings.HasPrefix(c.Endpoint, "/"):
		return fmt.Errorf("--health-check-endpoint is %q: give a path starting with / (default %s)", c.Endpoint, DefaultEndpoint)
	case c.Interval <= 0:
		return fmt.Errorf("--health-check-interval-secs is %v s: give a positive number of seconds (default %v)", c.Interval.Seconds(), DefaultInterval.Seconds())
	case c.Timeout <= 0:
		return fmt.Errorf("--health-check-timeout-secs is %v s: give a positive number of seconds (default %v)", c.Timeout.Seconds(), DefaultTimeout.Seconds())
	case c.SuccessThreshold < 1:
		return fmt.Errorf("--health-success-threshold is %d: give a count of at least 1 (default %d)", c.SuccessThreshold, DefaultSuccessThreshold)
	case c.FailureThreshold < 1:
		return fmt.Errorf("--health-failure-threshold is %d: give a count of at least 1 (default %d)", c.FailureThreshold, DefaultFailureThreshold)
	case c.Concurrency < 1:
		return fmt.Errorf("health probe concurrency is %d: give a positive count (default %d)", c.Concurrency, DefaultConcurrency)
	case c.PendingBackoff <= 0:
		return fmt.Errorf("health pending backoff is %v: give a positive duration (start from health.DefaultConfig(): %v)", c.PendingBackoff, DefaultPendingBackoff)
	}
	return worker.CheckCollaborators("health", c.Clock, c.Metrics, c.Logger)
}

// Settings are the health-check settings of one worker: the gateway's, overridden by the
// health section of the worker's spec.
type Settings struct {
	Endpoint   string
	Interval   time.Duration
	Timeout    time.Duration
	Thresholds Thresholds
	Disabled   bool
}

// For returns the settings of a worker whose spec has the health override o (nil: none).
// Override fields that are unset, or out of range (ValidateOverride rejects those at
// registration), inherit the gateway's.
func (c Config) For(o *worker.HealthOverride) Settings {
	s := Settings{
		Endpoint:   c.Endpoint,
		Interval:   c.Interval,
		Timeout:    c.Timeout,
		Thresholds: Thresholds{Success: c.SuccessThreshold, Failure: c.FailureThreshold},
		Disabled:   c.Disable,
	}
	if o == nil {
		return s
	}
	if o.Endpoint != nil && strings.HasPrefix(*o.Endpoint, "/") {
		s.Endpoint = *o.Endpoint
	}
	if o.IntervalSecs != nil && *o.IntervalSecs > 0 {
		s.Interval = time.Duration(*o.IntervalSecs) * time.Second
	}
	if o.TimeoutSecs != nil && *o.TimeoutSecs > 0 {
		s.Timeout = time.Duration(*o.TimeoutSecs) * time.Second
	}
	if o.SuccessThreshold != nil && *o.SuccessThreshold > 0 {
		s.Thresholds.Success = *o.SuccessThreshold
	}
	if o.FailureThreshold != nil && *o.FailureThreshold > 0 {
		s.Thresholds.Failure = *o.FailureThreshold
	}
	if o.Disable != nil {
		s.Disabled = *o.Disable
	}
	return s
}

// ValidateOverride reports a worker spec's health section the gateway cannot use, in words
// for the client of POST /workers.
func ValidateOverride(o *worker.HealthOverride) error {
	if o == nil {
		return nil
	}
	positive := func(name string, v *int) error {
		if v != nil && *v < 1 {
			return fmt.Errorf("health.%s is %d: give a positive integer, or leave it out to use the gateway's setting", name, *v)
		}
		return nil
	}
	if o.Endpoint != nil && !strings.HasPrefix(*o.Endpoint, "/") {
		return fmt.Errorf("health.endpoint is %q: give a path starting with /", *o.Endpoint)
	}
	for _, f := range []struct {
		name string
		v    *int
	}{
		{"check_interval_secs", o.IntervalSecs},
		{"timeout_secs", o.TimeoutSecs},
		{"success_threshold", o.SuccessThreshold},
		{"failure_threshold", o.FailureThreshold},
	} {
		if err := positive(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// InitialStatus is the status to register a worker with: pending until its first successful
// probe, or ready at once when its health checks are disabled.
func (c Config) InitialStatus(spec *worker.Spec) worker.Status {
	if c.For(spec.Health).Disabled {
		return worker.StatusReady
	}
	return worker.StatusPending
}
