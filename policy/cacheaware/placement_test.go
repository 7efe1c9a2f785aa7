package cacheaware

import (
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

func hashConfig() Config {
	cfg := DefaultConfig()
	cfg.CacheIndex, cfg.CacheBoundaries, cfg.CacheTTL = IndexHash, []int{1024, 2048}, 180*time.Second
	return cfg
}

// head returns n token ids: the first shared ids of group g, then ids unique to tail.
func head(g, shared, n, tail int) *policy.Request {
	toks := make([]uint32, n)
	for i := range toks {
		if i < shared {
			toks[i] = uint32(g<<20 | i)
		} else {
			toks[i] = uint32(1<<30 | tail<<16 | i)
		}
	}
	return &policy.Request{Tokens: toks}
}

func TestHashIndexRoutesHeadsToTheirHolders(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	b, set := newBuilder(t, hashConfig())
	p := b.Build(f.Group("m"))
	first := pick(t, p, head(1, 3000, 3000, 0))
	if branch(set, BranchExpectedWaitFallback) != 1 || b.placements.entries.Load() != 2 {
		t.Fatalf("first pick: fallback %d, entries %d; want 1 and a head at each of 2 boundaries", branch(set, BranchExpectedWaitFallback), b.placements.entries.Load())
	}
	// A request in flight makes the holder the worse pick by load, but not hot (the spill
	// gate allows a 2/3 match about 2 requests above the mean): affinity still wins.
	first.InFlight.Add(1)
	defer first.InFlight.Add(-1)
	for _, req := range []*policy.Request{
		head(1, 2048, 3000, 1), // the same 2048-token head, another tail
		head(1, 1024, 1500, 2), // only the 1024-token head in common
	} {
		if got := pick(t, p, req); got != first {
			t.Fatalf("a request sharing a boundary head went to %s, not its holder %s", got.URL, first.URL)
		}
	}
	if branch(set, BranchTreeMatch) != 2 {
		t.Fatalf("tree_match %d, want 2", branch(set, BranchTreeMatch))
	}
	// Three in flight is past what a 2/3 match is worth: the request spills.
	first.InFlight.Add(2)
	if got := pick(t, p, head(1, 2048, 3000, 3)); got == first || branch(set, BranchSpill) != 1 {
		t.Fatalf("a hot holder kept the request (spill %d)", branch(set, BranchSpill))
	}
	first.InFlight.Add(-2)
	// Shorter than the first boundary, or text only: load-balanced and not recorded.
	entries := b.placements.entries.Load()
	if got := pick(t, p, head(2, 1000, 1000, 0)); got == first {
		t.Fatalf("a short request went to the busy holder")
	}
	pick(t, p, text(prompt(1)))
	if b.placements.entries.Load() != entries || b.text.Size() != 0 {
		t.Fatalf("short or text requests were recorded: entries %d -> %d, text tree %d", entries, b.placements.entries.Load(), b.text.Size())
	}
	// After the TTL the holder is forgotten, and the sweep drops the heads.
	b.Maintain(time.Unix(0, b.now.Load()).Add(181 * time.Second))
	if n := b.placements.entries.Load(); n != 0 {
		t.Fatalf("%d entries after the TTL", n)
	}
	if got := set.GetOrCreateGauge(`smg_cache_placement_entries{model="m"}`, nil).Get(); got != 0 {
		t.Fatalf("smg_cache_placement_entries %v", got)
	}
	misses := branch(set, BranchExpectedWaitFallback)
	pick(t, p, head(1, 3000, 3000, 0))
	if branch(set, BranchExpectedWaitFallback) != misses+1 {
		t.Fatal("an expired head still routed by affinity")
	}
}

func TestHashIndexKeepsThreeHoldersAndForgetsDepartedWorkers(t *testing.T) {
	f := policytest.NewFleet(t, 5, "m")
	b, _ := newBuilder(t, hashConfig())
	p := b.Build(f.Group("m"))
	req := head(1, 1024, 1024, 0)
	var hashes [maxBoundaries]uint64
	if headHashes(req.Tokens, b.cfg.CacheBoundaries, &hashes) != 1 {
		t.Fatal("want one applicable boundary")
	}
	now := b.now.Load()
	for i, w := range f.Workers[:4] { // Record is what a retry that moved the request calls
		b.now.Store(now + int64(i))
		p.(policy.Recorder).Record(req, w)
	}
	var cands [maxHolders]*worker.Worker
	byIndex := p.(*picker).byIndex
	n := b.placements.live(hashes[0], 0, &policy.Request{}, byIndex, &cands)
	if n != maxHolders || cands[0] == f.Workers[0] || cands[1] == f.Workers[0] || cands[2] == f.Workers[0] {
		t.Fatalf("holders %v (%d); want the 3 latest, the stalest evicted", cands[:n], n)
	}
	// A holder that left the registry is never a candidate, even before any sweep.
	f.Remove(f.Workers[3])
	p = b.Build(f.Group("m"))
	n = b.placements.live(hashes[0], 0, &policy.Request{}, p.(*picker).byIndex, &cands)
	for _, w := range cands[:n] {
		if w == f.Workers[3] {
			t.Fatal("a departed worker is still a holder")
		}
	}
	if n != 2 {
		t.Fatalf("%d live holders after one left, want 2", n)
	}
}

func TestHashIndexConfig(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.CacheBoundaries = nil }, "--cache-index hash needs --cache-boundaries"},
		{func(c *Config) { c.CacheBoundaries = []int{2048, 1024} }, "strictly ascending"},
		{func(c *Config) { c.CacheTTL = 0 }, "--cache-ttl-secs"},
		{func(c *Config) { c.CacheIndex = "lsh" }, `--cache-index is "lsh"`},
	} {
		cfg := hashConfig()
		tc.mut(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", cfg, err, tc.want)
		}
	}
}

// FuzzHeadHashes: heads that share a boundary prefix hash alike at that boundary and the
// count of hashes is the number of boundaries reached.
func FuzzHeadHashes(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(3))
	f.Fuzz(func(t *testing.T, raw []byte, cut uint8) {
		toks := make([]uint32, len(raw))
		for i, c := range raw {
			toks[i] = uint32(c) * 2654435761
		}
		bounds := []int{1, 2, 4, 8, 16}
		var a, b [maxBoundaries]uint64
		n := headHashes(toks, bounds, &a)
		want := 0
		for _, x := range bounds {
			if x <= len(toks) {
				want++
			}
		}
		if n != want {
			t.Fatalf("%d hashes, want %d", n, want)
		}
		other := append([]uint32(nil), toks...)
		if k := int(cut); k < len(other) {
			other[k]++
		}
		m := headHashes(other, bounds, &b)
		for i := 0; i < n && i < m; i++ {
			if same := bounds[i] <= int(cut) || int(cut) >= len(toks); (a[i] == b[i]) != same {
				t.Fatalf("boundary %d: hashes equal %v, heads equal %v", bounds[i], a[i] == b[i], same)
			}
		}
	})
}

// TestStampsComeFromTheInjectedClock checks that the gateway's clock, not the wall clock,
// starts the coarse clock: a fake clock's time is what New stamps, so a head recorded before
// the first Maintain expires CacheTTL after the fake time.
func TestStampsComeFromTheInjectedClock(t *testing.T) {
	fake := clock.NewFakeAt(t0)
	cfg := hashConfig()
	b := Descriptor.New(cfg, policy.Shared{Rand: testutil.NewRand(7), Clock: fake, Metrics: metrics.NewSet()}).(*Builder)
	if got := time.Unix(0, b.now.Load()); !got.Equal(t0) {
		t.Fatalf("New stamped %v, want the fake clock's %v", got, t0)
	}
	p := b.Build(policytest.NewFleet(t, 3, "m").Group("m"))
	pick(t, p, head(1, 3000, 3000, 0))
	if b.placements.entries.Load() == 0 {
		t.Fatal("the head was not recorded")
	}
	fake.Advance(cfg.CacheTTL + time.Second)
	b.Maintain(fake.Now())
	if n := b.placements.entries.Load(); n != 0 {
		t.Fatalf("%d entries CacheTTL after the fake clock's start: they were stamped with another clock", n)
	}
}
