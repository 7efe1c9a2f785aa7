package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
)

// item is one request ready to send: its body is built once, before the run (multi-turn:
// when the turn becomes ready), and never mutated afterwards, so clients share it.
type item struct {
	body         []byte
	promptTokens int           // the workload's own prompt size in words: the fallback when the server reports no usage
	maxTokens    int           // requested output tokens
	session      string        // the SessionHeader value
	conv         *conversation // multi-turn only
}

// outcome is what a source learns about a finished request.
type outcome struct {
	ok           bool
	answer       []byte // the generated text; only filled when the source wantsAnswer
	outputTokens int
}

// source hands out requests. Implementations are safe for concurrent use.
type source interface {
	// next blocks until a request is ready, or ctx ends.
	next(ctx context.Context) (*item, error)
	// done reports how a request handed out by next ended.
	done(it *item, o outcome)
	// wantsAnswer reports whether done needs outcome.answer (so clients keep the text).
	wantsAnswer() bool
}

// newSource builds the workload of c (defaults applied).
func newSource(c *Config) (source, error) {
	b := newBodyBuilder(c)
	var items []*item
	switch c.Workload {
	case WorkloadRandom:
		items = randomItems(b, c.Random, c.Seed)
	case WorkloadSharedPrefix:
		items = sharedPrefixItems(b, c.SharedPrefix, c.Seed)
	case WorkloadMultiTurn:
		return newMultiTurnSource(b, c.MultiTurn, c.Seed), nil
	case WorkloadMixedSize:
		items = mixedSizeItems(b, c.MixedSize, c.Seed)
	case WorkloadRaw:
		items = rawItems(b, c.Raw)
	default:
		return nil, fmt.Errorf("cannot build workload %q: unknown kind", c.Workload)
	}
	s := &staticSource{items: items}
	s.cursor.Store(uint64(c.StartAt))
	return s, nil
}

// staticSource cycles through prebuilt items; next never blocks.
type staticSource struct {
	items  []*item
	cursor atomic.Uint64
}

func (s *staticSource) next(ctx context.Context) (*item, error) {
	i := s.cursor.Add(1) - 1
	return s.items[i%uint64(len(s.items))], nil
}

func (s *staticSource) done(*item, outcome) {}
func (s *staticSource) wantsAnswer() bool   { return false }

// Random-stream identifiers, so that each workload part draws from its own sequence.
const (
	streamRandomLengths = 1 + iota
	streamRandomText
	streamSharedPrefixText
	streamSharedPrefixOrder
	streamMixedSizeText
	streamMixedSizeOrder
	streamMultiTurnBase // + user<<32 | generation: keep it last
)

// randomItems is bench_serving's random dataset: lengths uniform in [len*ratio, len], or
// exponential.
func randomItems(b bodyBuilder, rc RandomConfig, seed int64) []*item {
	lengths := rand.New(rand.NewPCG(uint64(seed), streamRandomLengths))
	text := newPrompt(seed, streamRandomText)
	items := make([]*item, rc.NumPrompts)
	for i := range items {
		in := drawLen(lengths, rc.Distribution, rc.InputLen, rc.RangeRatio)
		out := drawLen(lengths, rc.Distribution, rc.OutputLen, rc.RangeRatio)
		msgs := []message{{role: "user", content: text.words(in)}}
		items[i] = &item{body: b.build(msgs, out), promptTokens: in, maxTokens: out, session: "prompt-" + strconv.Itoa(i)}
	}
	return items
}

// sharedPrefixItems is bench_serving's generated-shared-prefix dataset: NumGroups system
// prompts, each followed by PromptsPerGroup distinct questions, in a seeded shuffled order.
func sharedPrefixItems(b bodyBuilder, sc SharedPrefixConfig, seed int64) []*item {
	text := newPrompt(seed, streamSharedPrefixText)
	items := make([]*item, 0, sc.NumGroups*sc.PromptsPerGroup)
	for g := range sc.NumGroups {
		system := text.words(sc.SystemPromptLen)
		session := "group-" + strconv.Itoa(g)
		for range sc.PromptsPerGroup {
			msgs := []message{{role: "system", content: system}, {role: "user", content: text.words(sc.QuestionLen)}}
			items = append(items, &item{
				body:         b.build(msgs, sc.OutputLen),
				promptTokens: sc.SystemPromptLen + sc.QuestionLen,
				maxTokens:    sc.OutputLen,
				session:      session,
			})
		}
	}
	order := rand.New(rand.NewPCG(uint64(seed), streamSharedPrefixOrder))
	order.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	return items
}

// mixedSizeItems is the bimodal workload: NumPrompts distinct prompts, round(NumPrompts ×
// LongFraction) of them LongLen words at seeded positions, the rest ShortLen words.
func mixedSizeItems(b bodyBuilder, mc MixedSizeConfig, seed int64) []*item {
	long := make([]bool, mc.NumPrompts)
	for i := range min(mc.NumPrompts, int(math.Round(float64(mc.NumPrompts)*mc.LongFraction))) {
		long[i] = true
	}
	order := rand.New(rand.NewPCG(uint64(seed), streamMixedSizeOrder))
	order.Shuffle(len(long), func(i, j int) { long[i], long[j] = long[j], long[i] })
	text := newPrompt(seed, streamMixedSizeText)
	items := make([]*item, mc.NumPrompts)
	for i, isLong := range long {
		n := mc.ShortLen
		if isLong {
			n = mc.LongLen
		}
		msgs := []message{{role: "user", content: text.words(n)}}
		items[i] = &item{body: b.build(msgs, mc.OutputLen), promptTokens: n, maxTokens: mc.OutputLen, session: "prompt-" + strconv.Itoa(i)}
	}
	return items
}

// rawQuestion is the fixed prompt of the raw workload: as small as a real request gets.
const rawQuestion = "Say hi."

// rawItems is the overhead workload: one tiny chat request, sent again and again.
func rawItems(b bodyBuilder, rc RawConfig) []*item {
	msgs := []message{{role: "user", content: rawQuestion}}
	return []*item{{body: b.build(msgs, rc.OutputTokens), promptTokens: 2, maxTokens: rc.OutputTokens, session: "raw"}}
}
