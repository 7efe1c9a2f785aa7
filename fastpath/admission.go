package fastpath

import (
	"fmt"
	"sync/atomic"
	"time"
)

// AdmissionConfig limits the generation requests the gateway serves at once and per second.
type AdmissionConfig struct {
	// MaxConcurrent caps generation requests in flight (--max-concurrent-requests); past it
	// requests wait in a queue. 0 or negative: no cap.
	MaxConcurrent int
	// QueueSize is how many requests may wait for a slot (--queue-size); past it they get
	// 429 admission_queue_full. Default 100; 0: none waits.
	QueueSize int
	// QueueTimeout is how long a request may wait (--queue-timeout-secs); then it gets 503
	// admission_queue_timeout. Default 60 s.
	QueueTimeout time.Duration
	// RatePerSecond admits at most this many generation requests per second, with bursts of
	// one second's worth (--rate-limit-tokens-per-second); past it: 429 rate_limit_exceeded.
	// 0: no limit.
	RatePerSecond float64
}

// DefaultAdmissionConfig: no cap on concurrent requests, no rate limit; with a cap, 100
// requests may wait 60 s each.
func DefaultAdmissionConfig() AdmissionConfig {
	return AdmissionConfig{MaxConcurrent: -1, QueueSize: DefaultQueueSize, QueueTimeout: DefaultQueueTimeout}
}

// Defaults of AdmissionConfig.
const (
	DefaultQueueSize    = 100
	DefaultQueueTimeout = 60 * time.Second
)

// Validate names the flag of the first invalid setting.
func (c *AdmissionConfig) Validate() error {
	switch {
	case c.QueueSize < 0:
		return fmt.Errorf("--queue-size %d: must be >= 0", c.QueueSize)
	case c.QueueTimeout <= 0:
		return fmt.Errorf("--queue-timeout-secs: must be positive (default %v)", DefaultQueueTimeout.Seconds())
	case c.RatePerSecond < 0:
		return fmt.Errorf("--rate-limit-tokens-per-second %v: must be >= 0 (0 turns the limit off)", c.RatePerSecond)
	}
	return nil
}

var (
	errQueueFull    = apiError{429, "rate_limit_error", "admission_queue_full"}
	errQueueTimeout = apiError{503, "service_unavailable", "admission_queue_timeout"}
	errRateLimited  = apiError{429, "rate_limit_error", "rate_limit_exceeded"}
)

// admission enforces AdmissionConfig without a lock: an atomic count of requests in flight,
// an atomic count of waiters, a channel that hands freed slots to waiters, and a GCRA rate
// limiter on one atomic word. Only a request that has to wait allocates (its timer).
type admission struct {
	limit   int64
	queue   int64
	timeout time.Duration
	active  atomic.Int64
	waiting atomic.Int64
	freed   chan struct{}

	interval int64 // ns between requests at the rate limit; 0: no rate limit
	burst    int64 // ns of credit a burst may use
	tat      atomic.Int64
	epoch    time.Time
}

func newAdmission(c AdmissionConfig) *admission {
	a := &admission{limit: int64(c.MaxConcurrent), queue: int64(c.QueueSize), timeout: c.QueueTimeout, epoch: time.Now()}
	if a.limit > 0 {
		a.freed = make(chan struct{}, a.limit)
	}
	if c.RatePerSecond > 0 {
		a.interval = int64(float64(time.Second) / c.RatePerSecond)
		a.burst = int64(time.Second)
	}
	return a
}

// admit takes a slot for one request, waiting in the queue if need be. ok false carries the
// error to answer; a request admitted must call release exactly once.
func (a *admission) admit() (apiError, bool) {
	if a.interval > 0 && !a.allowRate() {
		return errRateLimited, false
	}
	if a.limit <= 0 {
		return apiError{}, true
	}
	if a.active.Add(1) <= a.limit {
		return apiError{}, true
	}
	a.active.Add(-1)
	if a.waiting.Add(1) > a.queue {
		a.waiting.Add(-1)
		return errQueueFull, false
	}
	defer a.waiting.Add(-1)
	timer := time.NewTimer(a.timeout)
	defer timer.Stop()
	for {
		if a.active.Add(1) <= a.limit {
			return apiError{}, true
		}
		a.active.Add(-1)
		select {
		case <-a.freed:
		case <-timer.C:
			return errQueueTimeout, false
		}
	}
}

// Outcomes of tryAdmit.
const (
	admitted = iota
	admitRefused
	admitMustQueue
)

// tryAdmit is admit for a caller that cannot wait (an event loop): the request is admitted,
// refused (the error to answer), or must queue, in which case nothing was taken (its rate
// credit is handed back) and the caller hands it to a goroutine that calls admit.
func (a *admission) tryAdmit() (apiError, int) {
	if a.interval > 0 && !a.allowRate() {
		return errRateLimited, admitRefused
	}
	if a.limit <= 0 || a.active.Add(1) <= a.limit {
		return apiError{}, admitted
	}
	a.active.Add(-1)
	if a.interval > 0 {
		a.tat.Add(-a.interval)
	}
	return apiError{}, admitMustQueue
}

// release frees a slot and wakes one waiter, if any.
func (a *admission) release() {
	if a.limit <= 0 {
		return
	}
	a.active.Add(-1)
	if a.waiting.Load() > 0 {
		select {
		case a.freed <- struct{}{}:
		default:
		}
	}
}

// allowRate is the generic cell rate algorithm: each request pushes the theoretical arrival
// time one interval further; a request is refused while that time runs more than a burst
// ahead of now.
func (a *admission) allowRate() bool {
	now := int64(time.Since(a.epoch))
	for {
		tat := a.tat.Load()
		next := max(tat, now) + a.interval
		if next-now > a.burst {
			return false
		}
		if a.tat.CompareAndSwap(tat, next) {
			return true
		}
	}
}
