package mockworker

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// testParams: 1000 prompt tokens/s, 10 ms + 1 ms per sequence decode steps, 16-token blocks.
func testParams() engineParams {
	return engineParams{
		maxRunning: 8, kvTokens: 1 << 16, blockSize: 16, prefillTPS: 1000,
		prefillChunk: 1 << 20, decodeBase: 10 * ms, decodePerReq: 1 * ms,
	}
}

// textSeq makes a sequence whose prompt is text (4 bytes a token).
func textSeq(p engineParams, text string, maxTokens int) *seq {
	return &seq{
		hashes:       promptBlockHashes(nil, []byte(text), nil, p.blockSize),
		promptTokens: (len(text) + 3) / 4,
		maxTokens:    maxTokens,
	}
}

// tokenTimes records when each sequence produced each token.
type tokenTimes map[*seq][]time.Duration

// runUntilIdle steps the engine from now until nothing is left, as the driver would with a
// perfect clock, and returns when every token came out.
func runUntilIdle(t *testing.T, e *engine, now time.Duration) (tokenTimes, time.Duration) {
	t.Helper()
	times := tokenTimes{}
	for range 100000 {
		end, out, ok := e.step(now, 1, 1)
		if !ok {
			return times, now
		}
		for _, em := range out {
			// times[s][i] is when token i+1 came out (0 for tokens before this run).
			for len(times[em.s]) < em.generated-1 {
				times[em.s] = append(times[em.s], 0)
			}
			if len(times[em.s]) != em.generated-1 {
				t.Fatalf("emission says token %d, %d seen", em.generated, len(times[em.s]))
			}
			times[em.s] = append(times[em.s], end)
		}
		now = end
		checkKV(t, e)
	}
	t.Fatal("engine never went idle")
	return nil, 0
}

// checkKV asserts the block accounting invariants against a recount.
func checkKV(t *testing.T, e *engine) {
	t.Helper()
	kv := e.kv
	if kv.free < 0 || kv.evictable < 0 || kv.used() < 0 {
		t.Fatalf("negative counts: free %d evictable %d used %d", kv.free, kv.evictable, kv.used())
	}
	lru := 0
	for b := kv.lru.next; b != &kv.lru; b = b.next {
		if b.refs != 0 || kv.blocks[b.hash] != b {
			t.Fatalf("lru holds a referenced or unnamed block %+v", b)
		}
		lru++
	}
	if lru != kv.evictable {
		t.Fatalf("lru has %d blocks, evictable says %d", lru, kv.evictable)
	}
	held, refs := 0, map[uint64]int{}
	for _, s := range e.running {
		held += s.private
		for _, h := range s.hashes[:s.shared] {
			refs[h]++
		}
	}
	for h, b := range kv.blocks {
		if b.refs != refs[h] {
			t.Fatalf("block %x has %d refs, running sequences hold %d", h, b.refs, refs[h])
		}
	}
	if got := held + len(refs); got != kv.used() {
		t.Fatalf("running sequences hold %d blocks, cache says %d used", got, kv.used())
	}
}

func TestEngineSingleRequestTiming(t *testing.T) {
	p := testParams()
	e := newEngine(p)
	s := textSeq(p, strings.Repeat("abcd", 1000), 3) // 1000 prompt tokens
	if err := e.submit(s, 0); err != nil {
		t.Fatal(err)
	}
	times, _ := runUntilIdle(t, e, 0)
	// First step: 1000 tokens at 1000/s plus a decode step of one sequence.
	want := []time.Duration{1011 * ms, 1022 * ms, 1033 * ms}
	if got := times[s]; !equalDurations(got, want) {
		t.Fatalf("token times %v, want %v", got, want)
	}
	if s.cached != 0 || !s.done || e.kv.used() != 0 {
		t.Fatalf("cached %d done %v used %d", s.cached, s.done, e.kv.used())
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEngineInterTokenLatencyGrowsWithBatch(t *testing.T) {
	p := testParams()
	itl := func(batch int) time.Duration {
		e := newEngine(p)
		var seqs []*seq
		for i := range batch {
			s := textSeq(p, strings.Repeat(string(rune('a'+i)), 8), 5)
			seqs = append(seqs, s)
			if err := e.submit(s, 0); err != nil {
				t.Fatal(err)
			}
		}
		times, _ := runUntilIdle(t, e, 0)
		tt := times[seqs[0]]
		return tt[len(tt)-1] - tt[len(tt)-2]
	}
	if got := itl(1); got != 11*ms {
		t.Errorf("batch 1: ITL %v, want 11ms", got)
	}
	if got := itl(8); got != 18*ms {
		t.Errorf("batch 8: ITL %v, want 10ms + 8×1ms", got)
	}
}

func TestEngineQueueing(t *testing.T) {
	p := testParams()
	p.maxRunning = 2
	e := newEngine(p)
	var seqs []*seq
	for i := range 3 {
		s := textSeq(p, strings.Repeat(string(rune('a'+i)), 8), 2)
		seqs = append(seqs, s)
		if err := e.submit(s, 0); err != nil {
			t.Fatal(err)
		}
	}
	_, _, _ = e.step(0, 1, 1)
	if r := e.load(0, p.maxRunning); r.running != 2 || r.waiting != 1 || r.waitingUncachedToks != 2 {
		t.Fatalf("after one step: %+v, want 2 running, 1 waiting with 2 uncached tokens", r)
	}
	times, _ := runUntilIdle(t, e, 0)
	// Each prompt is 2 tokens (2 ms of prefill). The first two run together: 10+2×1+4 = 16 ms,
	// then 12 ms, and finish at 28 ms; only then is the third admitted: 10+1+2 = 13 ms more.
	if got := times[seqs[2]][0]; got != 41*ms {
		t.Fatalf("queued sequence's first token at %v, want 41ms", got)
	}
	if times[seqs[0]][1] != 28*ms || times[seqs[1]][1] != 28*ms {
		t.Fatalf("first two: %v %v", times[seqs[0]], times[seqs[1]])
	}
}

func TestEngineChunkedPrefill(t *testing.T) {
	p := testParams()
	p.prefillChunk = 256
	e := newEngine(p)
	long := textSeq(p, strings.Repeat("x", 4000), 2)  // 1000 tokens: 4 chunks
	short := textSeq(p, strings.Repeat("y", 40), 200) // decoding alongside
	if err := e.submit(short, 0); err != nil {
		t.Fatal(err)
	}
	_, _, _ = e.step(0, 1, 1) // short prefills (10 tokens) and produces its first token
	if err := e.submit(long, 0); err != nil {
		t.Fatal(err)
	}
	steps := 0
	for long.generated == 0 {
		_, out, ok := e.step(0, 1, 1)
		if !ok || len(out) == 0 || out[0].s != short {
			t.Fatal("the decoding sequence must produce a token every step during the chunked prefill")
		}
		steps++
	}
	if steps != 4 {
		t.Fatalf("1000-token prefill took %d steps at 256 tokens a step, want 4", steps)
	}
}

func TestEngineCacheHitShortensPrefill(t *testing.T) {
	p := testParams()
	e := newEngine(p)
	prefix := strings.Repeat("system prompt ", 200) // 2800 bytes = 700 tokens = 43 full blocks + 12
	a := textSeq(p, prefix+"question one", 1)
	if err := e.submit(a, 0); err != nil {
		t.Fatal(err)
	}
	times, now := runUntilIdle(t, e, 0)
	ttftA := times[a][0]

	b := textSeq(p, prefix+"question two", 1)
	if err := e.submit(b, now); err != nil {
		t.Fatal(err)
	}
	times, _ = runUntilIdle(t, e, now)
	ttftB := times[b][0] - now
	if b.cached != 43*16 {
		t.Fatalf("cached %d tokens, want the 43 shared full blocks (688)", b.cached)
	}
	// Only the uncached tokens are computed: 703-688 = 15 tokens at 1000/s.
	if want := 11*ms + 15*ms; ttftB != want {
		t.Fatalf("TTFT with cache %v, want %v (without: %v)", ttftB, want, ttftA)
	}
	r := e.load(now, p.maxRunning)
	if want := float64(688) / float64(703+703); r.cacheHitRate != want {
		t.Fatalf("cache hit rate %v, want %v", r.cacheHitRate, want)
	}

	// A prompt cached to its last block still computes one token.
	c := textSeq(p, strings.Repeat("z", 64*4), 1) // exactly 4 blocks
	d := textSeq(p, strings.Repeat("z", 64*4), 1)
	_ = e.submit(c, 0)
	_, now = runUntilIdle(t, e, 0)
	_ = e.submit(d, now)
	runUntilIdle(t, e, now)
	if d.cached != 63 {
		t.Fatalf("fully cached prompt: cached %d, want 63 (one token recomputed)", d.cached)
	}
}

func TestEngineConcurrentIdenticalPromptsShareBlocks(t *testing.T) {
	p := testParams()
	e := newEngine(p)
	text := strings.Repeat("same", 64) // 64 tokens, 4 blocks
	a, b := textSeq(p, text, 5), textSeq(p, text, 5)
	_ = e.submit(a, 0)
	_ = e.submit(b, 0)
	_, _, _ = e.step(0, 1, 1) // both prefill in the same step, neither found the other cached
	if a.cached != 0 || b.cached != 0 {
		t.Fatalf("cached %d %d", a.cached, b.cached)
	}
	if got := len(e.kv.blocks); got != 4 {
		t.Fatalf("%d named blocks, want the 4 shared ones", got)
	}
	checkKV(t, e)
	runUntilIdle(t, e, 0)
	if e.kv.evictable != 4 || e.kv.used() != 0 {
		t.Fatalf("after both finished: evictable %d used %d", e.kv.evictable, e.kv.used())
	}
}

func TestEngineEvictionLRU(t *testing.T) {
	p := testParams()
	p.kvTokens = 16 * 10 // 10 blocks
	e := newEngine(p)
	prompt := func(c byte) string { return strings.Repeat(string(c), 4*16*4) } // 4 full blocks
	run := func(c byte) *seq {
		s := textSeq(p, prompt(c), 1)
		if err := e.submit(s, 0); err != nil {
			t.Fatal(err)
		}
		runUntilIdle(t, e, 0)
		return s
	}
	run('a') // a: 4 cached blocks
	run('b') // b: 4 cached blocks; 2 free
	if s := run('a'); s.cached != 63 {
		t.Fatalf("a again: cached %d, want 63", s.cached)
	} // a is now the most recently used
	// c needs 5 blocks (64 prompt + 1 output token): 2 free + 3 evicted, all from b.
	run('c')
	if e.kv.evictions != 3 {
		t.Fatalf("%d evictions, want 3", e.kv.evictions)
	}
	if s := run('a'); s.cached != 63 {
		t.Fatalf("a after c: cached %d, want 63 (b was older)", s.cached)
	}
	// b lost its last three blocks first: released deepest first, they were evicted first,
	// so b keeps its first block.
	if s := run('b'); s.cached != 16 {
		t.Fatalf("b after eviction: cached %d, want 16", s.cached)
	}
}

func TestEngineAdmissionWaitsForKV(t *testing.T) {
	p := testParams()
	p.kvTokens = 16 * 4
	e := newEngine(p)
	a := textSeq(p, strings.Repeat("a", 4*40), 20) // 60 tokens: 4 blocks
	b := textSeq(p, strings.Repeat("b", 4*8), 2)   // 10 tokens: 1 block
	_ = e.submit(a, 0)
	_ = e.submit(b, 0)
	times, _ := runUntilIdle(t, e, 0)
	if times[b][0] <= times[a][len(times[a])-1] {
		t.Fatalf("b ran at %v before a finished at %v although the cache was full", times[b][0], times[a][19])
	}
	tooLong := textSeq(p, strings.Repeat("c", 4*60), 10)
	if err := e.submit(tooLong, 0); !errors.Is(err, errTooLong) {
		t.Fatalf("submit of 70 tokens into 64: %v", err)
	}
}

func TestEngineCancel(t *testing.T) {
	p := testParams()
	p.maxRunning = 1
	e := newEngine(p)
	a := textSeq(p, strings.Repeat("a", 4*64), 100)
	b := textSeq(p, strings.Repeat("b", 4*64), 100)
	_ = e.submit(a, 0)
	_ = e.submit(b, 0)
	_, _, _ = e.step(0, 1, 1)
	e.cancel(b) // waiting
	e.cancel(a) // running
	e.cancel(a) // twice is harmless
	checkKV(t, e)
	if len(e.running)+len(e.waiting) != 0 || e.kv.used() != 0 || e.kv.evictable != 4 {
		t.Fatalf("after cancel: running %d waiting %d used %d evictable %d", len(e.running), len(e.waiting), e.kv.used(), e.kv.evictable)
	}
	if _, _, ok := e.step(0, 1, 1); ok {
		t.Fatal("a step ran with nothing to do")
	}
}

func TestEngineThroughputAndMultipliers(t *testing.T) {
	p := testParams()
	e := newEngine(p)
	s := textSeq(p, "abcd", 200)
	_ = e.submit(s, 0)
	var now time.Duration
	for now < 2*time.Second {
		end, _, ok := e.step(now, 1, 1)
		if !ok {
			t.Fatal("idle")
		}
		now = end
	}
	// One sequence: a token every 11 ms.
	if got := e.throughput(now); got < 88 || got > 93 {
		t.Fatalf("throughput %v tokens/s, want about 1000/11", got)
	}
	end, _, _ := e.step(now, 1, 3)
	if end-now != 33*ms {
		t.Fatalf("decode multiplier 3: step %v, want 33ms", end-now)
	}
	f := textSeq(p, strings.Repeat("q", 400), 1) // 100 tokens: 100 ms of prefill
	_ = e.submit(f, end)
	now = end
	end, _, _ = e.step(now, 2, 1)
	if want := 12*ms + 200*ms; end-now != want {
		t.Fatalf("prefill multiplier 2: step %v, want %v", end-now, want)
	}
}

// TestEngineRandomized drives random arrivals, lengths, shared prefixes and cancellations
// through a small cache and checks the block accounting after every operation.
func TestEngineRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	p := testParams()
	p.kvTokens, p.maxRunning, p.prefillChunk = 16*40, 5, 64
	e := newEngine(p)
	prefixes := []string{strings.Repeat("p", 256), strings.Repeat("q", 512), ""}
	var live []*seq
	now := time.Duration(0)
	for range 3000 {
		switch rng.IntN(4) {
		case 0, 1:
			text := prefixes[rng.IntN(len(prefixes))] + strings.Repeat("x", rng.IntN(300))
			s := textSeq(p, text+"!", 1+rng.IntN(40))
			if err := e.submit(s, now); err == nil {
				live = append(live, s)
			}
		case 2:
			if len(live) > 0 {
				e.cancel(live[rng.IntN(len(live))])
			}
		case 3:
			if end, _, ok := e.step(now, 1, 1); ok {
				now = end
			}
		}
		checkKV(t, e)
	}
	for _, s := range live {
		e.cancel(s)
	}
	if e.kv.used() != 0 || e.kv.free+e.kv.evictable != e.kv.total {
		t.Fatalf("leak: used %d free %d evictable %d total %d", e.kv.used(), e.kv.free, e.kv.evictable, e.kv.total)
	}
}

func TestPromptBlockHashes(t *testing.T) {
	const bs = 2 // 8 bytes a block
	h := func(text string, ids ...uint32) []uint64 { return promptBlockHashes(nil, []byte(text), ids, bs) }
	a, b := h("aaaaaaaabbbbbbbbcc"), h("aaaaaaaabbbbbbbbdd")
	if len(a) != 2 || a[0] != b[0] || a[1] != b[1] {
		t.Fatalf("a partial last block is not hashed; shared full blocks hash alike: %x %x", a, b)
	}
	c := h("Xaaaaaaabbbbbbbb")
	if c[0] == a[0] || c[1] == a[1] {
		t.Fatal("a different first block must change every later hash (chained)")
	}
	if d := h("bbbbbbbbaaaaaaaa"); d[1] == a[0] || d[0] == a[1] {
		t.Fatal("the same block at another position must hash differently")
	}
	ids := h("aaaaaaaabb", 1, 2, 3)
	// "aaaaaaaa" | "bb\0\0" + id 1 | ids 2, 3
	if len(ids) != 3 || ids[0] != a[0] {
		t.Fatalf("text then ids: %x", ids)
	}
	if again := h("aaaaaaaabb", 1, 2, 3); again[1] != ids[1] {
		t.Fatal("not deterministic")
	}
}

func TestEngineLateCallerDoesNotDrift(t *testing.T) {
	p := testParams()
	e := newEngine(p)
	a := textSeq(p, "abcd", 10)
	_ = e.submit(a, 0)
	end, _, _ := e.step(0, 1, 1) // 10 + 1 + 1 ms (1 prompt token)
	if end != 12*ms {
		t.Fatalf("first step ends at %v", end)
	}
	// The caller comes back 5 ms late; a sequence arrived meanwhile, after the step's due start.
	b := textSeq(p, "efgh", 10)
	_ = e.submit(b, end+3*ms)
	end2, out, _ := e.step(end+5*ms, 1, 1)
	if end2 != end+11*ms {
		t.Fatalf("late step ends at %v, want %v: steps follow one another in model time", end2, end+11*ms)
	}
	if len(out) != 1 || out[0].s != a {
		t.Fatal("a sequence that arrived after the step's start must wait for the next step")
	}
	end3, out, _ := e.step(end2, 1, 1)
	if len(out) != 2 || end3 != end2+13*ms {
		t.Fatalf("next step: %d tokens, ends %v; want both, %v", len(out), end3, end2+13*ms)
	}
}

// A worker's DecodeFactors entry stretches the decode part of its steps, not the prefill.
func TestDecodeFactorsSlowDecodeOnly(t *testing.T) {
	cfg := config(func(c *Config) {
		c.Count, c.PrefillTPS, c.DecodeBase, c.DecodePerReq, c.DecodeFactors = 8, 1000, 10*ms, 1*ms, map[int]float64{6: 2, 7: 2}
	})
	for i := range cfg.Count {
		p := cfg.engineParams(i)
		e := newEngine(p)
		s := textSeq(p, strings.Repeat("abcd", 1000), 3) // 1000 prompt tokens: 1 s of prefill
		if err := e.submit(s, 0); err != nil {
			t.Fatal(err)
		}
		times, _ := runUntilIdle(t, e, 0)
		// A step producing one token: 10 ms + 1 ms, × 2 on workers 6 and 7.
		step := 11 * ms
		if i >= 6 {
			step = 22 * ms
		}
		want := []time.Duration{1000*ms + step, 1000*ms + 2*step, 1000*ms + 3*step}
		if got := times[s]; !equalDurations(got, want) {
			t.Errorf("worker %d: token times %v, want %v", i, got, want)
		}
	}
}

func TestDecodeFactorsValidate(t *testing.T) {
	for _, tc := range []struct {
		factors map[int]float64
		bad     bool
	}{
		{map[int]float64{0: 2, 3: 0.5}, false},
		{map[int]float64{4: 2}, true},  // no worker 4 in a fleet of 4
		{map[int]float64{-1: 2}, true}, // no worker -1
		{map[int]float64{1: 0}, true},
		{map[int]float64{1: -2}, true},
	} {
		err := config(func(c *Config) { c.Count, c.DecodeFactors = 4, tc.factors }).Validate()
		if (err != nil) != tc.bad || (err != nil && !strings.Contains(err.Error(), "--decode-factors")) {
			t.Errorf("factors %v: error %v, want bad=%v naming --decode-factors", tc.factors, err, tc.bad)
		}
	}
}
