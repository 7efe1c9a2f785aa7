package worker

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestInFlightIsTheFirstField: InFlightCount finds its Worker at its own address.
func TestInFlightIsTheFirstField(t *testing.T) {
	if off := unsafe.Offsetof(Worker{}.InFlight); off != 0 {
		t.Fatalf("Worker.InFlight is at offset %d, want 0 (InFlightCount.worker)", off)
	}
	w := newTestWorker()
	if w.InFlight.worker() != w {
		t.Fatal("InFlightCount.worker does not return its Worker")
	}
}

// TestWatchMarksEveryChange: each writer of what a load-aware pick reads marks the watched
// worker's place, once until taken; an unwatched worker marks nothing.
func TestWatchMarksEveryChange(t *testing.T) {
	w, other := newTestWorker(), newTestWorker()
	c := NewChanges(130)
	w.Watch(c, 129)
	other.Watch(c, 3)
	for name, change := range map[string]func(){
		"InFlight.Add":    func() { w.InFlight.Add(1) },
		"InFlight.Store":  func() { w.InFlight.Store(0) },
		"NoteDispatch":    func() { w.NoteDispatch(12) },
		"NoteAwaiting":    func() { w.NoteAwaiting(-1) },
		"NoteFirstToken":  func() { w.NoteFirstToken(-1) },
		"SetLoad":         func() { w.SetLoad(&LoadReport{}) },
		"SetOverloaded":   func() { w.SetOverloaded(!w.Overloaded()) },
		"setStatus":       func() { w.setStatus(Status(uint32(w.Status()+1) % 5)) },
		"SetStallState":   func() { w.SetStallState((w.StallState() + 1) % 3) },
		"CompareAndSetSt": func() { w.CompareAndSetStallState(w.StallState(), (w.StallState()+1)%3) },
	} {
		change()
		change()
		if got := c.Take(nil); !slices.Equal(got, []int32{129}) {
			t.Fatalf("%s twice: taken %v, want [129]", name, got)
		}
	}
	if got := c.Take(nil); got != nil {
		t.Fatalf("nothing changed: taken %v", got)
	}
	w.SetOverloaded(w.Overloaded()) // no change of the word
	if got := c.Take(nil); got != nil {
		t.Fatalf("a write that changes nothing marked %v", got)
	}
}

// TestWatchEndsWithItsSet: a worker holds its watchers weakly; the next Watch drops those
// collected.
func TestWatchEndsWithItsSet(t *testing.T) {
	w := newTestWorker()
	for range 3 {
		w.Watch(NewChanges(1), 0)
	}
	runtime.GC()
	kept := NewChanges(1)
	w.Watch(kept, 0)
	if n := len(*w.watchers.Load()); n != 1 {
		t.Fatalf("%d watchers after the others' sets were collected, want 1", n)
	}
	w.InFlight.Add(1)
	if got := kept.Take(nil); !slices.Equal(got, []int32{0}) {
		t.Fatalf("taken %v, want [0]", got)
	}
	runtime.KeepAlive(kept)
}

// BenchmarkInFlightAddSub is what the request path pays for its in-flight increment and
// decrement: a bare atomic counter (the count before it reported its changes), and the count
// with no order kept over the worker's group and with one (least_load, cache_aware).
func BenchmarkInFlightAddSub(b *testing.B) {
	b.Run("atomic.Int64", func(b *testing.B) {
		var n atomic.Int64
		for b.Loop() {
			n.Add(1)
			n.Add(-1)
		}
	})
	for _, watched := range []bool{false, true} {
		name := "watchers=0"
		if watched {
			name = "watchers=1"
		}
		b.Run(name, func(b *testing.B) {
			w := newTestWorker()
			c := NewChanges(1)
			if watched {
				w.Watch(c, 0)
			}
			var buf []int32
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				w.InFlight.Add(1)
				w.InFlight.Add(-1)
				if i%4 == 0 {
					buf = c.Take(buf[:0]) // a pick takes the marks now and then
				}
			}
			runtime.KeepAlive(c)
		})
	}
}
