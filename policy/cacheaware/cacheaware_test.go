package cacheaware

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newBuilder(t testing.TB, cfg Config) (*Builder, *metrics.Set) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.NewSet()
	return New(cfg, testutil.NewRand(7)), cfg.Metrics
}

func pick(t *testing.T, p policy.Picker, req *policy.Request) *worker.Worker {
	t.Helper()
	res, err := p.Pick(req)
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return res.Worker
}

func text(s string) *policy.Request { return &policy.Request{Text: []byte(s)} }

func branch(set *metrics.Set, b string) uint64 {
	return set.GetOrCreateCounter(`smg_cache_aware_policy_branch_total{branch="` + b + `"}`).Get()
}

// prompt is a long distinct prompt: the tree shards on the first 64 bytes, so tests use
// prompts that share at least that much when they should match.
func prompt(i int) string {
	return fmt.Sprintf("%03d You are a helpful assistant. Conversation %d follows in full detail: ", i, i) + strings.Repeat("lorem ipsum ", 20)
}

func TestSamePromptSameWorkerDistinctPromptsSpread(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	b, set := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	first := pick(t, p, text(prompt(0)))
	for range 5 {
		if got := pick(t, p, text(prompt(0))); got != first {
			t.Fatalf("same prompt went to %s, then %s", first.URL, got.URL)
		}
	}
	if branch(set, BranchTreeMatch) != 5 || branch(set, BranchExpectedWaitFallback) != 1 {
		t.Fatalf("tree_match %d, expected_wait_fallback %d; want 5, 1", branch(set, BranchTreeMatch), branch(set, BranchExpectedWaitFallback))
	}
	seen := map[*worker.Worker]bool{}
	for i := 1; i <= 12; i++ {
		seen[pick(t, p, text(prompt(i)))] = true
	}
	if len(seen) < 2 {
		t.Fatal("12 distinct prompts all went to one worker")
	}
}

func TestCacheThreshold(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	head := strings.Repeat("h", 100)
	holder := pick(t, p, text(head+strings.Repeat("a", 100)))
	// 100 of 250 characters match (0.4 > 0.3): the holder takes it.
	if got := pick(t, p, text(head+strings.Repeat("b", 150))); got != holder {
		t.Fatalf("match ratio 0.4 went to %s, want the holder %s", got.URL, holder.URL)
	}
	// Make the holder the worst by expected wait, then send a request matching 100 of 400
	// characters (0.25 <= 0.3): a miss, so the lowest expected wait takes it.
	holder.InFlight.Add(5)
	for i := range 5 {
		if got := pick(t, p, text(head+fmt.Sprintf("%d", i)+strings.Repeat("c", 299))); got == holder {
			t.Fatalf("a miss went to the busiest worker %s", got.URL)
		}
	}
}

func TestHolderChosenByExpectedWait(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	b, _ := newBuilder(t, DefaultConfig())
	g := f.Group("m")
	p := b.Build(g)
	pr := prompt(1)
	// Make workers 0 and 1 holders of the prompt.
	p.(policy.Recorder).Record(text(pr), f.Workers[0])
	p.(policy.Recorder).Record(text(pr), f.Workers[1])
	policytest.SetReport(f.Workers[0], policytest.Report{WaitingTokens: 9000, Throughput: 1000}, t0)
	policytest.SetReport(f.Workers[1], policytest.Report{WaitingTokens: 1000, Throughput: 1000}, t0)
	policytest.SetReport(f.Workers[2], policytest.Report{WaitingTokens: 0, Throughput: 1000}, t0) // idle, not a holder
	policytest.SetReport(f.Workers[3], policytest.Report{WaitingTokens: 0, Throughput: 1000}, t0)
	for range 5 {
		if got := pick(t, p, text(pr)); got != f.Workers[1] {
			t.Fatalf("went to %s, want the holder with the lower expected wait %s", got.URL, f.Workers[1].URL)
		}
	}
}

func TestSpillWhenEveryHolderIsHot(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	cfg := DefaultConfig()
	cfg.BalanceAbsThreshold = 4
	b, set := newBuilder(t, cfg)
	pr := prompt(2)
	holder := pick(t, b.Build(f.Group("m")), text(pr))
	// Mean in flight (20+3)/4 = 5.75: the holder at 20 exceeds both 1.5 × 5.75 and
	// 5.75 + 4, so it is hot.
	holder.InFlight.Store(20)
	var quiet *worker.Worker
	for _, w := range f.Workers {
		if w != holder {
			w.InFlight.Store(1)
			quiet = w
		}
	}
	quiet.InFlight.Store(0)
	p := b.Build(f.Group("m")) // a fresh fleet mean
	got := pick(t, p, text(pr))
	if got != quiet {
		t.Fatalf("spill went to %s, want the lowest-wait worker that is not hot %s", got.URL, quiet.URL)
	}
	if branch(set, BranchSpill) != 1 {
		t.Fatal("spill not counted")
	}
	// The spill target became a holder too: with the first holder still hot and the new one
	// not, the request now stays on the new holder (a tree match).
	quiet.InFlight.Store(2)
	if got := pick(t, p, text(pr)); got != quiet {
		t.Fatalf("after the spill went to %s, want the new holder %s", got.URL, quiet.URL)
	}
	if branch(set, BranchTreeMatch) != 1 {
		t.Fatalf("tree_match = %d, want 1", branch(set, BranchTreeMatch))
	}
	// Within the absolute margin a busier holder keeps its affinity.
	holder.InFlight.Store(6)
	quiet.InFlight.Store(0)
	p = b.Build(f.Group("m"))
	pr2 := prompt(3)
	first := pick(t, p, text(pr2))
	first.InFlight.Add(3)
	if got := pick(t, p, text(pr2)); got != first {
		t.Fatalf("a holder within the margin lost its request to %s", got.URL)
	}
}

func TestRecordMovesAffinityToTheServingWorker(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	pr := prompt(4)
	chosen := pick(t, p, text(pr))
	var served *worker.Worker
	for _, w := range f.Workers {
		if w != chosen {
			served = w
			break
		}
	}
	p.(policy.Recorder).Record(text(pr), served)
	// The chosen worker fails: the retry excludes it, and the prefix holder left is served.
	if got := pick(t, p, &policy.Request{Text: []byte(pr), Exclude: []*worker.Worker{chosen}}); got != served {
		t.Fatalf("went to %s, want the worker that served the retry %s", got.URL, served.URL)
	}
}

func TestRemovedWorkerIsPurged(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	gone := pick(t, p, text(prompt(5)))
	idx := gone.Index
	if b.TextTree().TenantChars(radix.Tenant(idx)) == 0 {
		t.Fatal("nothing recorded for the chosen worker")
	}
	f.Remove(gone)
	b.Build(f.Group("m"))
	if n := b.TextTree().TenantChars(radix.Tenant(idx)); n != 0 {
		t.Fatalf("removed worker still holds %d characters", n)
	}
	// A new worker reusing the index does not inherit the prompt.
	fresh := f.Add("m", nil)
	if fresh.Index != idx {
		t.Fatalf("registry did not reuse index %d (got %d); the test needs it", idx, fresh.Index)
	}
	b.Build(f.Group("m"))
	m := b.TextTree().Match([]byte(prompt(5)), make([]radix.Tenant, 0, radix.MaxMatchTenants))
	if m.MatchedChars != 0 {
		t.Fatalf("prefix still stored for %v", m.Tenants)
	}
}

func TestEvictionAndGauges(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	cfg := DefaultConfig()
	cfg.MaxTreeSize = 1000
	cfg.EvictionInterval = time.Minute
	b, set := newBuilder(t, cfg)
	p := b.Build(f.Group("m"))
	for i := range 30 {
		pick(t, p, text(prompt(i)))
	}
	if b.TextTree().Size() <= 1000 {
		t.Fatalf("tree size %d: the test needs it over budget", b.TextTree().Size())
	}
	b.Maintain(t0) // first call: the interval has elapsed since the zero time
	if s := b.TextTree().Size(); s > 1000 {
		t.Fatalf("after eviction the tree holds %d > 1000", s)
	}
	if got := set.GetOrCreateGauge(`smg_cache_tree_chars{model="m"}`, nil).Get(); got != float64(b.TextTree().Size()) {
		t.Fatalf("chars gauge %v, tree size %d", got, b.TextTree().Size())
	}
	for i := 30; i < 60; i++ {
		pick(t, p, text(prompt(i)))
	}
	b.Maintain(t0.Add(30 * time.Second)) // before the interval: nothing happens
	if b.TextTree().Size() <= 1000 {
		t.Fatal("evicted before the interval")
	}
	b.Maintain(t0.Add(61 * time.Second))
	if b.TextTree().Size() > 1000 {
		t.Fatal("not evicted after the interval")
	}
}

func TestTokensRouteInWholePages(t *testing.T) {
	f := policytest.NewFleet(t, 8, "m")
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	toks := make([]uint32, 100)
	for i := range toks {
		toks[i] = uint32(i * 7)
	}
	first := pick(t, p, &policy.Request{Tokens: toks, Text: []byte("ignored when tokens are present")})
	for range 5 {
		if got := pick(t, p, &policy.Request{Tokens: toks}); got != first {
			t.Fatal("same tokens went to another worker")
		}
	}
	if b.TokenTree().Size() != 96 { // 6 whole pages of 16
		t.Fatalf("token tree holds %d tokens, want 96", b.TokenTree().Size())
	}
	if pick(t, p, &policy.Request{Tokens: toks[:15]}); b.TokenTree().Size() != 96 {
		t.Fatal("a request shorter than one page was recorded")
	}
}

func TestNoAvailableWorkers(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	for _, req := range []*policy.Request{{Text: []byte(prompt(1)), Exclude: f.Workers}, {Exclude: f.Workers}} {
		if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
			t.Fatalf("err = %v", err)
		}
	}
	if b.TextTree().Size() != 0 {
		t.Fatal("a failed pick recorded its prefix")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.CacheThreshold = 1.1 },
		func(c *Config) { c.CacheThreshold = -0.1 },
		func(c *Config) { c.BalanceAbsThreshold = -1 },
		func(c *Config) { c.BalanceRelThreshold = 0.9 },
		func(c *Config) { c.EvictionInterval = -time.Second },
		func(c *Config) { c.MaxTreeSize = 0 },
		func(c *Config) { c.BlockSize = 0 },
	}
	for i, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("case %d accepted %+v", i, c)
		}
	}
	if err := BuiltinConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPickReportsTheMatch: a pick's result carries the longest cached prefix found and the
// prompt's length (tracing reports them): nothing for a first prompt, the shared head for a
// second one.
func TestPickReportsTheMatch(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	b, _ := newBuilder(t, DefaultConfig())
	p := b.Build(f.Group("m"))
	head := strings.Repeat("h", 100)
	first, err := p.Pick(text(head + strings.Repeat("a", 100)))
	if err != nil || first.CacheMatched != 0 || first.CacheInput != 200 {
		t.Fatalf("first prompt: %+v, %v; want no match of 200 characters", first, err)
	}
	second, err := p.Pick(text(head + strings.Repeat("b", 150)))
	if err != nil || second.CacheMatched != 100 || second.CacheInput != 250 {
		t.Fatalf("second prompt: %+v, %v; want 100 of 250 characters matched", second, err)
	}
}
