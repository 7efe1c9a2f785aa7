package fastpath

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/clock"
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
	// one second's worth or one request, whichever is more (--rate-limit-tokens-per-second);
	// past it: 429 rate_limit_exceeded. 0: no limit.
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

// admission enforces AdmissionConfig: an atomic count of requests in flight, an atomic count
// of waiters, and a GCRA rate limiter on one atomic word, none of which takes a lock on the
// way in. A request that has to wait parks on its event loop: a parkedWaiter in a
// mutex-guarded FIFO, to which release hands freed slots (no goroutine, no allocation); the
// loop's park timer bounds the wait (--queue-timeout-secs).
type admission struct {
	limit   int64
	queue   int64
	timeout time.Duration
	active  atomic.Int64
	waiting atomic.Int64 // every waiter (bounded by queue)

	parked     atomic.Int64 // the waiters in the FIFO
	mu         sync.Mutex   // guards the FIFO and its waiters' queued and granted
	head, tail *parkedWaiter

	interval int64        // ns between requests at the rate limit; 0: no rate limit
	burst    int64        // ns of credit a burst may use
	tat      atomic.Int64 // the rate limit's theoretical arrival time, on clock
	clock    clock.Clock
}

func newAdmission(c AdmissionConfig, clk clock.Clock) *admission {
	a := &admission{limit: int64(c.MaxConcurrent), queue: int64(c.QueueSize), timeout: c.QueueTimeout, clock: clk}
	if c.RatePerSecond > 0 {
		a.interval = int64(float64(time.Second) / c.RatePerSecond)
		a.burst = max(int64(time.Second), a.interval) // a rate below 1/s still lets one through
	}
	return a
}

// Outcomes of admitOrPark.
const (
	admitted = iota
	admitRefused
	admitParked
)

// parkedWaiter is a request waiting for an admission slot on an event loop: release hands
// it a freed slot (granted) and wakes its exchange (unpark). It lives in the request's
// loopExchange, reused from request to request.
type parkedWaiter struct {
	prev, next *parkedWaiter
	unpark     evloop.Unparker
	queued     bool // in the FIFO
	granted    bool // release gave it a slot, which it has not taken up yet (leave)
}

// admitOrPark takes a slot for one request, which must then call release exactly once, or
// refuses it (the error to answer), or parks it: queued as w, to be woken through unpark
// when release hands it a slot. The caller then parks its exchange for at most the
// queue timeout and, when it wakes for either reason, calls leave.
func (a *admission) admitOrPark(w *parkedWaiter, unpark evloop.Unparker) (apiError, int) {
	if a.interval > 0 && !a.allowRate() {
		return errRateLimited, admitRefused
	}
	if a.limit <= 0 || a.active.Add(1) <= a.limit {
		return apiError{}, admitted
	}
	a.active.Add(-1)
	if a.waiting.Add(1) > a.queue {
		a.waiting.Add(-1)
		return errQueueFull, admitRefused
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// parked is raised before the slot is tried again, and release lowers active before it
	// reads parked: a slot freed meanwhile is either taken here or handed to w.
	a.parked.Add(1)
	if a.active.Add(1) <= a.limit {
		a.parked.Add(-1)
		a.waiting.Add(-1)
		return apiError{}, admitted
	}
	a.active.Add(-1)
	w.unpark, w.queued, w.granted = unpark, true, false
	w.prev, w.next = a.tail, nil
	if a.tail != nil {
		a.tail.next = w
	} else {
		a.head = w
	}
	a.tail = w
	return apiError{}, admitParked
}

// leave ends a parked wait (the park timed out, the client left, or release woke it): it
// reports whether the request holds a slot, which it must then release exactly once; a
// waiter still queued is removed.
func (a *admission) leave(w *parkedWaiter) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.queued {
		a.unlink(w)
		return false
	}
	granted := w.granted
	w.granted, w.unpark = false, evloop.Unparker{}
	return granted
}

// unlink removes w from the FIFO.
func (a *admission) unlink(w *parkedWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		a.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		a.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	a.parked.Add(-1)
	a.waiting.Add(-1)
}

// grantParked hands free slots to the parked waiters, oldest first, and wakes them.
func (a *admission) grantParked() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for w := a.head; w != nil; w = a.head {
		if a.active.Add(1) > a.limit {
			a.active.Add(-1)
			return
		}
		a.unlink(w)
		w.granted = true
		w.unpark.Unpark() // posts to w's loop: it takes no lock of the admission's
	}
}

// release frees a slot and hands it to the oldest waiter, if any.
func (a *admission) release() {
	if a.limit <= 0 {
		return
	}
	a.active.Add(-1)
	if a.parked.Load() > 0 {
		a.grantParked()
	}
}

// allowRate is the generic cell rate algorithm: each request pushes the theoretical arrival
// time one interval further; a request is refused while that time runs more than a burst
// ahead of now.
func (a *admission) allowRate() bool {
	now := a.clock.Nanos()
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
