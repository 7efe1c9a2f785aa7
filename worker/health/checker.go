package health

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/worker"
)

// Registry is what the Checker needs of worker.Registry.
type Registry interface {
	// Current returns the latest snapshot.
	Current() *worker.Snapshot
	// SetStatus asks for a status change without blocking; a full queue drops it (the next
	// probe asks again).
	SetStatus(id string, s worker.Status) error
	// Remove unregisters a worker and returns once the change is published.
	Remove(ctx context.Context, id string) (*worker.Worker, error)
	// Subscribe runs fn on the registry's writer goroutine after every publication.
	Subscribe(fn func(*worker.Snapshot))
}

// Checker probes every registered worker on its schedule and drives its status. See the
// package documentation.
type Checker struct {
	cfg Config
	reg Registry
	log *slog.Logger

	// wake is signalled (without blocking) after every registry publication, so that a new
	// worker is probed at once rather than at the next scheduled round.
	wake chan struct{}

	// roundMu serialises rounds; it guards everything below.
	roundMu sync.Mutex
	entries map[*worker.Worker]*entry
	version uint64
	synced  bool
	due     []*entry

	runMu   sync.Mutex
	cancel  context.CancelFunc
	stopped chan struct{}

	// afterRound, when set (by tests, before Start), runs at the end of every round.
	afterRound func()
}

// entry is the Checker's record of one worker. Between rounds only the round owner touches
// it; during a round each due entry is handled by exactly one probe goroutine.
type entry struct {
	w       *worker.Worker
	set     Settings
	uri     string
	tracker Tracker
	next    time.Time // when the worker is due for its next probe
	series  *series
	// revision is the worker's settings revision set was computed from.
	revision uint64
	// fast is when a pending worker gets its next extra probe before next (zero: none), and
	// backoff the wait after that one; regular tells the probe of this round is one at the
	// interval (its failure counts) and not an extra one.
	fast    time.Time
	backoff time.Duration
	regular bool
	// phased is set once the worker's regular probes run in its phase (scheduleRegular).
	phased bool
}

// scheduleRegular sets the next regular probe after one at now: an interval later, except
// after the first, which comes at once on registration, when it is its phase's offset earlier
// (worker.Worker.PhaseOffset). A fleet registered together is probed at once, then each
// worker in its slice of the interval: never all in one burst.
func (e *entry) scheduleRegular(now time.Time) {
	e.next = now.Add(e.set.Interval)
	if !e.phased {
		e.phased = true
		e.next = e.next.Add(-e.w.PhaseOffset(e.set.Interval))
	}
}

// scheduleFast sets the next extra probe of a pending worker, the backoff's wait with jitter
// (75-100%, so that workers registered together spread out) from now, doubled each time up to
// the interval; none once it would come after the regular probe.
func (e *entry) scheduleFast(now time.Time, first time.Duration) {
	if e.backoff == 0 {
		e.backoff = first
	}
	d := e.backoff - time.Duration(rand.Int64N(int64(e.backoff)/4+1))
	e.backoff = min(2*e.backoff, e.set.Interval)
	if e.fast = now.Add(d); !e.fast.Before(e.next) {
		e.fast = time.Time{}
	}
}

// New validates cfg and returns a Checker over reg. Start runs it.
func New(cfg Config, reg Registry) (*Checker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fillDefaults()
	return &Checker{
		cfg:     cfg,
		reg:     reg,
		log:     cfg.Logger,
		wake:    make(chan struct{}, 1),
		entries: map[*worker.Worker]*entry{},
	}, nil
}

// ErrStarted is returned by Start on a Checker that is already running.
var ErrStarted = errors.New("health checker already started")

// Start runs the Checker on one goroutine until ctx is done or Stop is called. The first
// round starts at once.
func (c *Checker) Start(ctx context.Context) error {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.cancel != nil {
		return ErrStarted
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.stopped = make(chan struct{})
	c.reg.Subscribe(func(*worker.Snapshot) {
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	})
	go c.run(ctx, c.stopped)
	return nil
}

// Stop stops the Checker, waits for its goroutine and the probes in flight, and removes the
// per-worker series. The registry subscription stays but only signals a channel nobody reads.
func (c *Checker) Stop() {
	c.runMu.Lock()
	cancel, stopped := c.cancel, c.stopped
	c.runMu.Unlock()
	if cancel != nil {
		cancel()
		<-stopped
	}
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	for w, e := range c.entries {
		e.series.unregister(c.cfg.Metrics)
		delete(c.entries, w)
	}
	c.synced = false
}

func (c *Checker) run(ctx context.Context, stopped chan struct{}) {
	defer close(stopped)
	for {
		next := c.RunRound(ctx)
		var timer clock.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = c.cfg.Clock.NewTimer(next.Sub(c.cfg.Clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-c.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// RunRound probes, at most Concurrency at a time, every worker due at the clock's now, applies
// the results, and returns when they are applied: the time the next worker falls due (zero
// when no worker is probed). Workers not seen before are due at once. Start calls it; tests
// and the admin API may call it directly.
func (c *Checker) RunRound(ctx context.Context) time.Time {
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	now := c.cfg.Clock.Now()
	snap := c.reg.Current()
	c.sync(snap, now)

	due := c.due[:0]
	var next time.Time
	for _, w := range snap.Workers {
		e := c.entries[w]
		status := w.Status()
		switch {
		case status == worker.StatusDraining:
			continue
		case e.set.Disabled:
			if status == worker.StatusPending {
				c.setStatus(e, status, worker.StatusReady, nil)
			}
			continue
		case !e.next.After(now):
			e.regular = true
			due = append(due, e)
			e.scheduleRegular(now)
			if status == worker.StatusPending {
				e.scheduleFast(now, c.cfg.PendingBackoff)
			}
		case status == worker.StatusPending && !e.fast.IsZero() && !e.fast.After(now):
			e.regular = false
			due = append(due, e)
			e.scheduleFast(now, c.cfg.PendingBackoff)
		}
	}
	c.probeAll(ctx, due)
	for _, w := range snap.Workers { // after the probes: a pending worker that answered has no extra probe due
		e := c.entries[w]
		if w.Status() == worker.StatusDraining || e.set.Disabled {
			continue
		}
		if next.IsZero() || e.next.Before(next) {
			next = e.next
		}
		if !e.fast.IsZero() && e.fast.Before(next) {
			next = e.fast
		}
	}
	clear(due)
	c.due = due[:0]
	if c.afterRound != nil {
		c.afterRound()
	}
	return next
}

// sync matches the entries to the snapshot: series of departed workers are removed first,
// so that a worker re-registered under the same URL gets fresh ones.
func (c *Checker) sync(snap *worker.Snapshot, now time.Time) {
	if c.synced && snap.Version == c.version {
		return
	}
	c.synced, c.version = true, snap.Version
	for w, e := range c.entries {
		if snap.ByID(w.ID) != w {
			e.series.unregister(c.cfg.Metrics)
			delete(c.entries, w)
		}
	}
	for _, w := range snap.Workers {
		if e := c.entries[w]; e != nil {
			if rev := w.Revision(); rev != e.revision {
				// PATCH or PUT changed the worker's health overrides: the new settings apply
				// from its next probe, which moves earlier if the new interval is shorter.
				last := e.next.Add(-e.set.Interval)
				e.revision, e.set = rev, c.cfg.For(w.Spec().Health)
				e.uri = w.URL + e.set.Endpoint
				if soon := last.Add(e.set.Interval); e.next.After(soon) {
					e.next = soon
				}
			}
			continue
		}
		set := c.cfg.For(w.Spec().Health)
		c.entries[w] = &entry{
			w:        w,
			set:      set,
			uri:      w.URL + set.Endpoint,
			next:     now,
			revision: w.Revision(),
			series:   newSeries(c.cfg.Metrics, w),
		}
	}
}

// probeAll probes the due entries with at most Concurrency goroutines, which exit when the
// round is done: no goroutine outlives a round, none is started per probe.
func (c *Checker) probeAll(ctx context.Context, due []*entry) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c.cfg.Concurrency, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(due) || ctx.Err() != nil {
					return
				}
				c.check(ctx, due[i])
			}
		}()
	}
	wg.Wait()
}

// check probes one worker and applies the result.
func (c *Checker) check(ctx context.Context, e *entry) {
	var err error
	if e.w.Protocol() == worker.ProtocolGRPC && c.cfg.ProbeGRPC != nil {
		pctx, cancel := context.WithTimeout(ctx, e.set.Timeout)
		err = c.cfg.ProbeGRPC(pctx, e.w)
		cancel()
	} else {
		err = probe(e)
	}
	e.series.count(err == nil)
	cur := e.w.Status()
	if err == nil {
		e.fast = time.Time{} // it answers: probed at the interval from now on
	}
	if err != nil && !e.regular {
		// An extra probe of a pending worker: only a success counts, so that a worker that
		// never answers is failed after the same time as without them.
		c.log.Debug("Health check failed", "worker", e.w.URL, "error", err)
		return
	}
	next := e.tracker.Observe(cur, err == nil, e.set.Thresholds)
	if cur == worker.StatusPending && next == worker.StatusReady && len(e.w.Models) == 0 && c.cfg.LearnModels != nil &&
		c.cfg.LearnModels(ctx, e.w) {
		return // its replacement, which knows its models, is probed at once
	}
	if next == cur {
		if err != nil {
			c.log.Debug("Health check failed", "worker", e.w.URL, "failures", e.tracker.Failures(), "error", err)
		}
		return
	}
	if next == worker.StatusFailed && c.cfg.RemoveUnhealthy {
		c.log.Info("Removing failed worker", "worker", e.w.URL, "worker_id", e.w.ID,
			"failures", e.tracker.Failures(), "error", err)
		if _, rerr := c.reg.Remove(ctx, e.w.ID); rerr != nil && !errors.Is(rerr, worker.ErrNotFound) {
			c.log.Warn("Cannot remove failed worker; retrying at its next probe", "worker", e.w.URL, "error", rerr)
		}
		return
	}
	c.setStatus(e, cur, next, err)
}

// setStatus asks the registry for a status change and logs it.
func (c *Checker) setStatus(e *entry, from, to worker.Status, probeErr error) {
	switch {
	case to == worker.StatusReady:
		c.log.Info("Worker became healthy", "worker", e.w.URL, "from", from.String(), "successes", e.tracker.Successes())
	case from == worker.StatusReady:
		c.log.Info("Worker became unhealthy", "worker", e.w.URL, "to", to.String(), "failures", e.tracker.Failures(), "error", probeErr)
	default:
		c.log.Info("Worker health status changed", "worker", e.w.URL, "from", from.String(), "to", to.String(), "failures", e.tracker.Failures(), "error", probeErr)
	}
	if err := c.reg.SetStatus(e.w.ID, to); err != nil {
		c.log.Warn("Cannot change worker status; retrying at its next probe", "worker", e.w.URL, "to", to.String(), "error", err)
	}
}
