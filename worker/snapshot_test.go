package worker

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestSnapshotsMatchAFreshBuild drives a registry through random joins, removals, status
// changes (several in one publication) and model learning, and checks every snapshot it
// publishes against what a build from scratch over the registered workers gives: the
// incremental lookups, models, index bound and Ready count must never drift.
func TestSnapshotsMatchAFreshBuild(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	rng := testutil.NewRand(7)
	var live []*Worker // the registered workers, in registration order
	var gone []*Worker // removed or replaced workers
	models := []string{"a", "b", "c"}
	statuses := []Status{StatusReady, StatusNotReady, StatusPending, StatusFailed}
	sync := func() { // a published no-op update: every change sent before it is published
		if len(live) > 0 {
			if _, err := r.Update(ctx, live[0].ID, func(s Spec) (Spec, error) { return s, nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for step := range 600 {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0: // join, with a model or without one (pending, learns it later)
			s := Spec{URL: "http://10.0.0." + strconv.Itoa(step%250) + ":" + strconv.Itoa(1000+step)}
			status := statuses[rng.IntN(len(statuses))]
			if rng.IntN(3) > 0 {
				s.ModelID = models[rng.IntN(len(models))]
			} else {
				status = StatusPending
			}
			if err := s.Normalize(); err != nil {
				t.Fatal(err)
			}
			w, err := r.Add(ctx, s, status)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, w)
		case op < 6: // removal
			i := rng.IntN(len(live))
			if _, err := r.Remove(ctx, live[i].ID); err != nil {
				t.Fatal(err)
			}
			gone = append(gone, live[i])
			live = slices.Delete(live, i, i+1)
		case op < 9: // a few status changes in one publication
			for range 1 + rng.IntN(4) {
				if err := r.SetStatus(live[rng.IntN(len(live))].ID, statuses[rng.IntN(len(statuses))]); err != nil {
					t.Fatal(err)
				}
			}
			sync()
		default: // a pending worker without models learns them
			for i, w := range live {
				if len(w.Models) == 0 && w.Status() == StatusPending {
					nw, err := r.LearnModels(ctx, w.ID, []string{models[rng.IntN(len(models))]})
					if err != nil {
						t.Fatal(err)
					}
					gone, live[i] = append(gone, w), nw
					break
				}
			}
		}
		checkSnapshot(t, r.Current(), live, gone)
	}
}

// checkSnapshot compares s with a fresh build over live, the registered workers.
func checkSnapshot(t *testing.T, s *Snapshot, live, gone []*Worker) {
	t.Helper()
	if !slices.Equal(s.Workers, live) {
		t.Fatalf("snapshot %d lists %d workers, want the %d registered in order", s.Version, len(s.Workers), len(live))
	}
	var bound uint32
	ready := 0
	declared := map[string]bool{}
	for _, w := range live {
		if s.ByID(w.ID) != w || s.ByURL(w.URL) != w {
			t.Fatalf("snapshot %d: worker %s (%s) not found by its ID and URL", s.Version, w.ID, w.URL)
		}
		bound = max(bound, w.Index+1)
		if w.Ready() {
			ready++
		}
		for _, m := range w.Models {
			declared[m] = true
		}
	}
	for _, w := range gone {
		if got := s.ByID(w.ID); got == w {
			t.Fatalf("snapshot %d still finds removed worker %s by ID", s.Version, w.ID)
		}
		if got := s.ByURL(w.URL); got == w {
			t.Fatalf("snapshot %d still finds removed worker %s by URL", s.Version, w.URL)
		}
	}
	var want []string
	for m := range declared {
		want = append(want, m)
	}
	slices.Sort(want)
	if !slices.Equal(s.Models(), want) {
		t.Fatalf("snapshot %d models %v, want %v", s.Version, s.Models(), want)
	}
	if s.IndexBound() != bound {
		t.Fatalf("snapshot %d index bound %d, want %d", s.Version, s.IndexBound(), bound)
	}
	if s.ReadyCount() != ready {
		t.Fatalf("snapshot %d ready count %d, want %d", s.Version, s.ReadyCount(), ready)
	}
}

// TestAStatusChangeSharesTheLookups: a publication after a status change only reuses the
// previous snapshot's worker list and lookups rather than rebuilding them.
func TestAStatusChangeSharesTheLookups(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	w, err := r.Add(ctx, mustSpec(t, "http://a:1", "m"), StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Current()
	if _, err := r.Drain(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	after := r.Current()
	if after == before || after.ReadyCount() != 0 || before.ReadyCount() != 1 {
		t.Fatalf("drain published ready counts %d → %d, want 1 → 0", before.ReadyCount(), after.ReadyCount())
	}
	if &after.Workers[0] != &before.Workers[0] || after.byID != before.byID || after.byURL != before.byURL {
		t.Fatal("a status change rebuilt the worker list or lookups")
	}
}
