package bucket

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

// The traces below drive the policy step by step with synthetic times (Maintain(now) once a
// second, as the maintenance loop does) and a seeded Rand, and check each step against the
// spec's "## Bucket" section. No test sleeps or measures time.

// at is the trace's clock: seconds after t0.
func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// tick calls Maintain at every whole second in (from, to], as the maintenance loop would.
func tick(b *Builder, from, to int) {
	for s := from + 1; s <= to; s++ {
		b.Maintain(at(float64(s)))
	}
}

// pick picks for a request of chars characters (or tokens, when tokens > 0) and returns
// the chosen worker's index in f.Workers.
func pick(t *testing.T, f *policytest.Fleet, p policy.Picker, req *policy.Request) int {
	t.Helper()
	res, err := p.Pick(req)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(f.Workers, res.Worker)
	if i < 0 {
		t.Fatalf("picked %s, not in the fleet", res.Worker.URL)
	}
	return i
}

func chars(n int) *policy.Request { return &policy.Request{Text: []byte(strings.Repeat("a", n))} }

// expect sends a request of n characters and checks it lands on worker want.
func expect(t *testing.T, f *policytest.Fleet, p policy.Picker, n, want int, why string) {
	t.Helper()
	if got := pick(t, f, p, chars(n)); got != want {
		t.Fatalf("%s: %d characters went to worker %d, want %d", why, n, got, want)
	}
}

// put adds exactly n characters to worker w's load: every other worker is excluded, so
// neither the bucket nor the balance check can send them elsewhere.
func put(t *testing.T, f *policytest.Fleet, p policy.Picker, w, n int) {
	t.Helper()
	req := chars(n)
	for i, x := range f.Workers {
		if i != w {
			req.Exclude = append(req.Exclude, x)
		}
	}
	if got := pick(t, f, p, req); got != w {
		t.Fatalf("put on worker %d landed on %d", w, got)
	}
}

func wantBounds(t *testing.T, b *Builder, why string, want ...int64) {
	t.Helper()
	if got := b.Bounds(); !slices.Equal(got, want) {
		t.Fatalf("%s: bounds %v, want %v", why, got, want)
	}
}

// TestTraceBimodalFirstCheck: the first check that sees traffic moves the boundary between
// the two modes of a bimodal workload, so that each worker then serves one mode.
func TestTraceBimodalFirstCheck(t *testing.T) {
	f, b, p := setup(t, 2, noBalance)
	wantBounds(t, b, "initial even split of 0-4096", 2047, math.MaxInt64)

	// A check with no traffic changes nothing, and does not count as the first adjustment.
	tick(b, 0, 5)
	wantBounds(t, b, "check without traffic", 2047, math.MaxInt64)

	// 400 short prompts (40,000 characters) and 10 long ones (80,000), interleaved; the even
	// split (2047) happens to send them to their own workers already.
	for i := range 410 {
		n, want := 100, 0
		if i%41 == 40 {
			n, want = 8000, 1
		}
		expect(t, f, p, n, want, "before adjusting")
	}
	tick(b, 5, 9)
	wantBounds(t, b, "no check between the 5 s marks", 2047, math.MaxInt64)
	tick(b, 9, 10)
	// Half the traffic is 60,000 characters: all the short prompts (40,000) fit below it and
	// the long mode cannot be split, so the closest cut is between the modes.
	bs := b.Bounds()
	if bs[0] < 100 || bs[0] >= 8000 {
		t.Fatalf("boundary %d is not between the modes 100 and 8000 (bounds %v)", bs[0], bs)
	}
	for range 20 {
		expect(t, f, p, 100, 0, "short prompt after the adjustment")
		expect(t, f, p, 8000, 1, "long prompt after the adjustment")
	}
	// The same mix with short prompts dominating moves the cut into the short mode, which
	// then goes to worker 0 whole: the boundary is still at 100.
	_, b2, p2 := setup(t, 2, noBalance)
	for range 1000 {
		send(t, p2, 100)
	}
	for range 5 {
		send(t, p2, 8000)
	}
	tick(b2, 0, 5)
	wantBounds(t, b2, "short-dominated mix", 100, math.MaxInt64)
}

// TestTraceReadjustFactorOfTwo: after an adjustment the boundaries stay while the load per
// worker is within a factor of two of the load at that adjustment, inclusive, and are
// recomputed once it is more than twice or less than half of it.
func TestTraceReadjustFactorOfTwo(t *testing.T) {
	_, b, p := setup(t, 2, noBalance)
	sendAll := func(sizes ...int) {
		for _, n := range sizes {
			send(t, p, n)
		}
	}
	rep := func(n, size int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = size
		}
		return s
	}

	// Window [0 s, 5 s): 10×100 + 10×300 = 4,000 characters, 2,000 per worker.
	sendAll(append(rep(10, 100), rep(10, 300)...)...)
	tick(b, 0, 5)
	wantBounds(t, b, "first adjustment (2,000 per worker)", 100, math.MaxInt64)

	// Window [5 s, 10 s): 8,000 characters, 4,000 per worker: exactly twice, no change,
	// although these sizes alone would cut at 1,000.
	sendAll(1000, 1000, 3000, 3000)
	tick(b, 5, 10)
	wantBounds(t, b, "4,000 per worker is exactly 2× the 2,000 of the adjustment", 100, math.MaxInt64)

	// Window [10 s, 15 s): 8,002 characters, 4,001 per worker, more than twice 2,000: the
	// sizes of this window (only: the older ones have left it) decide the new cut.
	sendAll(1, 1, 1000, 1000, 3000, 3000)
	tick(b, 10, 15)
	wantBounds(t, b, "4,001 per worker is more than 2× 2,000", 1000, math.MaxInt64)

	// Window [15 s, 20 s): 4,001 characters, 2,000.5 per worker: exactly half, no change.
	sendAll(4001)
	tick(b, 15, 20)
	wantBounds(t, b, "2,000.5 per worker is exactly half of 4,001", 1000, math.MaxInt64)

	// Window [20 s, 25 s): 4,000 characters, 2,000 per worker, less than half of 4,001.
	sendAll(rep(20, 200)...)
	tick(b, 20, 25)
	wantBounds(t, b, "2,000 per worker is less than half of 4,001", 200, math.MaxInt64)

	// A window without traffic keeps the boundaries: there is nothing to recompute from.
	tick(b, 25, 35)
	wantBounds(t, b, "no traffic", 200, math.MaxInt64)
}

// TestTraceBalanceThresholds: the request goes to the least busy worker exactly when the
// spread exceeds BalanceAbsThreshold and the busiest exceeds BalanceRelThreshold times the
// least busy; equality on either threshold leaves it to the bucket.
func TestTraceBalanceThresholds(t *testing.T) {
	cfg := Config{BalanceAbsThreshold: 100, BalanceRelThreshold: 2}
	// Bucket of 10 characters: worker 0; of 3,000: worker 1 (even split at 2047).
	t.Run("absolute threshold", func(t *testing.T) {
		f, _, p := setup(t, 2, cfg)
		put(t, f, p, 0, 100) // loads 100 / 0: spread 100, not more than 100
		expect(t, f, p, 10, 0, "spread exactly at the absolute threshold")
		// loads 110 / 0: spread 110 > 100 and 110 > 2×0
		expect(t, f, p, 1, 1, "spread above the absolute threshold")
	})
	t.Run("relative threshold", func(t *testing.T) {
		f, _, p := setup(t, 2, cfg)
		put(t, f, p, 0, 400)
		put(t, f, p, 1, 200) // loads 400 / 200: spread 200 > 100, but 400 is exactly 2×200
		expect(t, f, p, 10, 0, "busiest exactly at the relative threshold")
		// loads 410 / 200: 410 > 2×200 and spread 210 > 100
		expect(t, f, p, 1, 1, "busiest above the relative threshold")
	})
	t.Run("relative without absolute", func(t *testing.T) {
		f, _, p := setup(t, 2, cfg)
		put(t, f, p, 0, 50) // 50 > 2×0, but a spread of 50
		expect(t, f, p, 10, 0, "relatively but not absolutely imbalanced")
	})
	t.Run("absolute without relative", func(t *testing.T) {
		f, _, p := setup(t, 2, cfg)
		put(t, f, p, 0, 1000)
		put(t, f, p, 1, 600) // spread 400 > 100, but 1000 < 2×600
		expect(t, f, p, 10, 0, "absolutely but not relatively imbalanced")
		expect(t, f, p, 3000, 1, "absolutely but not relatively imbalanced")
	})
	t.Run("busiest and least busy of three", func(t *testing.T) {
		f, _, p := setup(t, 3, cfg) // bounds 1364, 2729, open
		put(t, f, p, 0, 500)
		put(t, f, p, 1, 200)
		put(t, f, p, 2, 300) // busiest 500, least 200: 500 > 400 and 300 > 100
		expect(t, f, p, 3000, 1, "imbalanced: worker 2's bucket, worker 1 least busy")
		// loads 500 / 3200 / 300: worker 0's bucket, worker 2 now least busy.
		expect(t, f, p, 10, 2, "imbalanced the other way")
	})
	t.Run("the default config", func(t *testing.T) {
		f, _, p := setup(t, 2, DefaultConfig()) // 64 characters, 1.5×
		put(t, f, p, 0, 192)
		put(t, f, p, 1, 128) // spread 64, and 192 is exactly 1.5×128
		expect(t, f, p, 10, 0, "default thresholds, both at equality")
		expect(t, f, p, 1, 1, "default thresholds, both exceeded (202 vs 128)")
	})
}

// TestTraceWindowForgetsOldLoad: characters routed in one second of the window count for
// the balance check until the window has rotated past that second, and never after 5 s.
// The probes are empty requests: they add no load, go to bucket 0, and go to worker 1
// only while worker 0 is the busier by more than the thresholds.
func TestTraceWindowForgetsOldLoad(t *testing.T) {
	f, b, p := setup(t, 2, Config{BalanceAbsThreshold: 100, BalanceRelThreshold: 2})
	probe := func(want int, why string) {
		t.Helper()
		expect(t, f, p, 0, want, why)
	}
	b.Maintain(at(0.5))
	put(t, f, p, 0, 1000) // in the slot of [0 s, 1 s)
	probe(1, "just routed")
	for s := 1; s <= 4; s++ {
		b.Maintain(at(float64(s)))
		probe(1, "within the window, "+time.Duration(s*int(time.Second)).String())
		b.Maintain(at(float64(s) + 0.999))
		probe(1, "within the window, just before the next slot")
	}
	b.Maintain(at(5))
	probe(0, "5 s after the slot began: forgotten")

	// Load routed in [7 s, 8 s) counts through 11.999 s and is gone at 12 s.
	tick(b, 5, 7)
	put(t, f, p, 0, 1000)
	tick(b, 7, 11)
	probe(1, "4 s later")
	b.Maintain(at(11.999))
	probe(1, "4.999 s after the slot began")
	b.Maintain(at(12))
	probe(0, "5 s after the slot began")

	// A maintenance loop that stalls rotates every missed slot at once.
	put(t, f, p, 0, 1000)
	b.Maintain(at(100))
	probe(0, "after a stall of 88 s")
}

// TestTraceSizeUnits: a request's size is its token count when it carries token IDs, else
// its characters (policy.CountChars, not bytes); buckets, loads and adjustments all use it.
func TestTraceSizeUnits(t *testing.T) {
	tokens := func(n int, text string) *policy.Request {
		return &policy.Request{Tokens: make([]uint32, n), Text: []byte(text)}
	}
	t.Run("buckets", func(t *testing.T) {
		f, _, p := setup(t, 2, noBalance) // bound 2047
		for _, c := range []struct {
			why  string
			req  *policy.Request
			want int
		}{
			{"2047 tokens, long text", tokens(2047, strings.Repeat("a", 5000)), 0},
			{"2048 tokens, short text", tokens(2048, "a"), 1},
			{"2047 two-byte characters (4094 bytes)", &policy.Request{Text: []byte(strings.Repeat("é", 2047))}, 0},
			{"2048 two-byte characters", &policy.Request{Text: []byte(strings.Repeat("é", 2048))}, 1},
			{"1023 four-byte characters", &policy.Request{Text: []byte(strings.Repeat("😀", 1023))}, 0},
			{"2048 ASCII characters", chars(2048), 1},
			{"no tokens, no text", &policy.Request{}, 0},
		} {
			if got := pick(t, f, p, c.req); got != c.want {
				t.Errorf("%s: worker %d, want %d", c.why, got, c.want)
			}
		}
	})
	t.Run("loads", func(t *testing.T) {
		cfg := Config{BalanceAbsThreshold: 100, BalanceRelThreshold: 2}
		f, _, p := setup(t, 2, cfg)
		// 100 tokens with 5,000 characters of text: a load of 100, not yet imbalanced.
		if got := pick(t, f, p, tokens(100, strings.Repeat("a", 5000))); got != 0 {
			t.Fatalf("100 tokens went to worker %d", got)
		}
		expect(t, f, p, 0, 0, "100 tokens of load: spread at the threshold")
		f2, _, p2 := setup(t, 2, cfg)
		// 100 two-byte characters: a load of 100 (200 if bytes were counted).
		expect(t, f2, p2, 0, 0, "empty")
		if got := pick(t, f2, p2, &policy.Request{Text: []byte(strings.Repeat("é", 100))}); got != 0 {
			t.Fatalf("100 characters went to worker %d", got)
		}
		expect(t, f2, p2, 0, 0, "100 characters of load: spread at the threshold")
		if got := pick(t, f2, p2, &policy.Request{Text: []byte("é")}); got != 0 {
			t.Fatalf("1 character went to worker %d", got)
		}
		expect(t, f2, p2, 0, 1, "101 characters of load: imbalanced")
	})
	t.Run("adjustment", func(t *testing.T) {
		f, b, p := setup(t, 2, noBalance)
		for range 10 {
			pick(t, f, p, tokens(100, strings.Repeat("a", 9000)))
			pick(t, f, p, tokens(300, "a"))
		}
		tick(b, 0, 5)
		wantBounds(t, b, "cut from token counts", 100, math.MaxInt64)
	})
}

// TestTraceWorkerSetChange: the same workers keep the adapted boundaries across
// snapshots; any change of the set starts again from the even split, and the next check
// with traffic adjusts as if it were the first.
func TestTraceWorkerSetChange(t *testing.T) {
	f, b, p := setup(t, 2, noBalance)
	for range 10 {
		send(t, p, 100)
		send(t, p, 300)
	}
	tick(b, 0, 5)
	wantBounds(t, b, "adapted", 100, math.MaxInt64)

	p = b.Build(f.Group("m"))
	wantBounds(t, b, "rebuilt with the same workers", 100, math.MaxInt64)

	f.Add("m", nil)
	p = b.Build(f.Group("m"))
	wantBounds(t, b, "a worker added", 1364, 2729, math.MaxInt64)
	expect(t, f, p, 2000, 1, "even split of three")

	// Per-worker load within 2× of the last adjustment's: adjusted anyway, the first check
	// after the reset.
	// These 5,500 characters and the 2,000 above: 2,500 per worker against 2,000 at the last
	// adjustment. Thirds of 7,500 end closest to 2,500 and 5,000 after the 200s and the 250s.
	for range 10 {
		send(t, p, 100)
		send(t, p, 200)
		send(t, p, 250)
	}
	tick(b, 5, 10)
	wantBounds(t, b, "first check after the reset", 200, 250, math.MaxInt64)

	p = b.Build(f.Group("m", f.Workers[0], f.Workers[2]))
	wantBounds(t, b, "a worker removed", 2047, math.MaxInt64)
	expect(t, f, p, 3000, 2, "even split of the remaining two")

	p = b.Build(f.Group("m", f.Workers[2], f.Workers[0]))
	wantBounds(t, b, "same workers in another order", 2047, math.MaxInt64)
	expect(t, f, p, 3000, 0, "the order of the group decides the ranges")
}

// TestTraceUnusableOwner: when the bucket's owner is excluded (a retry) or not routable,
// the request goes to the least busy usable worker; with none usable, ErrNoAvailableWorkers.
func TestTraceUnusableOwner(t *testing.T) {
	f, _, p := setup(t, 3, noBalance) // bounds 1364, 2729, open
	put(t, f, p, 1, 50)
	put(t, f, p, 2, 10)
	req := chars(20) // worker 0's bucket
	req.Exclude = []*worker.Worker{f.Workers[0]}
	if got := pick(t, f, p, req); got != 2 {
		t.Fatalf("excluded owner: worker %d, want the least busy 2", got)
	}
	put(t, f, p, 2, 100) // now 1: 50, 2: 130
	f.SetStatus(f.Workers[0], worker.StatusNotReady)
	expect(t, f, p, 20, 1, "owner not ready, least busy usable")
	req.Exclude = []*worker.Worker{f.Workers[1], f.Workers[2]}
	if _, err := p.Pick(req); !errors.Is(err, policy.ErrNoAvailableWorkers) {
		t.Fatalf("nothing usable: err %v", err)
	}
	f.SetStatus(f.Workers[0], worker.StatusReady)
	expect(t, f, p, 20, 0, "owner ready again")
}
