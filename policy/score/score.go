package score

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Defaults of the expected-wait score (spec: Least Load, Tuning Flags). power_of_two and
// cache_aware always score with these; only least_load takes the --least-load-* flags.
const (
	DefaultKVPressureWeight  = 0.15   // --least-load-kv-pressure-weight, seconds
	DefaultThroughput        = 2000.0 // --least-load-default-throughput, tokens/s
	DefaultMeanPrefillTokens = 1024   // --least-load-mean-prefill-tokens
)

// Config tunes the expected-wait score,
//
//	score = (queued_tokens + in_flight_tokens) / fleet_rate + KVPressureWeight * k / (1 - k)
//
// which is the spec's formula with deliberate changes:
//   - fleet_rate is one rate for the group (policy.FleetRate), not each worker's own report:
//     an engine's gen_throughput grows with its batch and an idle one reports 0, so the
//     per-worker divisor made busy and idle workers look cheap and picks herded.
//   - in_flight_tokens count from the moment the last report's poll left
//     (worker.Worker.SetLoadSince); k is the report's KV usage moved by this gateway's
//     requests since then (worker.LoadReport.KVOccupancyAt).
//   - Workers rank first by their awaiting work (AwaitingWork: requests whose first token has
//     not arrived), then by the score: that is the queue a new first token waits behind.
//   - least_load drains a clearly slower engine at its own rate (Rate, SlowStepRatio).
//   - Workers equal for all the gateway can tell are taken in turn, the one picked longest
//     ago first (LowestInTurn, HalfRequest).
//
// Why each change, with its figures: docs/differences.md ("Expected-wait score"). The zero
// value is not valid; start from DefaultConfig.
type Config struct {
	// KVPressureWeight weighs the KV-pressure term, in seconds; 0 removes it. Default 0.15.
	KVPressureWeight float64
	// DefaultThroughput is the tokens/s assumed when no worker of the group reports a
	// generation throughput (policy.FleetRate's fallback). Default 2000.
	DefaultThroughput float64
	// MeanPrefillTokens is the token count assumed for a request whose count is unknown (a
	// dispatch without token ids, or a queue depth reported without tokens). Default 1024.
	MeanPrefillTokens int
	// MaxWaitingRequests skips a reporting worker once its reported waiting requests plus the
	// requests dispatched to it since that report reach this cap; 0 disables the cap.
	// Only least_load sets it. Default 0.
	MaxWaitingRequests int
	// IgnoreSpeed makes every worker drain at the fleet rate whatever its decode step (the
	// score before the per-worker speed, see Rate) and LowestInTurnAt ignore its SpeedFlags:
	// no flag sets it; it is the A/B switch of the tests that measure the speeds' effect.
	// Default false.
	IgnoreSpeed bool
	// IgnoreSpeedFlags makes LowestInTurnAt ignore its SpeedFlags only (the score as
	// cache_aware, which does not read them, ranks): the A/B switch of the tests that measure
	// the flags' effect; no flag sets it. Default false.
	IgnoreSpeedFlags bool
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config {
	return Config{
		KVPressureWeight:  DefaultKVPressureWeight,
		DefaultThroughput: DefaultThroughput,
		MeanPrefillTokens: DefaultMeanPrefillTokens,
	}
}

// Validate reports the first field out of range, naming its flag.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.KVPressureWeight) || math.IsInf(c.KVPressureWeight, 0) || c.KVPressureWeight < 0:
		return fmt.Errorf("--least-load-kv-pressure-weight is %v: give a number of seconds >= 0 (default %v; 0 removes the KV-pressure term)",
			c.KVPressureWeight, DefaultKVPressureWeight)
	case math.IsNaN(c.DefaultThroughput) || math.IsInf(c.DefaultThroughput, 0) || c.DefaultThroughput <= 0:
		return fmt.Errorf("--least-load-default-throughput is %v: give a positive number of tokens/s (default %v)",
			c.DefaultThroughput, DefaultThroughput)
	case c.MeanPrefillTokens < 1:
		return fmt.Errorf("--least-load-mean-prefill-tokens is %d: give a positive token count (default %d)",
			c.MeanPrefillTokens, DefaultMeanPrefillTokens)
	case c.MaxWaitingRequests < 0:
		return fmt.Errorf("--least-load-max-waiting-requests is %d: give a count >= 0 (0 disables the cap)",
			c.MaxWaitingRequests)
	}
	return nil
}

// SlowStepRatio is how much longer than the fleet's mean a worker's step must be for the
// worker to drain its work at its own, slower, rate (Rate). Below it every worker drains at
// the fleet rate. The step estimate counts the prefill an engine did as well as its speed, so
// it moves with the load; read as speed in both directions, on uniform engines serving shared
// prefixes a worker that looked faster took 1.6-1.8 times its share of the picks between two
// reports (policytest, 8 engines at 70%, herding). An engine twice as slow as the others is
// 1.6 times the mean of the suite's heterogeneous fleet (6 fast, 2 slow).
const SlowStepRatio = 1.3

// Scorer computes expected waits from the live atomics and load reports of workers. It is
// immutable, so one Scorer serves any number of concurrent picks.
type Scorer struct {
	cfg Config
}

// NewScorer returns a Scorer for cfg, which must be valid.
func New(cfg Config) *Scorer { return &Scorer{cfg: cfg} }

// Config returns the scorer's configuration.
func (s *Scorer) Config() Config { return s.cfg }

// Rate is what turns a worker's token work into seconds in LowestAt: the group's fleet rate
// and its mean step (policy.FleetRate). A worker whose own step (worker.LoadReport.StepSeconds)
// is more than SlowStepRatio times the mean drains its work at TokensPerSecond × StepSeconds
// ÷ its step, so an engine stepping twice as slowly as the others takes about half their
// share: the spec's "faster workers take proportionally more", with the engine's speed read
// from its step instead of from its gen_throughput (which measures its batch,
// docs/differences.md), and only for workers clearly slower than the fleet (SlowStepRatio
// says why). Every other worker, one with no step estimate, and every worker when
// StepSeconds is 0 (none has one, or Config.IgnoreSpeed), drains at the fleet rate.
type Rate struct {
	TokensPerSecond float64
	StepSeconds     float64
}

// RateOf returns the current Rate of the group r tracks; with Config.IgnoreSpeed its
// StepSeconds is 0, so every worker drains at the fleet rate.
func (s *Scorer) RateOf(r *policy.FleetRate) Rate {
	if s.cfg.IgnoreSpeed {
		return Rate{TokensPerSecond: r.TokensPerSecond()}
	}
	return Rate{TokensPerSecond: r.TokensPerSecond(), StepSeconds: r.StepSeconds()}
}

// NewFleetRate returns the tracker of ws's fleet rate, the tokens/s every pick over ws (or a
// subset of it) passes to Lowest; it falls back to the configured DefaultThroughput.
func (s *Scorer) NewFleetRate(ws []*worker.Worker) *policy.FleetRate {
	return policy.NewFleetRate(ws, s.cfg.DefaultThroughput)
}

// AwaitingWork returns the token work of w's requests awaiting their first token
// (worker.Worker.Awaiting), a request of unknown size at MeanPrefillTokens: the first key
// Lowest ranks by.
func (s *Scorer) AwaitingWork(w *worker.Worker) float64 {
	known, unknown := w.AwaitingTokens()
	return float64(known) + float64(unknown)*float64(s.cfg.MeanPrefillTokens)
}

// HalfRequest is half of req's token count (policy.DispatchTokens; MeanPrefillTokens when
// unknown): awaiting work closer than that to another worker's is the same number of requests
// like req queued, so LowestInTurn and power_of_two treat it as equal. A whole request (or
// a request of mean size) of tolerance put the simulated heterogeneous fleet's short prompts
// on slower engines in turn (TTFT p99 0.71-0.75 → 0.71-0.76 × round robin's); half of one
// keeps them off (0.72-0.73) and the multi-turn gain.
func (s *Scorer) HalfRequest(req *policy.Request) float64 {
	if own := policy.DispatchTokens(req); own >= 0 {
		return float64(own) / 2
	}
	return float64(s.cfg.MeanPrefillTokens) / 2
}

// ReportedWait returns w's expected wait from its load report r (non-nil) at rate (the
// fleet's, Rate), crediting the work dispatched to w since r. capped is true when the
// waiting-queue cap excludes w. It is the reference formula; LowestAt inlines it.
func (s *Scorer) ReportedWait(w *worker.Worker, r *worker.LoadReport, rate Rate) (score float64, capped bool) {
	requests, known, unknown := w.SinceReport(r)
	if s.cfg.MaxWaitingRequests > 0 && int64(r.WaitingRequests)+requests >= int64(s.cfg.MaxWaitingRequests) {
		return 0, true
	}
	mean := float64(s.cfg.MeanPrefillTokens)
	queued := float64(r.WaitingTokens)
	if r.WaitingTokens < 0 {
		// A queue depth without a token count (a Prometheus scrape): estimate at the mean.
		queued = float64(r.WaitingRequests) * mean
	}
	inFlight := float64(known) + float64(unknown)*mean
	return (queued+inFlight)*SecondsPerToken(r, rate) + s.cfg.KVPressureWeight*r.KVOccupancyAt(w.InFlight.Load()), false
}

// SecondsPerToken is how long a worker reporting r takes per token of work at rate: 1 ÷
// rate.TokensPerSecond, or, when the worker's step is more than SlowStepRatio times the
// fleet's mean, that × its step ÷ the mean (Rate).
func SecondsPerToken(r *worker.LoadReport, rate Rate) float64 {
	inv := 1 / rate.TokensPerSecond
	if step := r.StepSeconds(); rate.StepSeconds > 0 && step > SlowStepRatio*rate.StepSeconds {
		return inv / rate.StepSeconds * step
	}
	return inv
}

// Lowest returns the usable worker of ws with the least awaiting work (AwaitingWork) and,
// among those, the lowest expected wait at the fleet rate tokensPerSec
// (policy.FleetRate.TokensPerSecond of the group ws belongs to), skipping workers whose
// in-flight count exceeds hotAbove (pass policy.NoHotLimit to keep all), or nil when none
// qualifies. Exact ties are broken uniformly at random with rnd.
//
// The spec's graceful degradation is applied over the workers considered: a worker without a
// load report scores as the best reporting worker plus its own in-flight requests (each at the
// mean prefill size over the fleet rate), and when none of them reports, the fewest in-flight
// requests win; the awaiting work ranks only reporting workers. One pass, reading each
// worker's atomics once.
func (s *Scorer) Lowest(req *policy.Request, ws []*worker.Worker, tokensPerSec float64, rnd policy.Rand, hotAbove float64) *worker.Worker {
	return s.LowestAt(req, ws, Rate{TokensPerSecond: tokensPerSec}, rnd, hotAbove)
}

// LowestAt is Lowest with a clearly slower worker's work drained at its own rate (Rate,
// SecondsPerToken); Lowest is LowestAt with no mean step, every worker at the fleet rate.
func (s *Scorer) LowestAt(req *policy.Request, ws []*worker.Worker, rate Rate, rnd policy.Rand, hotAbove float64) *worker.Worker {
	w, _ := s.lowestAt(req, ws, rate, rnd, hotAbove, nil, nil)
	return w
}

// LowestInTurn is LowestAt with the caller's record of when each worker was last picked
// (turns, for ws in order: the caller Notes each pick) deciding among reporting workers that are equal for
// all the gateway can tell, as round robin's rotation would; it returns the index in ws of
// the worker chosen too (-1 with none), for the caller to record its turn.
//
//   - When every reporting worker has work awaiting its first token (each is computing a
//     prefill), those whose awaiting work is within half of req's tokens (HalfRequest) of
//     the least are equal, and the one picked longest ago wins: its
//     prefill started first, so it ends first. The awaiting tokens say how much is queued,
//     not how far the engine has got with it; ranked on them alone, picks went to a worker
//     whose prefill ended well after the soonest-free one's, where round robin's rotation
//     finds that one (docs/benchmarks-history.md).
//   - When some have none, those are the candidates, and among them expected waits within
//     one request of mean size of the lowest are equal, the one picked longest ago winning.
//
// Past those bands the spec's order stands (docs/differences.md).
func (s *Scorer) LowestInTurn(req *policy.Request, ws []*worker.Worker, rate Rate, rnd policy.Rand, hotAbove float64, turns *Turns) (*worker.Worker, int) {
	return s.lowestAt(req, ws, rate, rnd, hotAbove, turns, nil)
}

// LowestInTurnAt is LowestInTurn with speeds (for ws in order): a worker it flags slow ranks as
// if SlowPenaltyRequests requests like req awaited its first token there besides its own
// (speed.go). Config.IgnoreSpeed and IgnoreSpeedFlags ignore speeds.
func (s *Scorer) LowestInTurnAt(req *policy.Request, ws []*worker.Worker, rate Rate, rnd policy.Rand, hotAbove float64, turns *Turns, speeds *SpeedFlags) (*worker.Worker, int) {
	if s.cfg.IgnoreSpeed || s.cfg.IgnoreSpeedFlags {
		speeds = nil
	}
	return s.lowestAt(req, ws, rate, rnd, hotAbove, turns, speeds)
}

// Turns records when each worker of a group (by its place in the group's slice) was last
// picked, on a clock that counts picks, for LowestInTurn. Safe for concurrent use: atomics.
type Turns struct {
	at    []atomic.Uint64
	clock atomic.Uint64
	// changes, when a Ranking keeps an order over the group, is told of each Note.
	changes *worker.Changes
}

// NewTurns returns the turns of a group of n workers, in a random first order (so no worker
// is favoured by its place in the group).
func NewTurns(n int, rnd policy.Rand) *Turns {
	t := &Turns{at: make([]atomic.Uint64, n)}
	for i := range t.at {
		j := rnd.IntN(i + 1) // Fisher-Yates of 0..n-1 into at
		t.at[i].Store(t.at[j].Load())
		t.at[j].Store(uint64(i))
	}
	t.clock.Store(uint64(n))
	return t
}

// At returns the turn of the worker at place i: the pick clock when it was last picked, or
// its place in the first order when it has not been.
func (t *Turns) At(i int) uint64 { return t.at[i].Load() }

// Clock returns the pick clock: the turn the next pick takes is one more.
func (t *Turns) Clock() uint64 { return t.clock.Load() }

// Note records that the worker at place i was picked now.
func (t *Turns) Note(i int) {
	t.at[i].Store(t.clock.Add(1))
	if t.changes != nil {
		t.changes.Mark(i)
	}
}

// weigher holds what ranking one worker needs of a pick's rate and the configuration: the
// scan (lowestAt) and the kept order (Ranking) both weigh through it, so they agree to the bit.
type weigher struct {
	mean, inv float64
	// SecondsPerToken's terms: a worker whose step exceeds slowStep drains at invPerStep × its
	// step (Inf: none does).
	invPerStep, slowStep float64
	kvWeight             float64
	capN                 int64
}

func (s *Scorer) weigherAt(rate Rate) weigher {
	k := weigher{
		mean: float64(s.cfg.MeanPrefillTokens), inv: 1 / rate.TokensPerSecond, slowStep: math.Inf(1),
		kvWeight: s.cfg.KVPressureWeight, capN: int64(s.cfg.MaxWaitingRequests),
	}
	if rate.StepSeconds > 0 {
		k.invPerStep, k.slowStep = k.inv/rate.StepSeconds, SlowStepRatio*rate.StepSeconds
	}
	return k
}

// weigh returns what a reporting worker w (report r, inFlight requests in flight) ranks by:
// its awaiting work (AwaitingWork, before any slow penalty) and its expected wait
// (ReportedWait written out: it runs once per worker of a scan, and a call per worker cost a
// measurable share of one at 4,096 workers); capped when the waiting-queue cap excludes it.
func (k *weigher) weigh(w *worker.Worker, r *worker.LoadReport, inFlight int64) (awaiting, score float64, capped bool) {
	var known, unknown int64
	if k.capN > 0 {
		var requests int64
		if requests, known, unknown = w.SinceReport(r); int64(r.WaitingRequests)+requests >= k.capN {
			return 0, 0, true
		}
	} else {
		known, unknown = w.SinceReportTokens(r) // the worker's first cache line only
	}
	queued := float64(r.WaitingTokens)
	if r.WaitingTokens < 0 {
		queued = float64(r.WaitingRequests) * k.mean
	}
	perToken := k.inv
	if step := r.StepSeconds(); step > k.slowStep {
		perToken = k.invPerStep * step
	}
	score = (queued+float64(known)+float64(unknown)*k.mean)*perToken + k.kvWeight*r.KVOccupancyAt(inFlight)
	awKnown, awUnknown := w.AwaitingTokens()
	return float64(awKnown) + float64(awUnknown)*k.mean, score, false
}

// lowestAt is LowestAt and, with turns, LowestInTurn (with speeds, LowestInTurnAt).
func (s *Scorer) lowestAt(req *policy.Request, ws []*worker.Worker, rate Rate, rnd policy.Rand, hotAbove float64, turns *Turns, speeds *SpeedFlags) (*worker.Worker, int) {
	t := getTies()
	defer putTies(t)
	k := s.weigherAt(rate)
	mean, inv := k.mean, k.inv
	hot := int64(math.MaxInt64) // in-flight counts above this are skipped
	if hotAbove < math.MaxInt64 {
		hot = int64(math.Floor(hotAbove))
	}
	bestRep, bestAwaiting := math.Inf(1), math.Inf(1)
	minDark := int64(math.MaxInt64)
	for i, w := range ws {
		if !req.Usable(w) {
			continue
		}
		inFlight := w.InFlight.Load()
		if inFlight > hot {
			continue
		}
		r := w.Load()
		if r == nil {
			switch {
			case inFlight < minDark:
				minDark = inFlight
				t.dark = append(t.dark[:0], int32(i))
			case inFlight == minDark:
				t.dark = append(t.dark, int32(i))
			}
			continue
		}
		awaiting, score, capped := k.weigh(w, r, inFlight)
		if capped {
			continue
		}
		if speeds.Slow(i) {
			awaiting += s.SlowPenalty(req)
		}
		if turns != nil {
			t.near = append(t.near, near{i: int32(i), awaiting: awaiting, score: score})
		}
		switch {
		case awaiting < bestAwaiting || awaiting == bestAwaiting && score < bestRep:
			bestAwaiting, bestRep = awaiting, score
			t.rep = append(t.rep[:0], int32(i))
		case awaiting == bestAwaiting && score == bestRep:
			t.rep = append(t.rep, int32(i))
		}
	}
	if turns != nil && len(t.rep) > 0 {
		// The earliest turn among the equals replaces the exact ties; bestRep stays the lowest
		// wait, which is what a worker without a report is compared with below.
		awaitingLimit := bestAwaiting
		if bestAwaiting > 0 {
			awaitingLimit += s.HalfRequest(req)
		}
		scoreLimit := math.Inf(1)
		for _, c := range t.near {
			if c.awaiting <= awaitingLimit {
				scoreLimit = min(scoreLimit, c.score)
			}
		}
		scoreLimit += mean * inv
		first := uint64(math.MaxUint64)
		for _, c := range t.near {
			if c.awaiting <= awaitingLimit && c.score <= scoreLimit {
				if turn := turns.at[c.i].Load(); turn < first {
					first = turn
					t.rep = append(t.rep[:0], c.i)
				}
			}
		}
	}
	i := t.choose(rnd, bestRep, bestRep+float64(minDark)*mean*inv)
	if i < 0 {
		return nil, -1
	}
	return ws[i], i
}

// choose returns the index of a worker among the best reporting ones (rep, at score best) and
// those without a report (dark, at darkScore), as chooseAmong decides; -1 when there are none.
func (t *ties) choose(rnd policy.Rand, best, darkScore float64) int {
	rep, k := chooseAmong(rnd, len(t.rep), len(t.dark), best, darkScore)
	switch {
	case k < 0:
		return -1
	case rep:
		return int(t.rep[k])
	}
	return int(t.dark[k])
}

// chooseAmong chooses among nRep equally good reporting workers (at score best) and nDark
// workers without a report (at darkScore), the spec's graceful degradation, exact ties broken
// at random: whether a reporting worker wins, and which of its kind (the k-th); k is -1 when
// there are none.
func chooseAmong(rnd policy.Rand, nRep, nDark int, best, darkScore float64) (rep bool, k int) {
	switch {
	case nRep == 0 && nDark == 0:
		return false, -1
	case nRep == 0: // nobody reports: join the shortest queue
		return false, pick(rnd, nDark)
	case nDark == 0:
		return true, pick(rnd, nRep)
	}
	switch {
	case darkScore < best: // only with a negative in-flight count, which is a bug elsewhere
		return false, pick(rnd, nDark)
	case darkScore > best:
		return true, pick(rnd, nRep)
	}
	if k = pick(rnd, nRep+nDark); k < nRep {
		return true, k
	}
	return false, k - nRep
}

func pick(rnd policy.Rand, n int) int {
	if n == 1 {
		return 0
	}
	return rnd.IntN(n)
}

// ties holds the indexes of equally good workers during one selection. Pooled so that a pick
// over an idle fleet, where every worker ties, allocates nothing in steady state.
type ties struct {
	rep, dark []int32
	near      []near // LowestInTurn: every reporting worker considered
}

// near is a reporting worker's keys in one LowestInTurn selection.
type near struct {
	i               int32
	awaiting, score float64
}

var tiesPool = sync.Pool{New: func() any { return new(ties) }}

func getTies() *ties { return tiesPool.Get().(*ties) }

func putTies(t *ties) {
	t.rep, t.dark, t.near = t.rep[:0], t.dark[:0], t.near[:0]
	tiesPool.Put(t)
}
