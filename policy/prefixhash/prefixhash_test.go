package prefixhash

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

func build(t testing.TB, f *policytest.Fleet, cfg Config) (policy.Picker, *metrics.Set) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.NewSet()
	return New(cfg, testutil.NewRand(1)).Build(f.Group("m")), cfg.Metrics
}

func pick(t *testing.T, p policy.Picker, req *policy.Request) *worker.Worker {
	t.Helper()
	res, err := p.Pick(req)
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return res.Worker
}

func branch(set *metrics.Set, b string) uint64 {
	return set.GetOrCreateCounter(`smg_prefix_hash_policy_branch_total{branch="` + b + `"}`).Get()
}

func TestSameHeadSameWorker(t *testing.T) {
	f := policytest.NewFleet(t, 6, "m")
	cfg := DefaultConfig()
	cfg.PrefixTokenCount = 8 // 32 characters
	p, set := build(t, f, cfg)
	head := strings.Repeat("system prompt! ", 3) // 45 characters: beyond the 32 hashed
	first := pick(t, p, &policy.Request{Text: []byte(head + "question one")})
	for i := range 20 {
		if got := pick(t, p, &policy.Request{Text: fmt.Appendf(nil, "%squestion %d", head, i)}); got != first {
			t.Fatalf("same 32-character head went to %s and %s", first.URL, got.URL)
		}
	}
	seen := map[*worker.Worker]bool{}
	for i := range 12 {
		seen[pick(t, p, &policy.Request{Text: fmt.Appendf(nil, "prompt %d differs early", i)})] = true
	}
	if len(seen) < 2 {
		t.Fatal("12 distinct heads all went to one worker")
	}
	if got := branch(set, BranchRingHit); got != 33 {
		t.Fatalf("ring_hit = %d, want 33", got)
	}
}

func TestKeyPrecedence(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	cfg := DefaultConfig()
	cfg.PrefixTokenCount = 4
	p, _ := build(t, f, cfg)
	byHeader := pick(t, p, &policy.Request{RoutingKey: []byte("session")})
	byTokens := pick(t, p, &policy.Request{Tokens: []uint32{1, 2, 3, 4}})
	// A header beats tokens and text; tokens beat text; only the first 4 tokens count.
	for range 10 {
		if got := pick(t, p, &policy.Request{RoutingKey: []byte("session"), Tokens: []uint32{9}, Text: []byte("x")}); got != byHeader {
			t.Fatal("routing-key header did not decide")
		}
		if got := pick(t, p, &policy.Request{Tokens: []uint32{1, 2, 3, 4, 99, 98}, Text: []byte("other")}); got != byTokens {
			t.Fatal("first 4 tokens did not decide")
		}
	}
	// A routing key that is not valid UTF-8 is not a key: the text decides.
	byText := pick(t, p, &policy.Request{Text: []byte("same text")})
	if got := pick(t, p, &policy.Request{RoutingKey: []byte{0xff}, Text: []byte("same text")}); got != byText {
		t.Fatal("an invalid routing key was used")
	}
}

func TestNoKeyGoesToLeastLoaded(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	f.Workers[0].InFlight.Store(4)
	f.Workers[1].InFlight.Store(1)
	f.Workers[2].InFlight.Store(2)
	p, set := build(t, f, DefaultConfig())
	if got := pick(t, p, &policy.Request{}); got != f.Workers[1] {
		t.Fatalf("keyless request went to %s, want the least loaded", got.URL)
	}
	if branch(set, BranchNoRoutingKey) != 1 {
		t.Fatal("no_routing_key not counted")
	}
}

func TestOverloadWalk(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	cfg := DefaultConfig() // factor 1.25, margin 10
	p, set := build(t, f, cfg)
	req := &policy.Request{Text: []byte("a prompt")}
	target := pick(t, p, req)
	var others []*worker.Worker
	for _, w := range f.Workers {
		if w != target {
			others = append(others, w)
			w.InFlight.Store(8)
		}
	}
	// Mean (12+24)/4 = 9: 12 > 1.25*9 = 11.25 but not > 9+10: the margin holds it.
	target.InFlight.Store(12)
	if got := pick(t, p, req); got != target {
		t.Fatalf("within the absolute margin the request moved to %s", got.URL)
	}
	// Mean (40+24)/4 = 16: 40 > 20 and 40 > 26: overloaded, the least loaded takes it.
	target.InFlight.Store(40)
	others[1].InFlight.Store(3)
	p, set = build(t, f, cfg) // a fresh picker: its fleet mean starts current
	if got := pick(t, p, req); got != others[1] {
		t.Fatalf("overloaded target: went to %s, want the least loaded %s", got.URL, others[1].URL)
	}
	if branch(set, BranchLoadBalanceWalk) != 1 {
		t.Fatal("load_balance_walk not counted")
	}
	// Everyone overloaded relative to the mean is impossible, but with the target the only
	// worker left it is used anyway.
	req.Exclude = others
	if got := pick(t, p, req); got != target {
		t.Fatalf("only worker left: went to %s", got.URL)
	}
}

func TestCacheBoundaries(t *testing.T) {
	f := policytest.NewFleet(t, 16, "m")
	cfg := DefaultConfig()
	cfg.PrefixTokenCount = 2
	cfg.CacheBoundaries = []int{4, 8}
	p, _ := build(t, f, cfg)
	head := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	// A turn of 9 tokens and a follow-up of 12 share the 8-token boundary head.
	a := pick(t, p, &policy.Request{Tokens: append(head[:8:8], 9)})
	b := pick(t, p, &policy.Request{Tokens: append(head[:8:8], 10, 11, 12, 13)})
	if a != b {
		t.Fatalf("boundary-aligned heads split: %s vs %s", a.URL, b.URL)
	}
	// Shorter than the smallest boundary: the --prefix-token-count key (2 tokens).
	s1 := pick(t, p, &policy.Request{Tokens: []uint32{7, 7, 1}})
	s2 := pick(t, p, &policy.Request{Tokens: []uint32{7, 7, 2}})
	if s1 != s2 {
		t.Fatal("short requests with the same 2-token head split")
	}
	// Text counts 4 characters per token: 16 characters reach the 4-token boundary.
	t1 := pick(t, p, &policy.Request{Text: []byte("0123456789abcdefXY")})
	t2 := pick(t, p, &policy.Request{Text: []byte("0123456789abcdefZZZZ")})
	if t1 != t2 {
		t.Fatal("texts sharing the 16-character boundary head split")
	}
	// An overloaded deepest target retries the shallower 4-token head before the fallback.
	// Find a head whose 8-token and 4-token keys land on different workers (most do).
	var deep, shallow *worker.Worker
	for base := uint32(100); deep == shallow; base++ {
		head = []uint32{base, 2, 3, 4, 5, 6, 7, 8}
		deep = pick(t, p, &policy.Request{Tokens: head})
		shallow = pick(t, p, &policy.Request{Tokens: head[:5]}) // reaches only the 4 boundary
	}
	deep.InFlight.Store(100)
	p, _ = build(t, f, cfg)
	if got := pick(t, p, &policy.Request{Tokens: head}); got != shallow {
		t.Fatalf("overloaded deep target: went to %s, want the shallower head's %s", got.URL, shallow.URL)
	}
}

func TestNoAvailableWorkers(t *testing.T) {
	f := policytest.NewFleet(t, 2, "m")
	p, set := build(t, f, DefaultConfig())
	for _, req := range []*policy.Request{{Text: []byte("x"), Exclude: f.Workers}, {Exclude: f.Workers}} {
		if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
			t.Fatalf("err = %v", err)
		}
	}
	if branch(set, BranchNoHealthyWorkers) != 2 {
		t.Fatal("no_healthy_workers not counted")
	}
}

func TestCutChars(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 3, "hel"},
		{"hello", 9, "hello"},
		{"héllo", 2, "hé"},
		{"日本語テキスト", 3, "日本語"},
		{"", 4, ""},
		{"ab", 0, ""},
	}
	for _, c := range cases {
		if got := c.s[:cutChars([]byte(c.s), c.n)]; got != c.want {
			t.Errorf("cutChars(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func FuzzCutChars(f *testing.F) {
	f.Add([]byte("héllo wörld"), 3)
	f.Add([]byte("日本語"), 2)
	f.Add([]byte{0xff, 0x80, 'a'}, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<20 {
			return
		}
		cut := cutChars(b, n)
		if cut < 0 || cut > len(b) {
			t.Fatalf("cut %d out of range", cut)
		}
		if utf8.Valid(b) {
			if want := min(n, utf8.RuneCount(b)); utf8.RuneCount(b[:cut]) != want {
				t.Fatalf("cutChars(%q, %d) kept %d characters, want %d", b, n, utf8.RuneCount(b[:cut]), want)
			}
		}
		// charCuts agrees with cutChars at every boundary it reports.
		bs := []int{1, 2, 5}
		var cuts [MaxCacheBoundaries]int
		for i := range charCuts(b, bs, &cuts) {
			if cuts[i] != cutChars(b, bs[i]*CharsPerToken) {
				t.Fatalf("charCuts boundary %d at %d, cutChars says %d", bs[i], cuts[i], cutChars(b, bs[i]*CharsPerToken))
			}
		}
	})
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.PrefixTokenCount = 0 },
		func(c *Config) { c.LoadFactor = 0.9 },
		func(c *Config) { c.BalanceAbsThreshold = -1 },
		func(c *Config) { c.CacheBoundaries = []int{8, 4} },
		func(c *Config) { c.CacheBoundaries = []int{0} },
		func(c *Config) { c.CacheBoundaries = make([]int, MaxCacheBoundaries+1) },
	}
	for i, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}
