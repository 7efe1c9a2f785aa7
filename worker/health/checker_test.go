package health

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/worker"
)

// TestCheckerLifecycle drives one worker through every status with real probes: pending →
// ready → not_ready → failed, then either back to ready or removed.
func TestCheckerLifecycle(t *testing.T) {
	for _, remove := range []bool{false, true} {
		name := "keep failed"
		if remove {
			name = "remove failed"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RemoveUnhealthy = remove })
			fw := newFakeWorker(t)
			w := h.add(worker.Spec{URL: fw.url})
			if w.Status() != worker.StatusPending {
				t.Fatalf("registered %v, want pending", w.Status())
			}
			healthGauge := `smg_worker_health{worker="` + w.URL + `"}`
			failures := `smg_worker_health_checks_total{worker="` + w.URL + `",result="failure"}`
			successes := `smg_worker_health_checks_total{worker="` + w.URL + `",result="success"}`

			h.round(0) // a new worker is due at once
			h.waitStatus(w, worker.StatusReady)
			if got := h.metric(healthGauge); got != healthGauge+" 1" {
				t.Fatalf("ready worker exported as %q", got)
			}

			fw.healthy.Store(false)
			interval := h.checker.cfg.Interval
			h.round(interval)
			if w.Status() != worker.StatusReady {
				t.Fatalf("one failure of two made it %v", w.Status())
			}
			h.round(interval)
			h.waitStatus(w, worker.StatusNotReady)
			if got := h.metric(healthGauge); got != healthGauge+" 0" {
				t.Fatalf("not_ready worker exported as %q", got)
			}
			for i := 3; i < 8; i++ {
				h.round(interval)
				if w.Status() != worker.StatusNotReady {
					t.Fatalf("after %d failures: %v, want not_ready until 8", i, w.Status())
				}
			}
			h.round(interval) // the 8th: FailedFactor × 2
			if got := h.metric(failures); got != failures+" 8" {
				t.Fatalf("failure counter %q, want 8", got)
			}
			if got := h.metric(successes); got != successes+" 1" {
				t.Fatalf("success counter %q, want 1", got)
			}

			if remove {
				// Remove returns once the removal is published.
				if h.reg.Current().ByID(w.ID) != nil {
					t.Fatal("failed worker still registered with --remove-unhealthy-workers")
				}
				h.round(interval) // the next round drops the departed worker's series
				if out := h.exposition(); strings.Contains(out, w.URL) {
					t.Fatalf("series of a removed worker remain:\n%s", out)
				}
				if hits := fw.hits.Load(); hits != 9 {
					t.Fatalf("removed worker probed %d times, want 9", hits)
				}
				if !strings.Contains(h.logs.String(), "Removing failed worker") {
					t.Fatalf("no removal log line:\n%s", h.logs)
				}
				return
			}
			h.waitStatus(w, worker.StatusFailed)
			h.round(interval) // failed workers are still probed
			if w.Status() != worker.StatusFailed {
				t.Fatalf("failed worker became %v while still unhealthy", w.Status())
			}
			fw.healthy.Store(true)
			h.round(interval)
			if w.Status() != worker.StatusFailed {
				t.Fatalf("one success of two made a failed worker %v", w.Status())
			}
			h.round(interval)
			h.waitStatus(w, worker.StatusReady)
			logs := h.logs.String()
			for _, want := range []string{"Worker became healthy", "Worker became unhealthy", "Worker health status changed", w.URL} {
				if !strings.Contains(logs, want) {
					t.Fatalf("logs lack %q:\n%s", want, logs)
				}
			}
		})
	}
}

// TestCheckerPendingWorkerThatNeverAnswers: a worker that never answered is never ready and
// turns failed after sustained failure; its port refuses connections.
func TestCheckerPendingWorkerThatNeverAnswers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RemoveUnhealthy = true })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close() // the address now refuses connections
	w := h.add(worker.Spec{URL: "http://" + ln.Addr().String()})
	h.round(0)
	for i := 2; i < 8; i++ {
		h.round(time.Minute)
		if w.Status() != worker.StatusPending {
			t.Fatalf("after %d refused probes: %v, want pending", i, w.Status())
		}
	}
	h.round(time.Minute)
	if h.reg.Current().ByID(w.ID) != nil {
		t.Fatal("worker that never answered is still registered after 8 refused probes")
	}
}

func TestCheckerSendsAuthAndUsesOverrides(t *testing.T) {
	h := newHarness(t, nil)
	plain, keyed, custom := newFakeWorker(t), newFakeWorker(t), newFakeWorker(t)
	custom.path = "/ready"
	wp := h.add(worker.Spec{URL: plain.url})
	wk := h.add(worker.Spec{URL: keyed.url, APIKey: "sk-test"})
	wc := h.add(worker.Spec{URL: custom.url, Health: &worker.HealthOverride{
		Endpoint: ptr("/ready"), IntervalSecs: ptr(10), FailureThreshold: ptr(1),
	}})
	next := h.checker.RunRound(context.Background())
	h.waitStatus(wp, worker.StatusReady)
	h.waitStatus(wk, worker.StatusReady)
	h.waitStatus(wc, worker.StatusReady)
	if got := keyed.auth.Load(); got != "Bearer sk-test" {
		t.Fatalf("worker with an API key got Authorization %q", got)
	}
	if got := plain.auth.Load(); got != "" {
		t.Fatalf("worker without an API key got Authorization %q", got)
	}
	// The first regular probe after registration comes the worker's phase offset early.
	if want := h.clk.Now().Add(10*time.Second - wc.PhaseOffset(10*time.Second)); !next.Equal(want) {
		t.Fatalf("next round at %v, want the override's 10 s interval less its phase offset %v", next, want)
	}

	// 10 s later only the worker with the 10 s interval is due; its threshold of 1 makes
	// one failure enough.
	custom.healthy.Store(false)
	h.round(10 * time.Second)
	if plain.hits.Load() != 1 || keyed.hits.Load() != 1 || custom.hits.Load() != 2 {
		t.Fatalf("hits after 10 s: plain %d keyed %d custom %d, want 1 1 2", plain.hits.Load(), keyed.hits.Load(), custom.hits.Load())
	}
	h.waitStatus(wc, worker.StatusNotReady)
	h.round(50 * time.Second)
	if plain.hits.Load() != 2 || keyed.hits.Load() != 2 || custom.hits.Load() != 3 {
		t.Fatalf("hits after 60 s: plain %d keyed %d custom %d, want 2 2 3", plain.hits.Load(), keyed.hits.Load(), custom.hits.Load())
	}
}

func TestCheckerProbeTimeoutIsAFailure(t *testing.T) {
	// The healthy probe before the hang has the same timeout: long enough that a loaded machine
	// running -race answers it, since the hung probe fails whatever the timeout is.
	h := newHarness(t, func(c *Config) {
		c.Timeout = time.Second
		c.FailureThreshold = 1
	})
	fw := newFakeWorker(t)
	w := h.add(worker.Spec{URL: fw.url})
	h.round(0)
	h.waitStatus(w, worker.StatusReady)
	release := make(chan struct{})
	fw.onHealth = func() { <-release } // answers only after the probe gave up
	h.round(time.Minute)
	close(release)
	h.waitStatus(w, worker.StatusNotReady)
}

func TestCheckerSkipsDrainingAndPromotesDisabled(t *testing.T) {
	h := newHarness(t, nil)
	drained, off, on := newFakeWorker(t), newFakeWorker(t), newFakeWorker(t)
	wd := h.add(worker.Spec{URL: drained.url})
	if err := h.reg.SetStatus(wd.ID, worker.StatusDraining); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(wd, worker.StatusDraining)
	// Registered pending by a registrar that ignores InitialStatus: the checker promotes it.
	spec := worker.Spec{URL: off.url, Health: &worker.HealthOverride{Disable: ptr(true)}}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	woff, err := h.reg.Add(context.Background(), spec, worker.StatusPending)
	if err != nil {
		t.Fatal(err)
	}
	won := h.add(worker.Spec{URL: on.url})
	for range 3 {
		h.round(time.Minute)
	}
	h.waitStatus(woff, worker.StatusReady)
	h.waitStatus(won, worker.StatusReady)
	if drained.hits.Load() != 0 || off.hits.Load() != 0 || on.hits.Load() != 3 {
		t.Fatalf("hits: draining %d, disabled %d, checked %d; want 0 0 3", drained.hits.Load(), off.hits.Load(), on.hits.Load())
	}
	if wd.Status() != worker.StatusDraining {
		t.Fatalf("draining worker became %v", wd.Status())
	}
}

func TestCheckerGloballyDisabled(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Disable = true })
	off, on := newFakeWorker(t), newFakeWorker(t)
	woff := h.add(worker.Spec{URL: off.url})
	if woff.Status() != worker.StatusReady {
		t.Fatalf("with --disable-health-check a worker registers %v", woff.Status())
	}
	won := h.add(worker.Spec{URL: on.url, Health: &worker.HealthOverride{Disable: ptr(false)}})
	if next := h.checker.RunRound(context.Background()); next.IsZero() {
		t.Fatal("no next round although one worker opted in to checks")
	}
	h.waitStatus(won, worker.StatusReady)
	if off.hits.Load() != 0 || on.hits.Load() != 1 {
		t.Fatalf("hits: disabled %d, opted in %d; want 0 1", off.hits.Load(), on.hits.Load())
	}
}

// TestCheckerBoundsConcurrency holds every probe at the fake workers and releases them one
// at a time whenever the bound is reached: more than Concurrency probes may never be seen
// in flight, and the bound must be reached.
func TestCheckerBoundsConcurrency(t *testing.T) {
	const bound, workers = 3, 10
	h := newHarness(t, func(c *Config) { c.Concurrency = bound })
	var inFlight, peak atomic.Int32
	arrived := make(chan struct{}, workers)
	release := make(chan struct{})
	hold := func() {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		arrived <- struct{}{}
		<-release
		inFlight.Add(-1)
	}
	for range workers {
		fw := newFakeWorker(t)
		fw.onHealth = hold
		h.add(worker.Spec{URL: fw.url})
	}
	round := make(chan struct{})
	go func() {
		defer close(round)
		h.checker.RunRound(context.Background())
	}()
	timeout := time.After(deadline)
	for released := 0; released < workers; released++ {
		for want := min(bound, workers-released); inFlight.Load() < int32(want); {
			select {
			case <-arrived:
			case <-timeout:
				t.Fatalf("only %d probes arrived", inFlight.Load())
			}
		}
		release <- struct{}{}
	}
	<-round
	if got := peak.Load(); got != bound {
		t.Fatalf("peak of %d probes in flight, bound %d", got, bound)
	}
	noLeak(t) // the round's goroutines are gone once it returns
}

// TestCheckerRunsOnItsClock runs the real loop: a new worker is probed at once (woken by the
// registry), later probes happen when the fake clock passes the interval, and Stop leaves no
// goroutine or series behind.
func TestCheckerRunsOnItsClock(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FailureThreshold = 1 })
	if err := h.checker.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.checker.Start(context.Background()); err != ErrStarted {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	fw := newFakeWorker(t)
	w := h.add(worker.Spec{URL: fw.url})
	h.waitStatus(w, worker.StatusReady)

	fw.healthy.Store(false)
	h.clk.Advance(h.checker.cfg.Interval)
	h.waitStatus(w, worker.StatusNotReady)
	fw.healthy.Store(true)
	h.clk.Advance(h.checker.cfg.Interval)
	h.waitFor("a success probe", func() bool { return fw.hits.Load() >= 3 })
	h.clk.Advance(h.checker.cfg.Interval)
	h.waitStatus(w, worker.StatusReady)

	h.checker.Stop()
	h.checker.Stop() // idempotent
	noLeak(t)
	if out := h.exposition(); strings.Contains(out, w.URL) {
		t.Fatalf("series remain after Stop:\n%s", out)
	}
}

func TestCheckerStopsWithItsContext(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.checker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.add(worker.Spec{URL: newFakeWorker(t).url})
	cancel()
	h.checker.Stop() // returns because the loop saw the cancellation
	noLeak(t)
}

// TestCheckerReregisteredURLGetsFreshSeries: a worker removed and registered again under the
// same URL is a new worker: new counters, probed at once.
func TestCheckerReregisteredURLGetsFreshSeries(t *testing.T) {
	h := newHarness(t, nil)
	fw := newFakeWorker(t)
	w1 := h.add(worker.Spec{URL: fw.url})
	h.round(0)
	h.round(time.Minute)
	successes := `smg_worker_health_checks_total{worker="` + w1.URL + `",result="success"}`
	if got := h.metric(successes); got != successes+" 2" {
		t.Fatalf("%q, want 2", got)
	}
	if _, err := h.reg.Remove(context.Background(), w1.ID); err != nil {
		t.Fatal(err)
	}
	w2 := h.add(worker.Spec{URL: fw.url})
	h.round(0)
	h.waitStatus(w2, worker.StatusReady)
	if got := h.metric(successes); got != successes+" 1" {
		t.Fatalf("re-registered worker's counter %q, want a fresh 1", got)
	}
}

// droppingRegistry drops the first drops status changes, as a full registry queue does.
type droppingRegistry struct {
	*worker.Registry
	drops atomic.Int32
}

func (r *droppingRegistry) SetStatus(id string, s worker.Status) error {
	if r.drops.Add(-1) >= 0 {
		return worker.ErrQueueFull
	}
	return r.Registry.SetStatus(id, s)
}

func TestCheckerResendsDroppedStatusChanges(t *testing.T) {
	h := newHarness(t, nil)
	reg := &droppingRegistry{Registry: h.reg}
	reg.drops.Store(1)
	c, err := New(h.checker.cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	w := h.add(worker.Spec{URL: newFakeWorker(t).url})
	c.RunRound(context.Background())
	if w.Status() != worker.StatusPending {
		t.Fatalf("dropped change applied: %v", w.Status())
	}
	if !strings.Contains(h.logs.String(), "retrying at its next probe") {
		t.Fatalf("dropped change not logged:\n%s", h.logs)
	}
	h.clk.Advance(time.Minute)
	c.RunRound(context.Background())
	h.waitStatus(w, worker.StatusReady)
}

// TestCheckerDefaultsRunOnTheRealClock starts a Checker with nothing but a registry: real
// clock, private metrics, default logger. The first round needs no clock to pass.
func TestCheckerDefaultsRunOnTheRealClock(t *testing.T) {
	h := newHarness(t, nil)
	c, err := New(DefaultConfig(), h.reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := h.add(worker.Spec{URL: newFakeWorker(t).url})
	h.waitStatus(w, worker.StatusReady)
	c.Stop()
	noLeak(t)
}

// TestCheckerAppliesUpdatedOverrides: PATCH /workers/{id} changes a worker's health overrides
// and API key in place (worker.Registry.Update); the next probe uses them.
func TestCheckerAppliesUpdatedOverrides(t *testing.T) {
	h := newHarness(t, nil)
	fw := newFakeWorker(t)
	w := h.add(worker.Spec{URL: fw.url})
	h.checker.RunRound(context.Background())
	h.waitStatus(w, worker.StatusReady)

	fw.path = "/ready" // the engine moved its probe route; only the override finds it now
	if _, err := h.reg.Update(context.Background(), w.ID, func(s worker.Spec) (worker.Spec, error) {
		s.Health = &worker.HealthOverride{Endpoint: ptr("/ready"), IntervalSecs: ptr(5), FailureThreshold: ptr(1)}
		s.APIKey = "rotated"
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.round(5 * time.Second) // the shorter interval brings the next probe forward
	if fw.hits.Load() != 2 || fw.auth.Load() != "Bearer rotated" || w.Status() != worker.StatusReady {
		t.Fatalf("after the update: %d probes, Authorization %q, status %v; want 2, the rotated key, ready", fw.hits.Load(), fw.auth.Load(), w.Status())
	}
	fw.healthy.Store(false)
	h.round(5 * time.Second)
	h.waitStatus(w, worker.StatusNotReady) // the override's threshold of 1
}
