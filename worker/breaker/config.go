package breaker

import (
	"errors"
	"fmt"
	"time"

	"github.com/smg-go/smg/internal/clock"
)

// Defaults, as the spec product sets its flags.
const (
	// DefaultFailureThreshold is --cb-failure-threshold.
	DefaultFailureThreshold = 10
	// DefaultSuccessThreshold is --cb-success-threshold.
	DefaultSuccessThreshold = 3
	// DefaultTimeout is --cb-timeout-duration-secs: how long a breaker stays open.
	DefaultTimeout = 60 * time.Second
	// DefaultWindow is --cb-window-duration-secs: how long a fault counts toward the threshold.
	DefaultWindow = 120 * time.Second
)

// Limits that follow from the packed state word (see breaker.go) and the window ring.
const (
	// MaxProbes bounds MaxHalfOpenProbes and SuccessThreshold: both are 8-bit fields of the
	// state word.
	MaxProbes = 255
	// MaxFailureThreshold bounds FailureThreshold: a bucket counts at most 2^24-1 faults.
	MaxFailureThreshold = 1<<24 - 1
	// MinWindow keeps a window bucket (Window/10) at least 10 ms wide.
	MinWindow = 100 * time.Millisecond
	// MinTimeout is the breaker's time resolution: transitions are stamped in milliseconds.
	MinTimeout = time.Millisecond
)

// Config configures the breakers of all workers. The flags are registered in cmd/smg.
type Config struct {
	// FailureThreshold (--cb-failure-threshold, default 10) is how many faults, recorded
	// within Window and with no success after them, open a closed breaker.
	FailureThreshold int
	// SuccessThreshold (--cb-success-threshold, default 3) is how many successful half-open
	// probes close the breaker again.
	SuccessThreshold int
	// Timeout (--cb-timeout-duration-secs, default 60 s) is how long a breaker stays open
	// before it lets probes through (half-open).
	Timeout time.Duration
	// Window (--cb-window-duration-secs, default 120 s) bounds how long a fault counts
	// toward FailureThreshold: a fault older than Window never counts, and one younger than
	// 9/10 of Window always does (the window is a ring of ten buckets).
	Window time.Duration
	// MaxHalfOpenProbes bounds the requests a half-open breaker admits at once. Default
	// DefaultSuccessThreshold, and cmd/smg sets it to --cb-success-threshold: closing needs
	// that many successes anyway, and letting them run together makes recovery one round
	// trip instead of SuccessThreshold of them.
	MaxHalfOpenProbes int
	// Disabled (--disable-circuit-breaker) makes every breaker always closed and available;
	// outcomes are ignored.
	Disabled bool
	// Clock is the time of the breaker's own reads (AvailableNow, the state gauge of
	// NewMetrics), which must be the clock whose Nanos the callers pass to TryAcquire and
	// Record. Required; DefaultConfig sets clock.Real.
	Clock clock.Clock
}

// DefaultConfig returns the spec product's defaults.
func DefaultConfig() Config {
	return Config{
		FailureThreshold:  DefaultFailureThreshold,
		SuccessThreshold:  DefaultSuccessThreshold,
		Timeout:           DefaultTimeout,
		Window:            DefaultWindow,
		MaxHalfOpenProbes: DefaultSuccessThreshold,
		Clock:             clock.Real{},
	}
}

// Validate reports a setting out of range, naming the flag to fix.
func (c Config) Validate() error {
	switch {
	case c.FailureThreshold < 1 || c.FailureThreshold > MaxFailureThreshold:
		return fmt.Errorf("--cb-failure-threshold is %d: give a count from 1 to %d (default %d)",
			c.FailureThreshold, MaxFailureThreshold, DefaultFailureThreshold)
	case c.SuccessThreshold < 1 || c.SuccessThreshold > MaxProbes:
		return fmt.Errorf("--cb-success-threshold is %d: give a count from 1 to %d (default %d)",
			c.SuccessThreshold, MaxProbes, DefaultSuccessThreshold)
	case c.Timeout < MinTimeout:
		return fmt.Errorf("--cb-timeout-duration-secs is %v s: give at least %v s (default %v)",
			c.Timeout.Seconds(), MinTimeout.Seconds(), DefaultTimeout.Seconds())
	case c.Window < MinWindow:
		return fmt.Errorf("--cb-window-duration-secs is %v s: give at least %v s (default %v)",
			c.Window.Seconds(), MinWindow.Seconds(), DefaultWindow.Seconds())
	case c.MaxHalfOpenProbes < 1 || c.MaxHalfOpenProbes > MaxProbes:
		return fmt.Errorf("circuit breaker half-open probe limit is %d: give 1 to %d (start from breaker.DefaultConfig(); smg sets it to --cb-success-threshold)",
			c.MaxHalfOpenProbes, MaxProbes)
	case c.Clock == nil:
		return errors.New("circuit breaker needs a Clock: set one (breaker.DefaultConfig() sets clock.Real{})")
	}
	return nil
}

// settings is a validated Config in the units the breaker computes with.
type settings struct {
	failureThreshold uint64
	successThreshold uint64
	maxProbes        uint64
	timeoutMs        uint64
	bucketNs         uint64
	disabled         bool
	onTransition     func(from, to State)
	clock            clock.Clock
}

func newSettings(c Config, onTransition func(from, to State)) *settings {
	return &settings{
		clock:            c.Clock,
		failureThreshold: uint64(c.FailureThreshold),
		successThreshold: uint64(c.SuccessThreshold),
		maxProbes:        uint64(c.MaxHalfOpenProbes),
		timeoutMs:        uint64(c.Timeout / time.Millisecond),
		bucketNs:         uint64(c.Window / numBuckets),
		disabled:         c.Disabled,
		onTransition:     onTransition,
	}
}

// defaultSettings serve a Breaker whose Init was never called.
var defaultSettings = newSettings(DefaultConfig(), nil)
