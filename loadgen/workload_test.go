package loadgen

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

func workloadConfig(kind WorkloadKind, seed int64) Config {
	c := DefaultConfig()
	c.BaseURL, c.Model, c.Workload, c.Seed = "http://127.0.0.1:1/v1", "m", kind, seed
	c.Random = RandomConfig{InputLen: 50, OutputLen: 20, Distribution: LengthUniform, RangeRatio: 0.25, NumPrompts: 40}
	c.SharedPrefix = SharedPrefixConfig{NumGroups: 3, PromptsPerGroup: 4, SystemPromptLen: 30, QuestionLen: 5, OutputLen: 9}
	c.MultiTurn = MultiTurnConfig{Users: 3, Rounds: 3, SystemPromptLen: 4, TurnLen: 6, OutputLen: 5}
	c.MixedSize = MixedSizeConfig{NumPrompts: 50, ShortLen: 6, LongLen: 180, LongFraction: 0.1, OutputLen: 7}
	c.derive()
	return c
}

func staticBodies(t *testing.T, c Config) [][]byte {
	t.Helper()
	src, err := newSource(&c)
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*staticSource)
	bodies := make([][]byte, len(s.items))
	for i, it := range s.items {
		bodies[i] = it.body
	}
	return bodies
}

func TestStaticWorkloadsAreDeterministicInSeed(t *testing.T) {
	for _, kind := range []WorkloadKind{WorkloadRandom, WorkloadSharedPrefix, WorkloadMixedSize} {
		a := staticBodies(t, workloadConfig(kind, 1))
		b := staticBodies(t, workloadConfig(kind, 1))
		c := staticBodies(t, workloadConfig(kind, 2))
		same, differ := true, false
		for i := range a {
			same = same && bytes.Equal(a[i], b[i])
			differ = differ || !bytes.Equal(a[i], c[i])
		}
		if !same || !differ {
			t.Errorf("%s: same seed equal %v, other seed differs %v", kind, same, differ)
		}
	}
}

// TestStartAtCyclesTheSameOrderFromElsewhere: StartAt k hands out the items of the seed's
// order from position k on and wraps around; multi-turn refuses it.
func TestStartAtCyclesTheSameOrderFromElsewhere(t *testing.T) {
	c := workloadConfig(WorkloadSharedPrefix, 1)
	from0, err := newSource(&c)
	if err != nil {
		t.Fatal(err)
	}
	items := from0.(*staticSource).items
	c.StartAt = len(items) - 1
	shifted, err := newSource(&c)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*item{items[len(items)-1], items[0], items[1]} {
		got, _ := shifted.next(t.Context())
		if !bytes.Equal(got.body, want.body) {
			t.Fatalf("request %d from StartAt %d is not item %d of the order", i, c.StartAt, (c.StartAt+i)%len(items))
		}
	}
	mt := DefaultConfig()
	mt.BaseURL, mt.Model, mt.Workload, mt.StartAt = "http://127.0.0.1:1/v1", "m", WorkloadMultiTurn, 3
	if err := mt.Validate(); err == nil || !strings.Contains(err.Error(), "--start-at") {
		t.Fatalf("multi-turn with StartAt: %v, want an error naming --start-at", err)
	}
}

func TestRandomWorkloadLengths(t *testing.T) {
	c := workloadConfig(WorkloadRandom, 3)
	src, _ := newSource(&c)
	items := src.(*staticSource).items
	if len(items) != 40 {
		t.Fatalf("%d items, want NumPrompts 40", len(items))
	}
	seenIn, seenOut := map[int]bool{}, map[int]bool{}
	for _, it := range items {
		body := decodeBody(t, it.body)
		words := len(strings.Fields(body.Messages[0].Content))
		if words != it.promptTokens || words < 12 || words > 50 || it.maxTokens < 5 || it.maxTokens > 20 || body.MaxTokens != it.maxTokens {
			t.Fatalf("prompt %d words (item says %d), max_tokens %d: outside [12,50] / [5,20]", words, it.promptTokens, it.maxTokens)
		}
		seenIn[words], seenOut[it.maxTokens] = true, true
	}
	if len(seenIn) < 10 || len(seenOut) < 5 {
		t.Fatalf("lengths barely vary: %d distinct inputs, %d outputs", len(seenIn), len(seenOut))
	}
}

func TestExponentialLengths(t *testing.T) {
	c := workloadConfig(WorkloadRandom, 3)
	c.Random = RandomConfig{InputLen: 20, OutputLen: 10, Distribution: LengthExponential, NumPrompts: 2000}
	src, _ := newSource(&c)
	var sumIn, sumOut, longest int
	for _, it := range src.(*staticSource).items {
		if it.promptTokens < 1 || it.promptTokens > 160 || it.maxTokens < 1 || it.maxTokens > 80 {
			t.Fatalf("lengths %d/%d outside [1, 8·len]", it.promptTokens, it.maxTokens)
		}
		sumIn += it.promptTokens
		sumOut += it.maxTokens
		longest = max(longest, it.promptTokens)
	}
	// Means of ⌈Exp(len)⌉ are len + ~0.5; the seed is fixed, so the bounds are exact.
	if meanIn, meanOut := float64(sumIn)/2000, float64(sumOut)/2000; meanIn < 19 || meanIn > 22 || meanOut < 9.5 || meanOut > 11.5 || longest < 60 {
		t.Fatalf("mean lengths %.2f / %.2f, longest prompt %d: not exponential with means 20 and 10", meanIn, meanOut, longest)
	}
}

func TestSharedPrefixWorkload(t *testing.T) {
	c := workloadConfig(WorkloadSharedPrefix, 5)
	src, _ := newSource(&c)
	items := src.(*staticSource).items
	groups := map[string]int{}
	questions := map[string]bool{}
	inOrder := true
	var prev string
	for i, it := range items {
		body := decodeBody(t, it.body)
		sys, q := body.Messages[0], body.Messages[1]
		if sys.Role != "system" || q.Role != "user" || len(strings.Fields(sys.Content)) != 30 || len(strings.Fields(q.Content)) != 5 || body.MaxTokens != 9 || it.promptTokens != 35 {
			t.Fatalf("item %d: %+v", i, body)
		}
		groups[sys.Content]++
		questions[q.Content] = true
		if i%4 != 0 && sys.Content != prev {
			inOrder = false
		}
		prev = sys.Content
	}
	sessions := map[string]map[string]bool{} // system prompt → sessions
	for _, it := range items {
		sys := decodeBody(t, it.body).Messages[0].Content
		if sessions[sys] == nil {
			sessions[sys] = map[string]bool{}
		}
		sessions[sys][it.session] = true
	}
	for _, s := range sessions {
		if len(s) != 1 {
			t.Fatalf("one prefix group under sessions %v", s)
		}
	}
	if len(groups) != 3 || len(questions) != 12 {
		t.Fatalf("%d groups, %d distinct questions; want 3 and 12", len(groups), len(questions))
	}
	for sys, n := range groups {
		if n != 4 {
			t.Fatalf("group %.20q has %d prompts, want 4", sys, n)
		}
	}
	if inOrder {
		t.Fatal("items are in group order: the seeded shuffle did nothing")
	}
}

// mixedSizeLong returns which of the workload's prompts are long, checking every item's shape.
func mixedSizeLong(t *testing.T, c Config) []bool {
	t.Helper()
	src, err := newSource(&c)
	if err != nil {
		t.Fatal(err)
	}
	mc := c.MixedSize
	items := src.(*staticSource).items
	if len(items) != mc.NumPrompts {
		t.Fatalf("%d items, want NumPrompts %d", len(items), mc.NumPrompts)
	}
	long := make([]bool, len(items))
	sessions, openings := map[string]bool{}, map[string]bool{}
	for i, it := range items {
		body := decodeBody(t, it.body)
		words := strings.Fields(body.Messages[0].Content)
		if len(body.Messages) != 1 || body.Messages[0].Role != "user" || body.MaxTokens != mc.OutputLen || it.maxTokens != mc.OutputLen ||
			len(words) != it.promptTokens || (len(words) != mc.ShortLen && len(words) != mc.LongLen) {
			t.Fatalf("item %d: %d words (item says %d), max_tokens %d: want one user message of %d or %d words, max_tokens %d",
				i, len(words), it.promptTokens, body.MaxTokens, mc.ShortLen, mc.LongLen, mc.OutputLen)
		}
		long[i] = len(words) == mc.LongLen
		sessions[it.session] = true
		openings[strings.Join(words[:6], " ")] = true
	}
	// Every prompt is its own text: no shared prefix for a cache to exploit.
	if len(sessions) != len(items) || len(openings) != len(items) {
		t.Fatalf("%d sessions and %d distinct openings for %d prompts: want every prompt distinct", len(sessions), len(openings), len(items))
	}
	return long
}

func TestMixedSizeWorkload(t *testing.T) {
	c := workloadConfig(WorkloadMixedSize, 4)
	long := mixedSizeLong(t, c)
	count := func(long []bool) (n int) {
		for _, l := range long {
			if l {
				n++
			}
		}
		return n
	}
	// Exactly round(50 × 0.1) = 5 long prompts (180 words, 30× the 6-word short ones).
	if n := count(long); n != 5 {
		t.Fatalf("%d long prompts, want exactly 5", n)
	}
	// The seed places them: another seed puts them elsewhere, the same seed in the same places.
	if other := mixedSizeLong(t, workloadConfig(WorkloadMixedSize, 5)); slices.Equal(long, other) {
		t.Fatal("seeds 4 and 5 put the long prompts at the same positions")
	}
	if again := mixedSizeLong(t, workloadConfig(WorkloadMixedSize, 4)); !slices.Equal(long, again) {
		t.Fatal("seed 4 put the long prompts elsewhere on a second build")
	}
	// The fraction rounds to the nearest count: 0.25 of 50 is 12.5 → 13; 1 makes every prompt long.
	c.MixedSize.LongFraction = 0.25
	if n := count(mixedSizeLong(t, c)); n != 13 {
		t.Fatalf("fraction 0.25: %d long prompts, want 13", n)
	}
	c.MixedSize.LongFraction = 1
	if n := count(mixedSizeLong(t, c)); n != 50 {
		t.Fatalf("fraction 1: %d long prompts, want 50", n)
	}
}

func TestMixedSizeDefaultsAndValidation(t *testing.T) {
	c := DefaultConfig()
	if m := c.MixedSize; m != (MixedSizeConfig{NumPrompts: 4096, ShortLen: 256, LongLen: 7680, LongFraction: 0.1, OutputLen: 32}) {
		t.Fatalf("defaults %+v", m)
	}
	c.BaseURL, c.Model, c.Workload = "http://127.0.0.1:1/v1", "m", WorkloadMixedSize
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.derive(); c.NumRequests != 4096 {
		t.Fatalf("natural size %d, want NumPrompts 4096", c.NumRequests)
	}
	for _, tc := range []struct {
		edit func(*MixedSizeConfig)
		flag string
	}{
		{func(m *MixedSizeConfig) { m.LongFraction = 1.5 }, "--ms-long-fraction"},
		{func(m *MixedSizeConfig) { m.LongFraction = -0.1 }, "--ms-long-fraction"},
		{func(m *MixedSizeConfig) { m.ShortLen = -1 }, "--ms-short-len"},
		{func(m *MixedSizeConfig) { m.LongLen = maxPromptTokens + 1 }, "--ms-long-len"},
		{func(m *MixedSizeConfig) { m.NumPrompts = 1 << 17 }, "--ms-num-prompts"},
	} {
		bad := c
		tc.edit(&bad.MixedSize)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: error %v, want one naming %s", bad.MixedSize, err, tc.flag)
		}
	}
}

func TestRawWorkload(t *testing.T) {
	c := workloadConfig(WorkloadRaw, 0)
	c.Raw.OutputTokens = 3
	bodies := staticBodies(t, c)
	body := decodeBody(t, bodies[0])
	if len(bodies) != 1 || body.Messages[0].Content != rawQuestion || body.MaxTokens != 3 {
		t.Fatalf("raw body %+v", body)
	}
}

// playConversations runs the multi-turn source with a scripted server: the answer of a turn
// is "answer <user> <round>", and every third turn fails.
func playConversations(t *testing.T, seed int64, turns int) []decodedBody {
	t.Helper()
	c := workloadConfig(WorkloadMultiTurn, seed)
	src, _ := newSource(&c)
	var bodies []decodedBody
	for i := range turns {
		it, err := src.next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, decodeBody(t, it.body))
		answer := []byte("answer " + string(rune('a'+it.conv.user)) + " " + string(rune('0'+it.conv.round)))
		src.done(it, outcome{ok: i%7 != 6, answer: answer, outputTokens: 3})
	}
	return bodies
}

func TestMultiTurnExtendsConversations(t *testing.T) {
	bodies := playConversations(t, 9, 30)
	again := playConversations(t, 9, 30)
	for i := range bodies {
		if len(bodies[i].Messages) != len(again[i].Messages) {
			t.Fatalf("turn %d differs between runs with one seed", i)
		}
		for j := range bodies[i].Messages {
			if bodies[i].Messages[j] != again[i].Messages[j] {
				t.Fatalf("turn %d message %d differs between runs with one seed", i, j)
			}
		}
	}
	// The first three turns open the three users' conversations: system + user.
	for i := range 3 {
		if m := bodies[i].Messages; len(m) != 2 || m[0].Role != "system" || m[1].Role != "user" || len(strings.Fields(m[1].Content)) != 6 {
			t.Fatalf("opening turn %d: %+v", i, m)
		}
	}
	// Turn 3 is user 0's second round: its first turn, the answer, a new user message.
	second := bodies[3].Messages
	if len(second) != 4 || second[2].Role != "assistant" || second[2].Content != "answer a 1" || second[3].Role != "user" {
		t.Fatalf("second round %+v", second)
	}
	for j := range 2 {
		if second[j] != bodies[0].Messages[j] {
			t.Fatalf("second round does not extend the first: message %d changed", j)
		}
	}
	// No conversation grows beyond Rounds user turns: 1 system + 3 × (user, assistant) - 1.
	for i, b := range bodies {
		if len(b.Messages) > 6 {
			t.Fatalf("turn %d has %d messages: more than 3 rounds", i, len(b.Messages))
		}
	}
	// Turn 9 restarts user 0 after three rounds: a fresh conversation with new text.
	if m := bodies[9].Messages; len(m) != 2 || m[1] == bodies[0].Messages[1] || m[0] == bodies[0].Messages[0] {
		t.Fatalf("restarted conversation repeats the first one: %+v", m)
	}
	other := playConversations(t, 10, 3)
	if other[0].Messages[1] == bodies[0].Messages[1] {
		t.Fatal("another seed produced the same conversation")
	}
}

func TestMultiTurnThinkTimeDelaysReadiness(t *testing.T) {
	c := workloadConfig(WorkloadMultiTurn, 1)
	c.MultiTurn.Users = 1
	c.MultiTurn.ThinkTime = 1 // 1ns: goes through the timer path
	src, _ := newSource(&c)
	it, _ := src.next(context.Background())
	src.done(it, outcome{ok: true, answer: []byte("a")})
	next, err := src.next(context.Background()) // blocks until the timer fires
	if err != nil || len(decodeBody(t, next.body).Messages) != 4 {
		t.Fatalf("after think time: err %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.next(ctx); err == nil {
		t.Fatal("next returned without a ready conversation")
	}
}

// TestMultiTurnStaggerSpreadsTheFirstConversations: with Stagger, user u's first conversation
// ends after 1 + u mod Rounds turns and every later one after Rounds, so the users are out of
// step from the start; without it every conversation has Rounds turns.
func TestMultiTurnStaggerSpreadsTheFirstConversations(t *testing.T) {
	for _, stagger := range []bool{false, true} {
		c := workloadConfig(WorkloadMultiTurn, 1) // 3 users, 3 rounds
		c.MultiTurn.Stagger = stagger
		src, _ := newSource(&c)
		turns := map[[2]int]int{} // user, generation -> turns sent
		for range 40 {
			it, err := src.next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			turns[[2]int{it.conv.user, it.conv.generation}]++
			src.done(it, outcome{ok: true, answer: []byte("a"), outputTokens: 1})
		}
		for u := range c.MultiTurn.Users {
			want := c.MultiTurn.Rounds
			if stagger {
				want = 1 + u%c.MultiTurn.Rounds
			}
			if got := turns[[2]int{u, 0}]; got != want {
				t.Errorf("stagger %v: user %d's first conversation had %d turns, want %d", stagger, u, got, want)
			}
			if got := turns[[2]int{u, 1}]; got != c.MultiTurn.Rounds {
				t.Errorf("stagger %v: user %d's second conversation had %d turns, want %d", stagger, u, got, c.MultiTurn.Rounds)
			}
		}
	}
}
