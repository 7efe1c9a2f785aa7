package health

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
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

	// deltaMu guards the publications' changes the subscription records for the next round
	// while the Checker runs (listening); a Checker that is not running compares the whole
	// snapshot each round instead.
	deltaMu   sync.Mutex
	listening bool
	deltas    []versionedDelta
	subscribe sync.Once

	// roundMu serialises rounds; it guards everything below.
	roundMu  sync.Mutex
	entries  map[*worker.Worker]*entry
	schedule schedule // the probed entries by when they fall due
	version  uint64   // the snapshot version entries reflect
	synced   bool
	due      []*entry

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
	// at is when the entry falls due in the schedule (next, or fast when earlier); slot is
	// its place in the schedule, -1 when out of it (draining, disabled, or being probed).
	at   time.Time
	slot int
}

// versionedDelta is one publication's changes.
type versionedDelta struct {
	version uint64
	delta   worker.Delta
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
	c.deltaMu.Lock()
	c.listening = true
	c.deltaMu.Unlock()
	c.subscribe.Do(func() { c.reg.Subscribe(c.published) })
	go c.run(ctx, c.stopped)
	return nil
}

// published is the registry subscription: it records what the publication changed for the
// next round and wakes the Checker's goroutine.
func (c *Checker) published(s *worker.Snapshot) {
	c.deltaMu.Lock()
	if d := s.Delta(); c.listening && len(d.Joined)+len(d.Left)+len(d.Updated) > 0 {
		c.deltas = append(c.deltas, versionedDelta{s.Version, d})
	}
	c.deltaMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
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
	c.deltaMu.Lock()
	c.listening, c.deltas = false, nil
	c.deltaMu.Unlock()
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	for w, e := range c.entries {
		e.series.unregister(c.cfg.Metrics)
		delete(c.entries, w)
	}
	c.schedule.clear()
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
//
// A round costs what is due and what the publications since the last round changed, not the
// fleet's size: the entries wait in a schedule ordered by due time, and a running Checker
// learns the workers that joined, left or changed settings from each publication's
// worker.Delta.
func (c *Checker) RunRound(ctx context.Context) time.Time {
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	now := c.cfg.Clock.Now()
	c.sync(now)

	due := c.due[:0]
	for !c.schedule.empty() && !c.schedule.first().at.After(now) {
		e := c.schedule.pop()
		status := e.w.Status()
		switch {
		case status == worker.StatusDraining:
			// Out of the schedule for good: a draining worker only leaves.
		case e.set.Disabled:
			if status == worker.StatusPending {
				c.setStatus(e, status, worker.StatusReady, nil)
			}
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
		default: // due for an extra probe it no longer needs
			e.fast = time.Time{}
			c.reschedule(e)
		}
	}
	c.probeAll(ctx, due)
	for _, e := range due { // after the probes: a pending worker that answered has no extra probe due
		c.reschedule(e)
	}
	clear(due)
	c.due = due[:0]
	var next time.Time
	if !c.schedule.empty() {
		next = c.schedule.first().at
	}
	if c.afterRound != nil {
		c.afterRound()
	}
	return next
}

// reschedule puts e back in the schedule at its next probe, or its next extra one when
// earlier.
func (c *Checker) reschedule(e *entry) {
	e.at = e.next
	if !e.fast.IsZero() && e.fast.Before(e.at) {
		e.at = e.fast
	}
	c.schedule.set(e)
}

// sync brings the entries up to the registry: from the publications' deltas when the
// subscription recorded every one since the entries' version, else by comparing the whole
// current snapshot (the first round, or a Checker that is not running).
func (c *Checker) sync(now time.Time) {
	c.deltaMu.Lock()
	deltas, listening := c.deltas, c.listening
	c.deltas = nil
	c.deltaMu.Unlock()
	if !c.synced || !listening {
		c.syncAll(c.reg.Current(), now)
		return
	}
	for _, d := range deltas {
		if d.version <= c.version {
			continue // already in the snapshot syncAll read
		}
		c.version = d.version
		for _, w := range d.delta.Joined {
			c.add(w, now)
		}
		for _, w := range d.delta.Left {
			c.remove(w)
		}
		for _, w := range d.delta.Updated {
			if e := c.entries[w]; e != nil {
				c.resettle(e)
			}
		}
	}
}

// syncAll matches the entries to snap: series of departed workers are removed first, so that
// a worker re-registered under the same URL gets fresh ones.
func (c *Checker) syncAll(snap *worker.Snapshot, now time.Time) {
	if c.synced && snap.Version == c.version {
		return
	}
	c.synced, c.version = true, snap.Version
	for w := range c.entries {
		if snap.ByID(w.ID) != w {
			c.remove(w)
		}
	}
	for _, w := range snap.Workers {
		if e := c.entries[w]; e != nil {
			c.resettle(e)
			continue
		}
		c.add(w, now)
	}
}

// add makes an entry for a new worker, due at once.
func (c *Checker) add(w *worker.Worker, now time.Time) {
	if c.entries[w] != nil {
		return
	}
	set := c.cfg.For(w.Spec().Health)
	e := &entry{
		w:        w,
		set:      set,
		uri:      w.URL + set.Endpoint,
		next:     now,
		revision: w.Revision(),
		series:   newSeries(c.cfg.Metrics, w),
		slot:     -1,
	}
	c.entries[w] = e
	c.reschedule(e)
}

// remove drops a departed worker's entry and its series.
func (c *Checker) remove(w *worker.Worker) {
	e := c.entries[w]
	if e == nil {
		return
	}
	c.schedule.remove(e)
	e.series.unregister(c.cfg.Metrics)
	delete(c.entries, w)
}

// resettle applies a worker's new health overrides (PATCH or PUT) from its next probe, which
// moves earlier if the new interval is shorter.
func (c *Checker) resettle(e *entry) {
	rev := e.w.Revision()
	if rev == e.revision {
		return
	}
	last := e.next.Add(-e.set.Interval)
	e.revision, e.set = rev, c.cfg.For(e.w.Spec().Health)
	e.uri = e.w.URL + e.set.Endpoint
	if soon := last.Add(e.set.Interval); e.next.After(soon) {
		e.next = soon
	}
	if e.w.Status() != worker.StatusDraining {
		c.reschedule(e) // back in the schedule if it was disabled
	}
}

// probeAll probes the due entries with at most Concurrency goroutines, which exit when the
// round is done: no goroutine outlives a round, none is started per probe.
func (c *Checker) probeAll(ctx context.Context, due []*entry) {
	worker.ForEach(ctx, c.cfg.Concurrency, due, func(e *entry) { c.check(ctx, e) })
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
