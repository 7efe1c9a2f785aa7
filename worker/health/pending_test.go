package health

import (
	"context"
	"testing"
	"time"

	"github.com/smg-go/smg/worker"
)

// TestPendingWorkerIsProbedWithBackoffUntilItAnswers: a worker that does not answer at
// registration is probed again after about 1 s, 2 s, 4 s... (75-100% of each, jittered) up to
// the interval, not only at the 60 s interval; the first probe it answers makes it ready. The
// extra probes' failures do not count toward failed: only the regular ones did.
func TestPendingWorkerIsProbedWithBackoffUntilItAnswers(t *testing.T) {
	h := newHarness(t, nil)
	fw := newFakeWorker(t)
	fw.healthy.Store(false) // the engine is still loading
	w := h.add(worker.Spec{URL: fw.url})
	next := h.checker.RunRound(context.Background()) // the probe at registration
	var waits []time.Duration
	for want := time.Second; want < DefaultInterval; want *= 2 {
		d := next.Sub(h.clk.Now())
		if d < want*3/4 || d > want {
			t.Fatalf("extra probe %d after %v, want 75-100%% of %v (waits so far %v)", len(waits)+1, d, want, waits)
		}
		waits = append(waits, d)
		next = h.checker.RunRound(advanceTo(h, next))
		if w.Status() != worker.StatusPending {
			t.Fatalf("after %d failed probes: %v, want pending", len(waits)+1, w.Status())
		}
	}
	if got := fw.hits.Load(); got != int64(len(waits)+1) {
		t.Fatalf("%d probes reached the worker, want %d", got, len(waits)+1)
	}
	if f := h.checker.entries[w].tracker.Failures(); f != 1 {
		t.Fatalf("%d failures counted, want 1: only the regular probe's", f)
	}
	// The next probe is the regular one, at the interval after registration.
	if d := next.Sub(h.clk.Now()); next.Sub(h.clk.Now()) <= 0 || !next.Equal(h.checker.entries[w].next) {
		t.Fatalf("after the backoff reached the interval the next probe is in %v, not the regular one", d)
	}

	// Another worker comes up after two extra probes: the third makes it ready.
	h = newHarness(t, nil)
	fw2 := newFakeWorker(t)
	fw2.healthy.Store(false)
	w2 := h.add(worker.Spec{URL: fw2.url})
	next = h.checker.RunRound(context.Background())
	for range 2 {
		next = h.checker.RunRound(advanceTo(h, next))
	}
	fw2.healthy.Store(true)
	h.checker.RunRound(advanceTo(h, next))
	h.waitStatus(w2, worker.StatusReady)
	if got := fw2.hits.Load(); got != 4 {
		t.Fatalf("ready after %d probes, want 4", got)
	}
}

// advanceTo moves the fake clock to at and returns a context for the round.
func advanceTo(h *harness, at time.Time) context.Context {
	h.clk.Advance(at.Sub(h.clk.Now()))
	return context.Background()
}

// TestPendingWorkerLearnsItsModelsWhenItAnswers: a worker registered without models (it did
// not answer at registration) learns them at its first successful probe: LearnModels replaces
// it with a worker of the same ID that has them, which the next round makes ready.
func TestPendingWorkerLearnsItsModelsWhenItAnswers(t *testing.T) {
	var calls int
	var h *harness
	h = newHarness(t, func(c *Config) {
		c.LearnModels = func(ctx context.Context, w *worker.Worker) bool {
			calls++
			_, err := h.reg.LearnModels(ctx, w.ID, []string{"m1", "m2"})
			return err == nil
		}
	})
	fw := newFakeWorker(t)
	w := h.add(worker.Spec{URL: fw.url})
	h.round(0)
	h.waitFor("the replacement", func() bool { return h.reg.Current().ByID(w.ID) != w })
	nw := h.reg.Current().ByID(w.ID)
	if nw == nil || nw.Status() != worker.StatusPending || len(nw.Models) != 2 || nw.Models[0] != "m1" || w.Status() != worker.StatusDraining {
		t.Fatalf("after learning: replacement %+v, old %v", nw, w.Status())
	}
	h.round(0)
	h.waitStatus(nw, worker.StatusReady)
	if calls != 1 {
		t.Fatalf("LearnModels ran %d times, want 1 (the replacement has models)", calls)
	}
	if _, err := h.reg.LearnModels(context.Background(), nw.ID, []string{"x"}); err == nil {
		t.Fatal("LearnModels replaced a ready worker that has models")
	}
}
