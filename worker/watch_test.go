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

// indexedWorkers returns n bare test workers with Indexes 0..n-1.
func indexedWorkers(n int) []*Worker {
	ws := make([]*Worker, n)
	for i := range ws {
		ws[i] = newTestWorker()
		ws[i].Index = uint32(i)
	}
	return ws
}

// TestWatchMarksEveryChange: each writer of what a load-aware pick reads marks the watched
// worker's Index, once until taken; an unwatched worker marks nothing.
func TestWatchMarksEveryChange(t *testing.T) {
	w, other, unwatched := newTestWorker(), newTestWorker(), newTestWorker()
	w.Index, other.Index, unwatched.Index = 129, 3, 7
	c := NewChanges(130)
	c.Watch([]*Worker{w, other})
	for name, change := range map[string]func(){
		"InFlight.Add":    func() { w.InFlight.Add(1) },
		"InFlight.Store":  func() { w.InFlight.Store(0) },
		"NoteDispatch":    func() { w.noteDispatch(12) },
		"NoteAwaiting":    func() { w.noteAwaiting(-1) },
		"NoteFirstToken":  func() { w.noteFirstToken(-1) },
		"SetLoad":         func() { w.SetLoad(&LoadReport{}) },
		"SetOverloaded":   func() { w.SetOverloaded(!w.Overloaded()) },
		"setStatus":       func() { w.setStatus(Status(uint32(w.Status()+1) % 5)) },
		"SetStallState":   func() { w.SetStallState((w.StallState() + 1) % 3) },
		"CompareAndSetSt": func() { w.CompareAndSetStallState(w.StallState(), (w.StallState()+1)%3) },
	} {
		change()
		change()
		unwatched.InFlight.Add(1)
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
	c.Unwatch([]*Worker{w})
	w.InFlight.Add(1)
	other.InFlight.Add(1)
	if got := c.Take(nil); !slices.Equal(got, []int32{3}) {
		t.Fatalf("after Unwatch of 129: taken %v, want [3]", got)
	}
}

// TestWatchEndsWithItsSet: a worker holds its watchers weakly; the next Watch drops those
// collected.
func TestWatchEndsWithItsSet(t *testing.T) {
	ws := indexedWorkers(1)
	for range 3 {
		NewChanges(1).Watch(ws)
	}
	runtime.GC()
	kept := NewChanges(1)
	kept.Watch(ws)
	if n := len(ws[0].watchers.Load().sets); n != 1 {
		t.Fatalf("%d watchers after the others' sets were collected, want 1", n)
	}
	ws[0].InFlight.Add(1)
	if got := kept.Take(nil); !slices.Equal(got, []int32{0}) {
		t.Fatalf("taken %v, want [0]", got)
	}
	runtime.KeepAlive(kept)
}

// TestWatchSharesOneListPerGroup: the workers of a group share their list of watchers, so
// that registering a group allocates per distinct list, not per worker; a second set over
// part of the group splits it in two lists.
func TestWatchSharesOneListPerGroup(t *testing.T) {
	ws := indexedWorkers(1000)
	a, b := NewChanges(1000), NewChanges(1000)
	if allocs := testing.AllocsPerRun(1, func() { a.Unwatch(ws); a.Watch(ws) }); allocs > 8 {
		t.Fatalf("watching 1,000 workers allocated %v times, want a few", allocs)
	}
	b.Watch(ws[:10])
	lists := map[*watchList]int{}
	for _, w := range ws {
		lists[w.watchers.Load()]++
	}
	if len(lists) != 2 || lists[ws[0].watchers.Load()] != 10 || ws[0].Watchers() != 2 || ws[10].Watchers() != 1 {
		t.Fatalf("lists %v (workers 0 and 10 have %d and %d watchers), want 10 workers on a and b and 990 on a",
			lists, ws[0].Watchers(), ws[10].Watchers())
	}
	b.Unwatch(ws[:10])
	if ws[0].watchers.Load() != ws[9].watchers.Load() || ws[0].Watchers() != 1 {
		t.Fatalf("after b's Unwatch workers 0 and 9 do not share one list of one watcher (%d)", ws[0].Watchers())
	}
	a.Unwatch(ws)
	if ws[0].watchers.Load() != nil || ws[0].Watchers() != 0 {
		t.Fatalf("after every Unwatch worker 0 has %d watchers", ws[0].Watchers())
	}
	runtime.KeepAlive(b)
}

// TestRewatchMovesTheWatch: Rewatch leaves the set watching exactly the new group, a worker
// that took a departed one's Index included.
func TestRewatchMovesTheWatch(t *testing.T) {
	ws := indexedWorkers(6)
	c := NewChanges(64)
	c.Watch(ws[:4])
	reused := newTestWorker()
	reused.Index = 1 // ws[1] left, and its Index went to a new worker
	next := []*Worker{ws[0], reused, ws[2], ws[4], ws[5]}
	c.Rewatch(ws[:4], next)
	for _, w := range append(ws, reused) {
		w.InFlight.Add(1)
	}
	if got := c.Take(nil); !slices.Equal(got, []int32{0, 1, 2, 4, 5}) {
		t.Fatalf("taken %v, want [0 1 2 4 5]", got)
	}
	if ws[1].Watchers() != 0 || ws[3].Watchers() != 0 || reused.Watchers() != 1 || ws[4].Watchers() != 1 {
		t.Fatalf("watchers: departed %d and %d, new %d and %d; want 0, 0, 1, 1",
			ws[1].Watchers(), ws[3].Watchers(), reused.Watchers(), ws[4].Watchers())
	}
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
			w := indexedWorkers(1)[0]
			c := NewChanges(1)
			if watched {
				c.Watch([]*Worker{w})
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
