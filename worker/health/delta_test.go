package health

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smg-go/smg/worker"
)

// TestRoundsFollowThePublicationsDeltas: a running Checker keeps its entries from the
// publications' deltas. After each of 400 random registrations, removals, drains and health
// overrides (disabling and enabling probes, shorter and longer intervals), a round's entries
// are exactly the registry's workers, each with its current settings, and the schedule holds
// exactly the entries that are neither draining nor disabled, each at its due time, in order.
func TestRoundsFollowThePublicationsDeltas(t *testing.T) {
	const start = 300
	c, _ := fleetChecker(t, start, func(context.Context, *worker.Worker) error { return nil })
	reg := c.reg.(*worker.Registry)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	added := 0
	for op := range 400 {
		ws := reg.Current().Workers
		w := ws[rng.IntN(len(ws))]
		var err error
		switch k := rng.IntN(10); {
		case k < 3:
			spec := worker.Spec{URL: fmt.Sprintf("grpc://127.9.%d.%d:9000", 1+added/250, 1+added%250)}
			added++
			if err = spec.Normalize(); err == nil {
				_, err = reg.Add(ctx, spec, worker.StatusPending)
			}
		case k < 5:
			_, err = reg.Remove(ctx, w.ID)
		case k < 6:
			_, err = reg.Drain(ctx, w.ID)
		default:
			disable, secs := rng.IntN(3) == 0, 1+rng.IntN(120)
			_, err = reg.Update(ctx, w.ID, func(s worker.Spec) (worker.Spec, error) {
				s.Health = &worker.HealthOverride{Disable: &disable, IntervalSecs: &secs}
				return s, nil
			})
		}
		if err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		if op%3 == 0 { // let several publications pile up between rounds too
			continue
		}
		c.RunRound(ctx)
		checkEntries(t, c, reg.Current(), op)
	}
}

// checkEntries compares the Checker's entries and schedule with snap.
func checkEntries(t *testing.T, c *Checker, snap *worker.Snapshot, op int) {
	t.Helper()
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	if len(c.entries) != len(snap.Workers) {
		t.Fatalf("op %d: %d entries for %d workers", op, len(c.entries), len(snap.Workers))
	}
	scheduled := 0
	for _, w := range snap.Workers {
		e := c.entries[w]
		switch {
		case e == nil:
			t.Fatalf("op %d: worker %s has no entry", op, w.URL)
		case e.revision != w.Revision() || e.set != c.cfg.For(w.Spec().Health):
			t.Fatalf("op %d: %s's entry has revision %d settings %+v, the worker %d %+v", op, w.URL, e.revision, e.set, w.Revision(), c.cfg.For(w.Spec().Health))
		}
		out := w.Status() == worker.StatusDraining || e.set.Disabled
		if e.slot >= 0 {
			scheduled++
			if c.schedule.h[e.slot] != e {
				t.Fatalf("op %d: %s's slot %d holds another entry", op, w.URL, e.slot)
			}
		} else if !out {
			t.Fatalf("op %d: %s (%s, disabled %v) is out of the schedule", op, w.URL, w.Status(), e.set.Disabled)
		}
	}
	if scheduled != len(c.schedule.h) {
		t.Fatalf("op %d: the schedule holds %d entries, %d of them registered", op, len(c.schedule.h), scheduled)
	}
	for i, e := range c.schedule.h {
		if i > 0 && e.at.Before(c.schedule.h[(i-1)/2].at) {
			t.Fatalf("op %d: the schedule is out of order at %d", op, i)
		}
	}
}

// BenchmarkRoundAfterOneChange is the health checker's round after a publication that
// registers one worker beside 9,999 (and the one that removes it), which a running Checker
// does from the publication's delta; "whole-snapshot" compares the whole snapshot instead, as
// a Checker that is not running does (and every round did before the deltas).
func BenchmarkRoundAfterOneChange(b *testing.B) {
	for _, mode := range []string{"delta", "whole-snapshot"} {
		b.Run(mode, func(b *testing.B) {
			c, _ := fleetChecker(b, 10_000, func(context.Context, *worker.Worker) error { return nil })
			reg := c.reg.(*worker.Registry)
			if mode == "delta" {
				c.deltaMu.Lock()
				c.listening = true
				c.deltaMu.Unlock()
				c.subscribe.Do(func() { reg.Subscribe(c.published) })
			}
			ctx := context.Background()
			if _, err := reg.Remove(ctx, reg.Current().Workers[0].ID); err != nil { // room for the one added
				b.Fatal(err)
			}
			c.RunRound(ctx)
			spec := worker.Spec{URL: "grpc://127.9.9.9:9000"}
			if err := spec.Normalize(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				w, err := reg.Add(ctx, spec, worker.StatusReady)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c.RunRound(ctx) // probes the new worker
				b.StopTimer()
				if _, err := reg.Remove(ctx, w.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c.RunRound(ctx)
			}
		})
	}
}
