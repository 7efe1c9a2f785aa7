package policytest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Engine is the performance model of one simulated worker: mockworker's continuous-batching
// engine (--mode engine) reduced to what routing quality depends on. Every step computes up to
// PrefillChunk uncached prompt tokens, oldest sequence first, and one output token for every
// sequence whose prefill is complete; it lasts DecodeBase + DecodePerReq × (sequences producing
// a token) + prefill tokens / PrefillTPS. Every arrival joins the batch at the next step (no
// admission limit), so, as with the mock, the report's waiting queue stays empty and a
// backlog shows only as running sequences.
type Engine struct {
	PrefillTPS   float64       // uncached prompt tokens per second; default 16,000
	PrefillChunk int           // prompt tokens per step at most; default 8,192
	DecodeBase   time.Duration // default 8 ms
	DecodePerReq time.Duration // default 0.1 ms
	// KVTokens is the KV cache the report's token usage is relative to; default 65,536.
	KVTokens int
	// CacheGroups is how many distinct prefix groups the engine's prefix cache holds (LRU); 0
	// disables the cache.
	CacheGroups int
	// CacheTokens, when set, sizes the prefix cache in prompt tokens instead, as mockworker's
	// paged cache is (its --kv-tokens): a group's entry is its last computed prompt, the least
	// recently used entry gives up tokens from its tail first (the mock releases a prompt's
	// deepest blocks first, so they are evicted first) until the entries fit, and a request
	// reuses as much of its prefix as its group's entry still holds. Multi-turn conversations
	// whose context outgrows the fleet's KV then miss as they do on the mocks, which a count
	// of groups cannot show. Running sequences' blocks are not modelled.
	CacheTokens int
	// DecodeFactor multiplies the decode part of every step (DecodeBase + DecodePerReq ×
	// sequences), as mockworker's --decode-factors makes a slower engine; default 1.
	DecodeFactor float64
}

// DefaultEngine returns the Engine every simulation starts from: mockworker's engine mode at
// its defaults (16,000 prefill tokens/s in chunks of 8,192, 8 ms + 0.1 ms per sequence a
// step, 65,536 KV tokens, decode factor 1) with no prefix cache (CacheGroups and CacheTokens
// 0). Change the fields a case needs; Validate refuses the zeros that make no sense.
func DefaultEngine() Engine {
	return Engine{PrefillTPS: 16_000, PrefillChunk: 8192, DecodeBase: 8 * time.Millisecond,
		DecodePerReq: 100 * time.Microsecond, KVTokens: 65_536, DecodeFactor: 1}
}

// DefaultEngines returns n DefaultEngine()s, one per worker of a fleet.
func DefaultEngines(n int) []Engine {
	return slices.Repeat([]Engine{DefaultEngine()}, n)
}

// Validate reports the fields whose value makes no sense (a zero prefill rate, no KV...);
// DecodePerReq 0 (no batch effect), CacheGroups 0 and CacheTokens 0 (no prefix cache) are
// meaningful.
func (e Engine) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format+" (start from policytest.DefaultEngine())", args...))
	}
	if !(e.PrefillTPS > 0) {
		bad("Engine.PrefillTPS %v: use a positive rate", e.PrefillTPS)
	}
	if e.PrefillChunk < 1 {
		bad("Engine.PrefillChunk %d: use at least 1 token", e.PrefillChunk)
	}
	if e.DecodeBase <= 0 {
		bad("Engine.DecodeBase %v: use a positive step time", e.DecodeBase)
	}
	if e.DecodePerReq < 0 {
		bad("Engine.DecodePerReq %v: use 0 (no batch effect) or more", e.DecodePerReq)
	}
	if e.KVTokens < 1 {
		bad("Engine.KVTokens %d: use at least 1 token", e.KVTokens)
	}
	if e.CacheGroups < 0 || e.CacheTokens < 0 {
		bad("Engine.CacheGroups %d, CacheTokens %d: use 0 (no cache) or more", e.CacheGroups, e.CacheTokens)
	}
	if !(e.DecodeFactor > 0) {
		bad("Engine.DecodeFactor %v: use a positive factor (1: as fast as the default)", e.DecodeFactor)
	}
	return errors.Join(errs...)
}

// SimRequest is one request of a simulated trace.
type SimRequest struct {
	At           time.Duration // arrival, model time since the start
	Group        int           // prefix group (-1: none); a cached group skips PrefixTokens
	PrefixTokens int           // leading prompt tokens shared by the group
	PromptTokens int
	OutputTokens int
	Text         []byte // routing text handed to the picker
	conv         *conversation
}

// PoissonTrace returns requests arriving at rate per second of model time for d, each made by
// gen; the same seed gives the same trace.
func PoissonTrace(seed uint64, rate float64, d time.Duration, gen func(rng *rand.Rand) SimRequest) []SimRequest {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	var out []SimRequest
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if at >= d {
			return out
		}
		r := gen(rng)
		r.At = at
		out = append(out, r)
	}
}

// SimConfig configures Simulate.
type SimConfig struct {
	// Engines holds each worker's model (len = fleet size), each from DefaultEngine.
	Engines []Engine
	// ReportEvery is the load-report period (the gateway's --load-monitor-interval in model
	// time); default 4 s, the routing-quality suite's 1 s at time scale 4. Must be positive.
	ReportEvery time.Duration
	// Warmup is the leading model time left out of the statistics; default 4 s, 0 keeps
	// everything.
	Warmup time.Duration
	// ReportSpread spreads each round's answers: every engine answers its poll (the report is
	// taken) at a uniformly random offset in [0, ReportSpread) after the round starts, as the
	// load monitor's polls come back one by one, each published as it comes. 0: all at the
	// round's start.
	ReportSpread time.Duration
	// ReportLag is the time from an engine's answer to the report's publication (the poll's
	// way back and its parsing). Default 0.
	ReportLag time.Duration
	// CreditFromPublication restarts a worker's since-report credit when its report is
	// published (Worker.SetLoad), as an earlier worker/loadmon did; false, as it
	// does now, counts it from the moment the poll left (Worker.SetLoadSince), so the work
	// sent during ReportLag keeps its credit.
	CreditFromPublication bool
	// Seed seeds the report offsets.
	Seed uint64
	// Conversations, when set, makes the trace's requests multi-turn turns taken from it at
	// their arrival (only the trace's arrival times are used): loadgen's multi-turn source,
	// whose next turn of a conversation is ready only once its previous answer is complete
	// (Conversations explains why that order matters). An arrival with no conversation ready
	// waits for the next answer, as loadgen's open loop does; its TTFT counts from then.
	Conversations *Conversations
}

// DefaultSimConfig returns the SimConfig a simulation starts from: engines (one per worker,
// each from DefaultEngine), reports every 4 s, 4 s of warm-up, all answers at the round's
// start, no lag.
func DefaultSimConfig(engines []Engine) SimConfig {
	return SimConfig{Engines: engines, ReportEvery: 4 * time.Second, Warmup: 4 * time.Second}
}

// Validate reports what makes no sense: no report period, a negative warm-up, spread or lag,
// an Engine Validate refuses.
func (c SimConfig) Validate() error {
	var errs []error
	if c.ReportEvery <= 0 {
		errs = append(errs, fmt.Errorf("SimConfig.ReportEvery %v: use a positive period (start from policytest.DefaultSimConfig())", c.ReportEvery))
	}
	if c.Warmup < 0 || c.ReportSpread < 0 || c.ReportLag < 0 {
		errs = append(errs, fmt.Errorf("SimConfig.Warmup %v, ReportSpread %v, ReportLag %v: use 0 or more", c.Warmup, c.ReportSpread, c.ReportLag))
	}
	for i, e := range c.Engines {
		if err := e.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("Engines[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// SimResult is what a simulated run measured, after the warm-up.
type SimResult struct {
	TTFT []time.Duration // sorted
	// Picks counts each worker's requests.
	Picks []int
	// MaxWindowShare is the largest share any worker took of the picks between two reports,
	// times the fleet size (1 = fair; a worker taking every pick of a window scores n).
	MaxWindowShare float64
	// MaxBacklog is the most sequences any worker ever had waiting for their first token.
	MaxBacklog int
	// HitRate is cached prompt tokens over prompt tokens.
	HitRate float64
	// WorkerTTFT holds each worker's TTFTs (sorted): whose requests make the tail.
	WorkerTTFT [][]time.Duration
}

// TTFTQuantile returns the q-quantile of the TTFTs (nearest rank).
func (r SimResult) TTFTQuantile(q float64) time.Duration { return quantile(r.TTFT, q) }

// WorkerTTFTQuantile returns the q-quantile of worker i's TTFTs (nearest rank), 0 when it
// served none after the warm-up.
func (r SimResult) WorkerTTFTQuantile(i int, q float64) time.Duration {
	return quantile(r.WorkerTTFT[i], q)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Simulate routes trace with p over ws (one simulated engine per worker, cfg.Engines[i] for
// ws[i]) on a synthetic clock and returns what it measured. It does what the gateway does
// around a pick, through a worker.Hold: the dispatch credit (policy.DispatchTokens: the
// routing text's size) and the in-flight count, up at the pick and down when the last token
// is out; the requests awaiting their first token, up at the pick and down at the first; each
// answer's decode steps, the gaps between its tokens after the first (worker.DecodeTimer; every
// worker's estimate is cleared at the start); and every ReportEvery
// it polls each engine's load report (running requests, output tokens per second over the
// last second, KV usage; no waiting queue, as Engine explains) and publishes it as the load
// monitor does (SimConfig.ReportSpread, ReportLag, CreditFromPublication). Deterministic: no
// goroutines, no sleeps, no wall clock.
// A cfg that Validate refuses, or whose Engines are not one per worker, panics.
func Simulate(p policy.Picker, ws []*worker.Worker, trace []SimRequest, cfg SimConfig) SimResult {
	sim := newSimulation(p, ws, cfg)
	for i := 0; i < len(trace) || anyBusy(sim.engines); {
		// The next event: an arrival, a report round, a report taken or published, or the end
		// of a step, earliest first; at equal times steps end first, then reports, then
		// arrivals.
		now := sim.nextEvent(trace, i)
		sim.finishSteps(now)
		if now == sim.nextReport {
			sim.reportRound(now, i < len(trace))
		}
		sim.takeAndPublishReports(now)
		sim.resumeConversations(now)
		i = sim.arrive(trace, i, now)
		sim.startSteps(now)
	}
	return sim.result()
}

// never is a time no event reaches.
const never = time.Duration(math.MaxInt64)

// simulation is the state of one Simulate run.
type simulation struct {
	p       policy.Picker
	cfg     SimConfig
	engines []*simEngine
	idx     map[*worker.Worker]int
	rng     *rand.Rand
	res     SimResult
	// window counts each worker's picks since the last report round.
	window []int
	// prompt and cached are the prompt tokens dispatched after the warm-up, and how many of
	// them the engines found cached.
	prompt, cached int
	nextReport     time.Duration
}

// newSimulation resets ws for a run (no load report, nothing in flight, no decode estimate)
// and gives each its engine. It panics on a cfg Simulate refuses.
func newSimulation(p policy.Picker, ws []*worker.Worker, cfg SimConfig) *simulation {
	if err := cfg.Validate(); err != nil {
		panic("policytest.Simulate: " + err.Error())
	}
	if len(cfg.Engines) < len(ws) {
		panic(fmt.Sprintf("policytest.Simulate: %d Engines for %d workers: give one per worker (DefaultEngines(n))", len(cfg.Engines), len(ws)))
	}
	sim := &simulation{p: p, cfg: cfg, engines: make([]*simEngine, len(ws)), idx: map[*worker.Worker]int{},
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		res:    SimResult{Picks: make([]int, len(ws)), WorkerTTFT: make([][]time.Duration, len(ws))},
		window: make([]int, len(ws))}
	for i, w := range ws {
		sim.idx[w] = i
		sim.engines[i] = &simEngine{e: cfg.Engines[i], w: w, takeAt: math.MaxInt64, publishAt: math.MaxInt64}
		w.SetLoad(nil)
		w.InFlight.Store(0)
		w.ClearDecode()
		if n, _, _ := w.Awaiting(); n != 0 { // a previous run ends with every request answered
			panic("policytest.Simulate: a worker has requests awaiting their first token before the run")
		}
	}
	return sim
}

// nextEvent is the time of the earliest event pending, the arrival of trace[i] included.
func (sim *simulation) nextEvent(trace []SimRequest, i int) time.Duration {
	now := never
	if i < len(trace) {
		now = trace[i].At
	}
	now = min(now, sim.nextReport)
	for _, e := range sim.engines {
		if e.busy {
			now = min(now, e.stepEnd)
		}
		now = min(now, e.takeAt, e.publishAt)
	}
	return now
}

// finishSteps ends the engine steps due at now and records the first tokens they produced.
func (sim *simulation) finishSteps(now time.Duration) {
	for _, e := range sim.engines {
		if !e.busy || e.stepEnd != now {
			continue
		}
		for _, s := range e.finishStep(now) {
			if s.req.At >= sim.cfg.Warmup {
				sim.res.TTFT = append(sim.res.TTFT, s.ttft)
				sim.res.WorkerTTFT[sim.idx[e.w]] = append(sim.res.WorkerTTFT[sim.idx[e.w]], s.ttft)
			}
		}
	}
}

// reportRound starts a load-report round at now: it closes the picks' window and schedules
// each engine's answer (SimConfig.ReportSpread). Without more arrivals no round follows.
func (sim *simulation) reportRound(now time.Duration, moreArrivals bool) {
	if sim.nextReport >= sim.cfg.Warmup {
		sim.closeWindow()
	}
	for _, e := range sim.engines {
		e.mark, e.takeAt = e.w.DispatchMark(), now
		if sim.cfg.ReportSpread > 0 {
			e.takeAt += time.Duration(sim.rng.Int64N(int64(sim.cfg.ReportSpread)))
		}
	}
	sim.nextReport += sim.cfg.ReportEvery
	if !moreArrivals {
		sim.nextReport = never // no more picks to inform
	}
}

// closeWindow folds the picks since the last round into MaxWindowShare.
func (sim *simulation) closeWindow() {
	n := len(sim.window)
	total := 0
	for _, c := range sim.window {
		total += c
	}
	if total >= 2*n { // too few picks say nothing about shares
		sim.res.MaxWindowShare = max(sim.res.MaxWindowShare, float64(slices.Max(sim.window))*float64(n)/float64(total))
	}
	clear(sim.window)
}

// takeAndPublishReports takes the reports due at now and publishes those whose lag has
// passed, as the load monitor does (SimConfig.ReportLag, CreditFromPublication).
func (sim *simulation) takeAndPublishReports(now time.Duration) {
	for _, e := range sim.engines {
		if e.takeAt == now {
			e.pending, e.takeAt, e.publishAt = e.report(now), never, now+sim.cfg.ReportLag
		}
		if e.publishAt == now {
			if sim.cfg.CreditFromPublication {
				e.w.SetLoad(e.pending)
			} else {
				e.w.SetLoadSince(e.pending, e.mark)
			}
			e.pending, e.publishAt = nil, never
		}
	}
}

// resumeConversations makes the conversations whose answer completed ready, and gives them to
// the arrivals that found none ready.
func (sim *simulation) resumeConversations(now time.Duration) {
	conv := sim.cfg.Conversations
	if conv == nil {
		return
	}
	for _, e := range sim.engines {
		for _, s := range e.completed {
			conv.done(s.req)
		}
		e.completed = e.completed[:0]
	}
	for ; conv.waiting > 0; conv.waiting-- {
		r, ok := conv.next(now)
		if !ok {
			break
		}
		sim.dispatch(r)
	}
}

// arrive dispatches the requests of trace from i that arrive at now and returns the index of
// the first one left. With Conversations an arrival takes the next ready turn, or waits.
func (sim *simulation) arrive(trace []SimRequest, i int, now time.Duration) int {
	for ; i < len(trace) && trace[i].At == now; i++ {
		r := &trace[i]
		if conv := sim.cfg.Conversations; conv != nil {
			var ok bool
			if r, ok = conv.next(now); !ok {
				conv.waiting++
				continue
			}
		}
		sim.dispatch(r)
	}
	return i
}

// dispatch picks a worker for r, which arrives at its engine now, as the gateway would.
func (sim *simulation) dispatch(r *SimRequest) {
	pr := policy.Request{Text: r.Text}
	out, err := sim.p.Pick(&pr)
	if err != nil {
		panic("policytest.Simulate: pick failed: " + err.Error())
	}
	i := sim.idx[out.Worker]
	e := sim.engines[i]
	tokens := policy.DispatchTokens(&pr)
	s := &simSeq{req: r, tokens: tokens}
	s.hold.Begin(out.Worker, tokens, int64(r.At))
	s.hold.AwaitFirstToken()
	if r.Group >= 0 && e.e.CacheGroups > 0 && e.cacheHas(r.Group) {
		s.cached = r.PrefixTokens
	} else if r.Group >= 0 && e.e.CacheTokens > 0 {
		s.cached = min(r.PrefixTokens, e.cachedTokens(r.Group))
	}
	e.arrive(s)
	if r.At >= sim.cfg.Warmup {
		sim.res.Picks[i]++
		sim.window[i]++
		sim.prompt += r.PromptTokens
		sim.cached += s.cached
	}
}

// startSteps starts a step on every idle engine and records the largest backlog.
func (sim *simulation) startSteps(now time.Duration) {
	for _, e := range sim.engines {
		if !e.busy {
			e.startStep(now)
		}
		sim.res.MaxBacklog = max(sim.res.MaxBacklog, e.backlog())
	}
}

// result sorts what the run measured.
func (sim *simulation) result() SimResult {
	res := sim.res
	slices.Sort(res.TTFT)
	for _, t := range res.WorkerTTFT {
		slices.Sort(t)
	}
	if sim.prompt > 0 {
		res.HitRate = float64(sim.cached) / float64(sim.prompt)
	}
	return res
}

func anyBusy(es []*simEngine) bool {
	for _, e := range es {
		if e.busy || e.pending != nil {
			return true
		}
	}
	return false
}

type simSeq struct {
	req       *SimRequest
	tokens    int // the dispatch's token count (policy.DispatchTokens)
	cached    int // prompt tokens found in the prefix cache at arrival
	prefilled int // prompt tokens computed or cached
	generated int
	ttft      time.Duration
	// decode times its tokens after the first, one a step, as the gateway's relay does
	// (worker.DecodeTimer).
	decode worker.DecodeTimer
	// hold is the request's bookkeeping on its worker, as the gateway keeps it: from the
	// pick to the last token, awaiting its first token until the first step that makes one.
	hold worker.Hold
}

type simEngine struct {
	e        Engine
	w        *worker.Worker
	arrived  []*simSeq // since the current step started: they join the next one
	running  []*simSeq
	busy     bool
	stepEnd  time.Duration
	producer []*simSeq // sequences producing a token in the current step
	// completed holds the sequences whose last token came out, for SimConfig.Conversations.
	completed []*simSeq
	buckets   [10]struct{ i, n int } // output tokens per 100 ms, for gen_throughput
	lru       []int                  // cached groups, most recent last
	tokenLRU  []cacheEntry           // Engine.CacheTokens: cached prompts, most recent last
	cachedN   int                    // tokens in tokenLRU
	// The report of the current round: the dispatch counts at the round's start, the report
	// taken at takeAt and published at publishAt.
	mark              worker.DispatchMark
	takeAt, publishAt time.Duration
	pending           *worker.LoadReport
}

func (e *simEngine) arrive(s *simSeq) {
	s.prefilled = s.cached
	e.arrived = append(e.arrived, s)
}

// startStep starts a step at now if anything is to run.
func (e *simEngine) startStep(now time.Duration) {
	e.running = append(e.running, e.arrived...)
	e.arrived = e.arrived[:0]
	if len(e.running) == 0 {
		return
	}
	budget, prefill := e.e.PrefillChunk, 0
	e.producer = e.producer[:0]
	for _, s := range e.running {
		if need := s.req.PromptTokens - s.prefilled; need > 0 {
			take := min(budget, need)
			budget -= take
			prefill += take
			s.prefilled += take
			if s.prefilled < s.req.PromptTokens {
				continue
			}
			if s.req.Group >= 0 {
				e.cacheAdd(s.req.Group)
				e.cacheAddTokens(s.req.Group, s.req.PromptTokens)
			}
		}
		e.producer = append(e.producer, s)
	}
	decode := e.e.DecodeBase + time.Duration(len(e.producer))*e.e.DecodePerReq
	d := time.Duration(e.e.DecodeFactor*float64(decode)) +
		time.Duration(float64(prefill)/e.e.PrefillTPS*float64(time.Second))
	e.busy, e.stepEnd = true, now+max(d, 1)
}

// finishStep ends the current step at now and returns the sequences that produced their first
// token in it; the next step starts at once if anything is running.
func (e *simEngine) finishStep(now time.Duration) (first []*simSeq) {
	e.busy = false
	for _, s := range e.producer {
		if s.generated == 0 {
			s.ttft = now - s.req.At
			s.hold.FirstByte(int64(now))
			s.hold.FirstToken()
			first = append(first, s)
		}
		s.decode.Piece(int64(now))
		s.generated++
	}
	b := &e.buckets[int(now/(100*time.Millisecond))%len(e.buckets)]
	if i := int(now / (100 * time.Millisecond)); b.i != i {
		b.i, b.n = i, 0
	}
	b.n += len(e.producer)
	kept := e.running[:0]
	for _, s := range e.running {
		if s.generated >= s.req.OutputTokens {
			s.decode.Finish(e.w)
			s.hold.End()
			if s.req.conv != nil {
				e.completed = append(e.completed, s)
			}
			continue
		}
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
	e.startStep(now)
	return first
}

// backlog is the sequences waiting for their first token.
func (e *simEngine) backlog() int {
	n := len(e.arrived)
	for _, s := range e.running {
		if s.generated == 0 {
			n++
		}
	}
	return n
}

// report returns the engine's load report at now as the load monitor would receive it.
func (e *simEngine) report(now time.Duration) *worker.LoadReport {
	cur := int(now / (100 * time.Millisecond))
	tokens := 0
	for _, b := range e.buckets {
		if b.i > cur-len(e.buckets) && b.i <= cur {
			tokens += b.n
		}
	}
	held := 0
	for _, s := range e.running {
		held += s.prefilled + s.generated
	}
	return &worker.LoadReport{
		At:               time.Unix(0, 0).Add(now),
		RunningRequests:  len(e.running) + len(e.arrived),
		GenThroughput:    float64(tokens), // over the last second
		TokenUsage:       math.Min(1, float64(held)/float64(e.e.KVTokens)),
		KVCapacityTokens: int64(e.e.KVTokens),
	}
}

func (e *simEngine) cacheHas(g int) bool { return slices.Contains(e.lru, g) }

// cacheEntry is one group's cached prompt in Engine.CacheTokens mode.
type cacheEntry struct{ group, tokens int }

// cachedTokens is how many leading tokens of group g's last prompt the token cache still holds.
func (e *simEngine) cachedTokens(g int) int {
	for _, c := range e.tokenLRU {
		if c.group == g {
			return c.tokens
		}
	}
	return 0
}

// cacheAddTokens makes group g's prompt of n tokens the most recent entry and trims the least
// recent entries, tail first, to Engine.CacheTokens.
func (e *simEngine) cacheAddTokens(g, n int) {
	if e.e.CacheTokens == 0 {
		return
	}
	if i := slices.IndexFunc(e.tokenLRU, func(c cacheEntry) bool { return c.group == g }); i >= 0 {
		e.cachedN -= e.tokenLRU[i].tokens
		e.tokenLRU = slices.Delete(e.tokenLRU, i, i+1)
	}
	e.tokenLRU = append(e.tokenLRU, cacheEntry{group: g, tokens: n})
	e.cachedN += n
	for e.cachedN > e.e.CacheTokens {
		oldest := &e.tokenLRU[0]
		take := min(oldest.tokens, e.cachedN-e.e.CacheTokens)
		oldest.tokens -= take
		e.cachedN -= take
		if oldest.tokens == 0 {
			e.tokenLRU = slices.Delete(e.tokenLRU, 0, 1)
		}
	}
}

func (e *simEngine) cacheAdd(g int) {
	if e.e.CacheGroups == 0 {
		return
	}
	if i := slices.Index(e.lru, g); i >= 0 {
		e.lru = append(e.lru[:i], e.lru[i+1:]...)
	} else if len(e.lru) >= e.e.CacheGroups {
		e.lru = e.lru[1:]
	}
	e.lru = append(e.lru, g)
}

// SharedPrefix returns a generator of loadgen's shared-prefix workload (SGLang bench_serving's
// generated-shared-prefix) for PoissonTrace: groups × questions prompts, each a group's
// prefixTokens-token system prompt and a questionTokens-token question, policy.BytesPerToken
// bytes per token in the routing text (as the mock engines count), chosen uniformly at random.
func SharedPrefix(groups, questions, prefixTokens, questionTokens, outputTokens int) func(*rand.Rand) SimRequest {
	texts := make([][]byte, groups*questions)
	return func(rng *rand.Rand) SimRequest {
		g, q := rng.IntN(groups), rng.IntN(questions)
		t := texts[g*questions+q]
		if t == nil {
			prefix, total := prefixTokens*policy.BytesPerToken, (prefixTokens+questionTokens)*policy.BytesPerToken
			t = make([]byte, 0, total)
			for len(t) < prefix {
				t = fmt.Appendf(t, "system prompt of group %d. ", g)
			}
			t = t[:prefix]
			for len(t) < total {
				t = fmt.Appendf(t, "question %d of group %d? ", q, g)
			}
			t = t[:total]
			texts[g*questions+q] = t
		}
		return SimRequest{Group: g, PrefixTokens: prefixTokens, PromptTokens: prefixTokens + questionTokens, OutputTokens: outputTokens, Text: t}
	}
}

// MultiTurn returns a generator of loadgen's multi-turn workload for PoissonTrace: users
// conversations taking turns in a fixed cycle (loadgen's FIFO ready queue), each turn resending
// the conversation so far (a systemTokens-token system prompt, then per round a turnTokens-token
// turn and, before the next, an outputTokens-token answer); after rounds turns a user starts a
// new conversation. A conversation is its own prefix group whose cached prefix is the previous
// turn's prompt (engines cache prompts, not answers, as mockworker's do), so an engine's cache
// of CacheGroups conversations holds a prefix until CacheGroups other conversations passed
// through it. The generator ignores its rng: the cycle is the workload.
func MultiTurn(users, rounds, systemTokens, turnTokens, outputTokens int) func(*rand.Rand) SimRequest {
	k := 0
	perRound := turnTokens + outputTokens
	full := (systemTokens + rounds*perRound) * policy.BytesPerToken
	texts := map[int][]byte{}
	return func(*rand.Rand) SimRequest {
		user, turn := k%users, k/users
		k++
		conv, round := user+turn/rounds*users, turn%rounds+1 // conversation id, round 1..rounds
		t, ok := texts[conv]
		if !ok {
			t = make([]byte, 0, full)
			for len(t) < full {
				t = fmt.Appendf(t, "conversation %d says %d. ", conv, len(t))
			}
			texts[conv] = t[:full]
			t = texts[conv]
		}
		prompt := systemTokens + round*turnTokens + (round-1)*outputTokens
		prefix := 0
		if round > 1 {
			prefix = prompt - perRound
		}
		if round == rounds {
			delete(texts, conv) // its last turn: the bytes stay with the request
		}
		return SimRequest{Group: conv, PrefixTokens: prefix, PromptTokens: prompt, OutputTokens: outputTokens,
			Text: t[:prompt*policy.BytesPerToken]}
	}
}

// Distinct returns a generator of distinct prompts of promptTokens tokens with nothing to
// share (loadgen's random workload at --random-range-ratio 1), each producing outputTokens.
func Distinct(promptTokens, outputTokens int) func(*rand.Rand) SimRequest {
	return func(rng *rand.Rand) SimRequest {
		n := promptTokens * policy.BytesPerToken
		t := make([]byte, 0, n)
		for len(t) < n {
			t = fmt.Appendf(t, "prompt %d. ", rng.Uint64())
		}
		return SimRequest{Group: -1, PromptTokens: promptTokens, OutputTokens: outputTokens, Text: t[:n]}
	}
}

// MixedSizes wraps gen so that one request in every (on average) of 1/share is times longer,
// with no shared prefix (bench_serving-style bimodal prompt lengths).
func MixedSizes(gen func(*rand.Rand) SimRequest, share float64, times int) func(*rand.Rand) SimRequest {
	return func(rng *rand.Rand) SimRequest {
		r := gen(rng)
		if rng.Float64() < share {
			r.Group, r.PrefixTokens = -1, 0
			r.PromptTokens *= times
			r.Text = bytes.Repeat(r.Text, times)
		}
		return r
	}
}

// Conversations is loadgen's multi-turn workload as loadgen runs it, for SimConfig.Conversations:
// users conversations of rounds turns (a systemTokens-token system prompt, then per round a
// turnTokens-token turn and, before the next, an outputTokens-token answer, each turn resending
// the conversation so far, as MultiTurn's), handed out from a FIFO ready queue that a
// conversation rejoins only when its turn's answer is complete; after rounds turns its user
// starts a new conversation.
//
// Unlike MultiTurn's fixed cycle, the ready queue's order is the order in which answers
// complete, and an engine completes a batch of them in one step: turns that one worker served
// together come round together, in a run. A policy that sends each turn back to the worker of
// the previous one (cache_aware's holders) keeps the run on that worker every round, a queue
// of several prefills at once where a policy that ignores the holder spreads it (measured:
// cache_aware's TTFT p99 2.9-3.2x round robin's on the mocks' multi-turn case).
type Conversations struct {
	users, rounds, system, turn, output int
	ready                               []*conversation
	waiting                             int // arrivals that found no conversation ready
}

type conversation struct {
	id, round int // round: turns sent so far
	text      []byte
}

// NewConversations returns the workload with every user's first conversation ready, users in
// order.
func NewConversations(users, rounds, systemTokens, turnTokens, outputTokens int) *Conversations {
	c := &Conversations{users: users, rounds: rounds, system: systemTokens, turn: turnTokens, output: outputTokens}
	for u := range users {
		c.ready = append(c.ready, c.start(u))
	}
	return c
}

func (c *Conversations) start(id int) *conversation {
	full := (c.system + c.rounds*(c.turn+c.output)) * policy.BytesPerToken
	t := make([]byte, 0, full)
	for len(t) < full {
		t = fmt.Appendf(t, "conversation %d says %d. ", id, len(t))
	}
	return &conversation{id: id, text: t[:full]}
}

// next takes the conversation at the head of the ready queue and returns its next turn, sent
// at now; false when none is ready.
func (c *Conversations) next(now time.Duration) (*SimRequest, bool) {
	if len(c.ready) == 0 {
		return nil, false
	}
	cv := c.ready[0]
	c.ready = slices.Delete(c.ready, 0, 1)
	cv.round++
	prompt := c.system + cv.round*c.turn + (cv.round-1)*c.output
	prefix := 0
	if cv.round > 1 {
		prefix = prompt - c.turn - c.output
	}
	return &SimRequest{At: now, Group: cv.id, PrefixTokens: prefix, PromptTokens: prompt, OutputTokens: c.output,
		Text: cv.text[:prompt*policy.BytesPerToken], conv: cv}, true
}

// done puts the conversation of the answered turn r back in the ready queue, or its user's
// next conversation after its last round.
func (c *Conversations) done(r *SimRequest) {
	cv := r.conv
	if cv.round >= c.rounds {
		cv = c.start(cv.id + c.users)
	}
	c.ready = append(c.ready, cv)
}
