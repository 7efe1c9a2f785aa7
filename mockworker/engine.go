package mockworker

import (
	"errors"
	"fmt"
	"time"
)

// engineParams are the performance parameters of the engine model (see EngineConfig).
type engineParams struct {
	maxRunning   int
	kvTokens     int
	blockSize    int
	prefillTPS   float64 // uncached prompt tokens computed per second of model time
	prefillChunk int     // prompt tokens computed per step at most (chunked prefill)
	decodeBase   time.Duration
	decodePerReq time.Duration
}

// engine is the continuous-batching model of one worker, after SGLang's and vLLM's
// schedulers. It is a pure state machine over model time (a Duration since the engine's
// epoch): the caller says what time it is, so tests drive it with a fake clock and no sleeps.
//
// Each step (one forward pass) first admits waiting sequences in arrival order while the
// batch has fewer than maxRunning and the KV cache can hold the newcomer's prompt plus its
// maximum output (admission reserves it all, so nothing is ever preempted); then it computes
// up to prefillChunk uncached prompt tokens, oldest sequence first, and one output token for
// every sequence whose prefill was already complete. A step lasts
//
//	decodeBase + decodePerReq × (sequences producing a token) + prefill tokens / prefillTPS
//
// so inter-token latency grows with the batch. A sequence whose prefill completes in a step
// produces its first token at the end of that step. Not safe for concurrent use.
type engine struct {
	p         engineParams
	kv        *kvCache
	waiting   []*seq
	running   []*seq
	busyUntil time.Duration // end of the last step

	// statistics
	promptTokens uint64 // prompt tokens of admitted sequences (prefix cache queries)
	cachedTokens uint64 // of which found in the cache (hits)
	generated    uint64
	window       [throughputBuckets]bucket // output tokens per recent 100 ms of model time

	emitted []emission // reused by step
}

// seq is one generation request inside the engine.
type seq struct {
	hashes       []uint64 // chained hashes of the prompt's full blocks
	tokens       []uint32 // the full blocks' tokens; only with Config.KVEvents (the events name them)
	promptTokens int
	maxTokens    int
	arrival      time.Duration

	admitted  bool
	cached    int // prompt tokens found in the prefix cache at admission
	prefilled int // prompt tokens in the KV cache (cached + computed)
	generated int
	shared    int // leading hashes this sequence references
	private   int // private blocks held
	lastToken time.Duration
	// firstToken is the model time of the first token (0 before it); atArrival the engine's
	// state when the sequence arrived, filled only for Config.RequestLog (requestlog.go).
	firstToken time.Duration
	atArrival  arrivalState
	done       bool // finished or cancelled; holds nothing
	// remote: the prompt's KV came from a prefill worker (PD decode): admitted as computed.
	remote bool

	sink *tokenSink // where the driver publishes tokens; nil in unit tests
}

// emission is one step's effect on one sequence, for the driver to publish at the step's end.
type emission struct {
	s         *seq
	sink      *tokenSink
	generated int
	cached    int
	finished  bool
	ttft      time.Duration // model time from arrival to the first token; set on the first token
	itl       time.Duration // model time since the previous token; set on later tokens
}

const (
	throughputBuckets = 10
	bucketWidth       = 100 * time.Millisecond
)

type bucket struct {
	index  int64 // step end / bucketWidth
	tokens int
}

var errTooLong = errors.New("prompt tokens plus the maximum output exceed the KV cache")

func newEngine(p engineParams) *engine {
	return &engine{p: p, kv: newKVCache(p.kvTokens, p.blockSize)}
}

// blocksFor is the number of KV blocks a sequence reserves at admission.
func (e *engine) blocksFor(s *seq) int {
	return (s.promptTokens + s.maxTokens + e.p.blockSize - 1) / e.p.blockSize
}

// submit queues s; a sequence that could never fit in the KV cache is refused.
func (e *engine) submit(s *seq, now time.Duration) error {
	if e.blocksFor(s) > e.kv.total {
		return fmt.Errorf("%w (%d + %d tokens, capacity %d)", errTooLong, s.promptTokens, s.maxTokens, e.kv.total*e.p.blockSize)
	}
	s.arrival = now
	e.waiting = append(e.waiting, s)
	return nil
}

// cancel removes s wherever it is and frees what it holds; it is a no-op for a done sequence.
func (e *engine) cancel(s *seq) {
	if s.done {
		return
	}
	if s.admitted {
		e.running = remove(e.running, s)
		e.finish(s)
		return
	}
	e.waiting = remove(e.waiting, s)
	s.done = true
}

func remove(list []*seq, s *seq) []*seq {
	for i, x := range list {
		if x == s {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}

// admit moves waiting sequences into the batch, first come first served: the head of the
// queue blocks those behind it, as in SGLang's and vLLM's default FCFS policy.
// Only sequences that had arrived by the step's start are admitted into it.
func (e *engine) admit(start time.Duration) {
	n := 0
	for _, s := range e.waiting {
		if len(e.running) >= e.p.maxRunning || s.arrival > start {
			break
		}
		matched, unreferenced := e.kv.match(s.hashes)
		need := e.blocksFor(s) - matched
		if !e.kv.canReserve(need, unreferenced) {
			break
		}
		e.kv.acquire(s.hashes[:matched])
		e.kv.reserve(need)
		s.admitted, s.shared, s.private = true, matched, need
		// A fully cached prompt still computes its last token, as real engines do, so that
		// the first output token has logits to come from.
		s.cached = min(matched*e.p.blockSize, s.promptTokens-1)
		s.cached = max(s.cached, 0)
		s.prefilled = s.cached
		if s.remote {
			// The transferred KV is the whole prompt, named in the cache like a computed one.
			s.cached, s.prefilled = s.promptTokens, s.promptTokens
			e.completePrefill(s)
		}
		e.promptTokens += uint64(s.promptTokens)
		e.cachedTokens += uint64(s.cached)
		e.running = append(e.running, s)
		n++
	}
	clear(e.waiting[:n])
	e.waiting = e.waiting[n:]
}

// step runs one forward pass starting at the end of the previous step if sequences are
// running, else at max(now, end of the previous step). It returns the
// step's end and what each sequence produced, or ok=false when there is nothing to run.
// Multipliers scale the prefill and decode parts of the step (runtime fault injection).
func (e *engine) step(now time.Duration, prefillMul, decodeMul float64) (end time.Duration, out []emission, ok bool) {
	start := max(now, e.busyUntil)
	if len(e.running) > 0 {
		// A busy engine's steps follow one another in model time: a late caller (a goroutine
		// that woke late) does not push the schedule back; it catches up.
		start = e.busyUntil
	}
	e.admit(start)
	if len(e.running) == 0 {
		return start, nil, false
	}
	// Decide who computes what, then how long that takes.
	budget, prefillTokens, producing := e.p.prefillChunk, 0, 0
	e.emitted = e.emitted[:0]
	for _, s := range e.running {
		if s.prefilled < s.promptTokens {
			take := min(budget, s.promptTokens-s.prefilled)
			budget -= take
			prefillTokens += take
			s.prefilled += take
			if s.prefilled < s.promptTokens {
				continue // more chunks to go
			}
			e.completePrefill(s)
		}
		producing++
		e.emitted = append(e.emitted, emission{s: s, sink: s.sink})
	}
	dur := time.Duration(float64(e.p.decodeBase+time.Duration(producing)*e.p.decodePerReq)*decodeMul) +
		time.Duration(float64(prefillTokens)/e.p.prefillTPS*prefillMul*float64(time.Second))
	end = start + max(dur, 1)
	e.busyUntil = end

	kept := e.running[:0]
	for i := range e.emitted {
		em := &e.emitted[i]
		s := em.s
		if s.generated == 0 {
			em.ttft = end - s.arrival
			s.firstToken = end
		} else {
			em.itl = end - s.lastToken
		}
		s.generated++
		s.lastToken = end
		em.generated, em.cached = s.generated, s.cached
		em.finished = s.generated >= s.maxTokens
	}
	for _, s := range e.running {
		if s.generated >= s.maxTokens {
			e.finish(s)
			continue
		}
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
	e.count(end, producing)
	return end, e.emitted, true
}

// completePrefill names the sequence's newly computed full prompt blocks in the cache.
func (e *engine) completePrefill(s *seq) {
	bs := e.p.blockSize
	for i := s.shared; i < len(s.hashes); i++ {
		h := s.hashes[i]
		if e.kv.register(h) && e.kv.record && len(s.tokens) >= (i+1)*bs {
			ev := kvEvent{kind: kvStored, hash: h, tokens: s.tokens[i*bs : (i+1)*bs]}
			if i > 0 {
				ev.parent, ev.hasParent = s.hashes[i-1], true
			}
			e.kv.events = append(e.kv.events, ev)
		}
		s.private--
	}
	s.shared = len(s.hashes)
}

// finish releases what s holds; its prompt blocks stay cached for later prompts.
func (e *engine) finish(s *seq) {
	e.kv.release(s.hashes[:s.shared], s.private)
	s.shared, s.private, s.done = 0, 0, true
}

func (e *engine) count(end time.Duration, tokens int) {
	e.generated += uint64(tokens)
	idx := int64(end / bucketWidth)
	b := &e.window[idx%throughputBuckets]
	if b.index != idx {
		*b = bucket{index: idx}
	}
	b.tokens += tokens
}

// load is the engine's report at model time now.
func (e *engine) load(now time.Duration, maxRunning int) loadReport {
	r := loadReport{
		running:        len(e.running),
		waiting:        len(e.waiting),
		usedTokens:     e.kv.used() * e.p.blockSize,
		maxTotalTokens: e.kv.total * e.p.blockSize,
		maxRunning:     maxRunning,
		genThroughput:  e.throughput(now),
	}
	if e.promptTokens > 0 {
		r.cacheHitRate = float64(e.cachedTokens) / float64(e.promptTokens)
	}
	for _, s := range e.waiting {
		matched, _ := e.kv.match(s.hashes)
		r.waitingUncachedToks += s.promptTokens - min(matched*e.p.blockSize, s.promptTokens)
	}
	return r
}

// throughput is the output tokens per second over about the last second of model time: the
// tokens of the current 100 ms bucket and the nine before it, over the time they cover.
func (e *engine) throughput(now time.Duration) float64 {
	cur := int64(now / bucketWidth)
	total := 0
	for _, b := range e.window {
		if b.index > cur-throughputBuckets && b.index <= cur {
			total += b.tokens
		}
	}
	covered := now - time.Duration(cur-throughputBuckets+1)*bucketWidth
	if now < throughputBuckets*bucketWidth {
		covered = now // the engine is younger than a window
	}
	if covered <= 0 {
		return 0
	}
	return float64(total) / covered.Seconds()
}
