package cacheaware

import (
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

// fakeEvents is an EventIndex whose holders hold a fixed number of leading blocks of every
// request: depth by URL.
type fakeEvents struct {
	blockSize int
	slots     map[string]int
	depth     map[string]uint32
}

func (f *fakeEvents) EventIndex(string) EventIndex { return f }

func (f *fakeEvents) Slot(url string) (int, bool) { s, ok := f.slots[url]; return s, ok }
func (f *fakeEvents) Slots() int                  { return len(f.slots) }
func (f *fakeEvents) BlockSize() int              { return f.blockSize }

func (f *fakeEvents) Match(tokens []uint32, depth []uint32) uint32 {
	var best uint32
	for url, s := range f.slots {
		d := min(f.depth[url], uint32(len(tokens)/f.blockSize))
		depth[s] = d
		best = max(best, d)
	}
	return best
}

func eventFleet(t *testing.T, n int) (*policytest.Fleet, *fakeEvents) {
	f := policytest.NewFleet(t, n, "m")
	ev := &fakeEvents{blockSize: 16, slots: map[string]int{}, depth: map[string]uint32{}}
	for i, w := range f.Workers {
		ev.slots[w.URL] = i
	}
	return f, ev
}

func tokens(n int) *policy.Request {
	toks := make([]uint32, n)
	for i := range toks {
		toks[i] = uint32(i)
	}
	return &policy.Request{Tokens: toks}
}

// TestEventModeFollowsTheEnginesCaches: the worker whose engine reports the longest run of
// the prompt's blocks takes it, whatever the approximate tree remembers; equal holders go by
// load; a match at or below --cache-threshold is a miss.
func TestEventModeFollowsTheEnginesCaches(t *testing.T) {
	f, ev := eventFleet(t, 4)
	cfg := DefaultConfig()
	cfg.Events = ev
	b, set := newBuilder(t, cfg)
	p := b.Build(f.Group("m"))
	req := tokens(64) // 4 blocks
	// The tree would send it to worker 0 (Record); the engines say worker 2 holds 3 blocks.
	p.(policy.Recorder).Record(req, f.Workers[0])
	ev.depth[f.Workers[2].URL] = 3
	ev.depth[f.Workers[1].URL] = 1
	if got := pick(t, p, req); got != f.Workers[2] {
		t.Fatalf("went to %s, want %s, whose engine holds the most", got.URL, f.Workers[2].URL)
	}
	// Two holders of the whole prompt: the one with less in flight.
	ev.depth[f.Workers[3].URL] = 4
	ev.depth[f.Workers[2].URL] = 4
	f.Workers[3].InFlight.Add(5)
	if got := pick(t, p, req); got != f.Workers[2] {
		t.Fatalf("went to %s, want the less loaded holder %s", got.URL, f.Workers[2].URL)
	}
	f.Workers[3].InFlight.Add(-5)
	// One block of four (25%) is below the default threshold of 30%: load decides.
	clear(ev.depth)
	ev.depth[f.Workers[1].URL] = 1
	f.Workers[1].InFlight.Add(3)
	misses := branch(set, BranchExpectedWaitFallback)
	if got := pick(t, p, req); got == f.Workers[1] {
		t.Fatalf("a 25%% match went to its holder %s", got.URL)
	}
	if branch(set, BranchExpectedWaitFallback) != misses+1 {
		t.Fatal("the miss was not counted")
	}
	if n := set.GetOrCreateCounter(`smg_cache_aware_event_mode_picks_total`).Get(); n != 3 {
		t.Fatalf("%d event-mode picks counted, want 3", n)
	}
}

// TestEventModeNeedsEveryWorker: with a worker that publishes no events, or before the index
// knows the block size, the approximate tree decides.
func TestEventModeNeedsEveryWorker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *policytest.Fleet, ev *fakeEvents)
	}{
		{"a worker without events", func(f *policytest.Fleet, ev *fakeEvents) { delete(ev.slots, f.Workers[3].URL) }},
		{"no block size yet", func(_ *policytest.Fleet, ev *fakeEvents) { ev.blockSize = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ev := eventFleet(t, 4)
			tc.setup(f, ev)
			cfg := DefaultConfig()
			cfg.Events = ev
			b, set := newBuilder(t, cfg)
			p := b.Build(f.Group("m"))
			req := tokens(64)
			p.(policy.Recorder).Record(req, f.Workers[0])
			ev.depth[f.Workers[2].URL] = 4
			if got := pick(t, p, req); got != f.Workers[0] {
				t.Fatalf("went to %s, want the tree's holder %s", got.URL, f.Workers[0].URL)
			}
			if n := set.GetOrCreateCounter(`smg_cache_aware_event_mode_picks_total`).Get(); n != 0 {
				t.Fatalf("%d event-mode picks", n)
			}
		})
	}
}

// TestEventModeSkipsUnusableWorkers: a holder the request may not use is no candidate.
func TestEventModeSkipsUnusableWorkers(t *testing.T) {
	f, ev := eventFleet(t, 3)
	cfg := DefaultConfig()
	cfg.Events = ev
	b, _ := newBuilder(t, cfg)
	p := b.Build(f.Group("m"))
	ev.depth[f.Workers[1].URL] = 4
	ev.depth[f.Workers[2].URL] = 2
	f.SetStatus(f.Workers[1], worker.StatusNotReady)
	p = b.Build(f.Group("m"))
	if got := pick(t, p, tokens(64)); got != f.Workers[2] {
		t.Fatalf("went to %s, want the usable holder %s", got.URL, f.Workers[2].URL)
	}
}
