package cacheaware

import (
	"testing"
	"time"

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

// PrefixHashes names block k of every prompt k+1: the fake's holders hold leading blocks of
// any prompt alike.
func (f *fakeEvents) PrefixHashes(dst []uint64, tokens []uint32) []uint64 {
	for k := range len(tokens) / f.blockSize {
		dst = append(dst, uint64(k+1))
	}
	return dst
}

func (f *fakeEvents) MatchHashes(hashes []uint64, depth []uint32) uint32 {
	var best uint32
	for url, s := range f.slots {
		d := min(f.depth[url], uint32(len(hashes)))
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
	cfg.Events, cfg.UnreportedTTL = ev, 0 // the engines' reports alone
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

// TestEventModeCountsBlocksSentButNotReported: a worker sent a prompt holds its blocks for
// the next requests before its engine reports them (they wait in its queue), until the engine
// reports them (then the index alone decides: a block it evicts is gone), or UnreportedTTL
// passes; with UnreportedTTL 0 only reports count.
func TestEventModeCountsBlocksSentButNotReported(t *testing.T) {
	f, ev := eventFleet(t, 4)
	cfg := DefaultConfig()
	cfg.Events = ev
	b, set := newBuilder(t, cfg)
	p := b.Build(f.Group("m"))
	req := tokens(64) // 4 blocks, none reported anywhere
	first := pick(t, p, req)
	for i := range 3 {
		if got := pick(t, p, req); got != first {
			t.Fatalf("request %d went to %s, not to %s, which was sent the prompt", i, got.URL, first.URL)
		}
	}
	// The hit foretold is the engines' reports alone.
	predicted := set.GetOrCreateCounter(`smg_cache_aware_event_mode_predicted_cached_tokens_total`)
	if got := predicted.Get(); got != 0 {
		t.Fatalf("predicted cached tokens %d with nothing reported, want 0", got)
	}
	// The engine reports the blocks, then evicts them: nothing holds them any more, and the
	// prompt goes back to its home, first, though busier than the others, until first is hot
	// (the spill gate): then load decides.
	ev.depth[first.URL] = 4
	if got := pick(t, p, req); got != first {
		t.Fatalf("went to %s, want %s, whose engine reported the prompt", got.URL, first.URL)
	}
	if got := predicted.Get(); got != 64 {
		t.Fatalf("predicted cached tokens %d, want the 64 reported", got)
	}
	ev.depth[first.URL] = 0
	first.InFlight.Add(2)
	if got := pick(t, p, req); got != first {
		t.Fatalf("went to %s, not back home to %s after its engine evicted the prompt", got.URL, first.URL)
	}
	if got := set.GetOrCreateCounter(`smg_cache_aware_event_mode_home_picks_total`).Get(); got != 1 {
		t.Fatalf("home picks %d, want 1", got)
	}
	if got := predicted.Get(); got != 64 {
		t.Fatalf("predicted cached tokens %d after a pick of evicted blocks, want still 64", got)
	}
	first.InFlight.Add(2 * DefaultBalanceAbsThreshold) // hot: past the mean by more than the threshold
	if got := pick(t, p, req); got == first {
		t.Fatal("went home to a hot worker whose engine evicted the prompt")
	}
	first.InFlight.Add(-2 - 2*DefaultBalanceAbsThreshold)

	// Sent blocks count as held for UnreportedTTL; after it the worker is only their home.
	f2, ev2 := eventFleet(t, 4)
	cfg2 := cfg
	cfg2.Events = ev2
	b2, set2 := newBuilder(t, cfg2)
	p2 := b2.Build(f2.Group("m"))
	homePicks := set2.GetOrCreateCounter(`smg_cache_aware_event_mode_home_picks_total`)
	sent := pick(t, p2, req)
	sent.InFlight.Add(1)
	if got := pick(t, p2, req); got != sent || homePicks.Get() != 0 {
		t.Fatalf("went to %s (home picks %d), want %s holding the blocks it was sent", got.URL, homePicks.Get(), sent.URL)
	}
	b2.Maintain(time.Unix(0, b2.now.Load()).Add(cfg.UnreportedTTL + time.Second))
	if got := pick(t, p2, req); got != sent || homePicks.Get() != 1 {
		t.Fatalf("went to %s (home picks %d), want %s as the blocks' home, sent them longer than UnreportedTTL ago", got.URL, homePicks.Get(), sent.URL)
	}

	// UnreportedTTL 0: only the engines' reports count.
	cfg2.UnreportedTTL = 0
	b3, _ := newBuilder(t, cfg2)
	p3 := b3.Build(f2.Group("m"))
	if got := pick(t, p3, req); got == sent {
		t.Fatalf("went to the busier %s with nothing reported", got.URL)
	}
}

// TestUnreportedTableIsBounded: a set keeps four blocks, replacing its stalest, and a block
// sent again moves to its new worker.
func TestUnreportedTableIsBounded(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	a, c := f.Workers[0], f.Workers[1]
	var u unreported
	// Six blocks of one set (equal low bits), sent at times 1..6.
	hashes := make([]uint64, 6)
	for i := range hashes {
		hashes[i] = uint64(i+1)*unreportedSets + 7
		u.record(hashes[i:i+1], 0, a, int64(i+1))
	}
	out := make([]*worker.Worker, len(hashes))
	u.lookup(hashes, 0, out)
	for i, w := range out {
		if want := i >= 2; (w == a) != want {
			t.Fatalf("block %d remembered %v, want %v (a set keeps the four newest)", i, w != nil, want)
		}
	}
	u.record(hashes[5:], 0, c, 7)
	u.lookup(hashes[5:], 0, out[:1])
	if out[0] != c {
		t.Fatal("a block sent again does not name its new worker")
	}
	u.lookup(hashes[5:], 8, out[:1])
	if out[0] != nil {
		t.Fatal("a block sent before since still counts")
	}
	// A block its worker reported no longer counts as sent, but stays its home.
	u.record(hashes[4:5], 1, a, 9)
	depth, home := u.lookup(hashes[4:5], 0, out[:1])
	if out[0] != nil {
		t.Fatal("a reported block is still remembered as sent")
	}
	if depth != 1 || home != a {
		t.Fatalf("home of a reported block: depth %d worker %v, want 1 and a", depth, home)
	}
	// The home is the deepest block remembered.
	depth, home = u.lookup([]uint64{hashes[5], 12345, hashes[4], 999}, 0, make([]*worker.Worker, 4))
	if depth != 3 || home != a {
		t.Fatalf("home depth %d worker %v, want 3 (the deepest remembered block) and a", depth, home)
	}
}

// TestTokenTreeCountsTheHitItForetells: the token tree's picks add their prompt tokens, and
// the chosen holder's matched tokens, to the counters the engines' own hits are set beside.
func TestTokenTreeCountsTheHitItForetells(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	b, set := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	req := tokens(72) // 4 whole blocks of 16 and a partial one
	first := pick(t, p, req)
	if got := pick(t, p, req); got != first {
		t.Fatalf("went to %s, not to the holder %s", got.URL, first.URL)
	}
	predicted := set.GetOrCreateCounter(`smg_cache_aware_tree_predicted_cached_tokens_total`).Get()
	prompt := set.GetOrCreateCounter(`smg_cache_aware_tree_prompt_tokens_total`).Get()
	if predicted != 64 || prompt != 2*72 {
		t.Fatalf("predicted %d of %d prompt tokens, want 64 (the second pick's whole blocks) of 144", predicted, prompt)
	}
}
