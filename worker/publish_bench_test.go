package worker

import (
	"context"
	"strconv"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// BenchmarkPublishOneChange is the registry's own cost of one worker's change beside a
// large fleet: a status change applied and published, as a health probe or a discovered
// pod causes (no subscriber but the benchmark's).
func BenchmarkPublishOneChange(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run("workers="+strconv.Itoa(n), func(b *testing.B) {
			r, _, ws := benchFleet(b, n)
			published := make(chan *Snapshot, 1)
			r.Subscribe(func(s *Snapshot) {
				select {
				case published <- s:
				default:
				}
			})
			<-published
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w := ws[i*7919%n]
				to := StatusNotReady
				if w.Status() == StatusNotReady {
					to = StatusReady
				}
				if err := r.SetStatus(w.ID, to); err != nil {
					b.Fatal(err)
				}
				<-published
			}
		})
	}
}

// BenchmarkRemoveAndAddOneWorker is the registry's cost of one worker leaving and coming back
// beside a large fleet, as a pod turning unready and Ready again does: each a publication,
// and the worker's metric series unregistered and registered again.
func BenchmarkRemoveAndAddOneWorker(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run("workers="+strconv.Itoa(n), func(b *testing.B) {
			r, specs, ws := benchFleet(b, n)
			ctx := context.Background()
			ids := make([]string, n)
			for i, w := range ws {
				ids[i] = w.ID
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := i * 7919 % n
				if _, err := r.Remove(ctx, ids[k]); err != nil {
					b.Fatal(err)
				}
				w, err := r.Add(ctx, specs[k], StatusReady)
				if err != nil {
					b.Fatal(err)
				}
				ids[k] = w.ID
			}
		})
	}
}

// benchFleet returns a registry of n ready workers of one model, closed when b ends, with
// their specs and workers in registration order.
func benchFleet(b *testing.B, n int) (*Registry, []Spec, []*Worker) {
	cfg := DefaultConfig().WithLogger(testutil.Quiet)
	cfg.MaxWorkers = n
	r, err := NewRegistry(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	specs := make([]Spec, n)
	ws := make([]*Worker, n)
	for i := range n {
		specs[i] = Spec{URL: "http://10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":8000", ModelID: "m"}
		if err := specs[i].Normalize(); err != nil {
			b.Fatal(err)
		}
		if ws[i], err = r.Add(context.Background(), specs[i], StatusReady); err != nil {
			b.Fatal(err)
		}
	}
	return r, specs, ws
}
