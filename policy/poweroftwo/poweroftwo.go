package poweroftwo

import (
	"fmt"
	"sync"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "power_of_two"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, DefaultConfig(), func(cfg Config, s policy.Shared) *Builder { return New(cfg, s.Rand) })

// Values of --power-of-two-load-metric.
const (
	MetricExpectedWait  = "expected_wait"
	MetricRequests      = "requests"
	MetricLeastRequests = "least_requests"
)

// Metrics lists the valid --power-of-two-load-metric values.
var Metrics = []string{MetricExpectedWait, MetricRequests, MetricLeastRequests}

// Config configures power_of_two.
type Config struct {
	// LoadMetric is what candidates are compared by (--power-of-two-load-metric):
	// expected_wait (default), requests or least_requests.
	LoadMetric string
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config { return Config{LoadMetric: MetricExpectedWait} }

// Validate reports an unknown metric.
func (c Config) Validate() error {
	for _, m := range Metrics {
		if c.LoadMetric == m {
			return nil
		}
	}
	return fmt.Errorf("--power-of-two-load-metric is %q: choose expected_wait (default), requests or least_requests", c.LoadMetric)
}

// Builder builds power_of_two pickers; it keeps no state across snapshots.
type Builder struct {
	cfg    Config
	scorer *score.Scorer
	rnd    policy.Rand
	orders score.Succession // least_requests' orders, one per snapshot
}

// New returns a Builder; cfg must be valid and rnd nil selects policy.RuntimeRand. The
// expected wait always uses the default tuning: the spec says the --least-load-* flags do not
// apply to this policy.
func New(cfg Config, rnd policy.Rand) *Builder {
	rnd = policy.RandOr(rnd)
	return &Builder{cfg: cfg, scorer: score.New(score.DefaultConfig()), rnd: rnd}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	p := &picker{workers: g.Workers, metric: b.cfg.LoadMetric, scorer: b.scorer, rate: b.scorer.NewFleetRate(g.Workers), rnd: b.rnd,
		queue: newQueue(len(g.Workers), b.rnd), speeds: score.NewSpeedFlags(len(g.Workers))}
	if p.metric == MetricLeastRequests {
		p.fewest = b.orders.Succeed(b.scorer.NewFewestRanking(g.Workers))
	}
	return p
}

type picker struct {
	workers []*worker.Worker
	metric  string
	scorer  *score.Scorer
	rate    *policy.FleetRate // of the whole group, though a pick scores two workers
	rnd     policy.Rand
	queue   *queue // deals the candidate pairs
	// speeds flags the workers that decode clearly more slowly than the others (queue.pick says
	// what becomes of them).
	speeds *score.SpeedFlags
	// fewest keeps the workers ordered by in-flight count, then expected wait, as their load
	// changes (least_requests only): a pick does not rescan them.
	fewest *score.Ranking
}

func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	var w *worker.Worker
	if p.metric == MetricLeastRequests {
		w = p.leastRequests(req)
	} else {
		w = p.twoChoices(req)
	}
	if w == nil {
		return policy.Result{}, policy.ErrNoAvailableWorkers
	}
	return policy.Result{Worker: w}, nil
}

func (p *picker) twoChoices(req *policy.Request) *worker.Worker {
	p.speeds.Observe(p.workers)
	if w := p.queue.pick(req, p); w != nil {
		return w
	}
	// Fewer than two workers usable for req: the spec's sampling among those that are.
	var pair [2]*worker.Worker
	switch sampleTwo(req, p.workers, p.rnd, &pair) {
	case 0:
		return nil
	case 1: // a single available worker is selected directly
		return pair[0]
	}
	w, _ := p.better(req, &pair)
	return w
}

// better returns the better of a pair, first (pair[0]) on a tie, and whether the second won
// on load while itself busy (work awaiting its first token), which queue reads.
//
// Under the requests metric fewer in-flight requests win; a tie goes on to the expected wait.
// The expected wait: the candidate with less work awaiting its first token
// (score.Scorer.AwaitingWork) wins; at equal awaiting work the lower expected wait wins when
// the two differ by more than one request of mean size at the fleet rate, and first otherwise
// (queue: the candidate picked less recently). The expected waits of two equally loaded
// workers differ by what each was sent since its own last report and by the noise of the KV
// term, less than a request: letting that decide, as Lowest does, put consecutive requests
// on one worker where a rotation spaces them (docs/differences.md). Without both load
// reports the pair degrades as least_load does (score.Scorer.Lowest: fewer in-flight
// requests when neither reports).
func (p *picker) better(req *policy.Request, pair *[2]*worker.Worker) (w *worker.Worker, busyWinner bool) {
	first, second := pair[0], pair[1]
	if p.metric == MetricRequests {
		switch a, b := first.InFlight.Load(), second.InFlight.Load(); {
		case a < b:
			return first, false
		case b < a:
			return second, false
		}
	}
	ra, rb := first.Load(), second.Load()
	if ra == nil || rb == nil {
		return p.scorer.Lowest(req, pair[:], p.rate.TokensPerSecond(), p.rnd, policy.NoHotLimit), false
	}
	switch a, b := p.scorer.AwaitingWork(first), p.scorer.AwaitingWork(second); {
	case a < b:
		return first, false
	case b < a && b > 0 && a-b <= p.scorer.HalfRequest(req):
		// Both are computing a prefill and their awaiting work is within half a request like
		// req: the first, picked less recently, started its prefill first and ends it first
		// (score.Scorer.LowestInTurn says why the tokens alone mislead).
		return first, false
	case b < a:
		return second, b > 0
	}
	rate := score.Rate{TokensPerSecond: p.rate.TokensPerSecond()}
	a, _ := p.scorer.ReportedWait(first, ra, rate)
	b, _ := p.scorer.ReportedWait(second, rb, rate)
	if a-b > float64(p.scorer.Config().MeanPrefillTokens)/rate.TokensPerSecond {
		return second, false
	}
	return first, false
}

// queue deals power_of_two's candidates: the group's workers in a ring, the least recently
// picked first (shuffled at build, so the order is random), and each pick compares the first
// two usable ones. The winner goes to the back. A first candidate that lost keeps its place,
// to be compared again at the next pick, unless it lost on awaiting work to a partner that
// was itself busy (both had work awaiting a first token): then both go to the back, the loser
// ahead, so that a worker busy with a long prompt does not take one of the two places pick
// after pick while both are busy. Pairs drawn at random (the spec's sampling, and the
// shuffled deck after it) let a worker win pairs at short intervals while others waited,
// where round robin spaces every worker's requests n apart, and that raised TTFT p99 above
// round robin's at 70% of its capacity (docs/benchmarks-history.md).
// Every pick still reads two workers' loads, and both candidates are random in the sense
// that matters: no worker is favoured by its position in the group.
type queue struct {
	mu    sync.Mutex
	order []int32 // indexes into the group's workers; order[head] is the first candidate
	head  int
}

func newQueue(n int, rnd policy.Rand) *queue {
	q := &queue{order: make([]int32, n)}
	for i := range q.order {
		q.order[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- { // Fisher-Yates
		j := rnd.IntN(i + 1)
		q.order[i], q.order[j] = q.order[j], q.order[i]
	}
	return q
}

// pick compares the first two workers of the queue usable for req and moves them as queue
// explains; it returns nil, and leaves the order of the usable workers as it was, when fewer
// than two are usable. A worker not usable for req is passed over (moved to the back), so a
// broken or draining worker does not hold the front.
//
// A worker the speed flags call slow (score.SpeedFlags: it decodes clearly more slowly than
// the group) is passed over the same way while two others are usable, and it takes the
// request instead of the pair's winner only when that winner has more than
// score.Scorer.SlowPenalty's work awaiting its first token beyond the slow worker's own, as
// least_load ranks it. Every request a slower engine takes has a TTFT in the fleet's tail;
// compared in the pair with the penalty alone, a slow first candidate kept its place after
// losing and met the other slow engine every few picks, one of them winning.
func (q *queue) pick(req *policy.Request, p *picker) *worker.Worker {
	n := len(q.order)
	if n < 2 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if p.speeds.Count() > 0 {
		if w := q.pickFrom(req, p, true); w != nil {
			return q.spill(req, p, w)
		}
	}
	return q.pickFrom(req, p, false)
}

// pickFrom is pick over the workers usable for req, the slow ones passed over too when
// skipSlow; q.mu held.
func (q *queue) pickFrom(req *policy.Request, p *picker, skipSlow bool) *worker.Worker {
	ok := func(k int) bool {
		return req.Usable(p.workers[q.order[k]]) && !(skipSlow && p.speeds.Slow(int(q.order[k])))
	}
	n := len(q.order)
	for range n {
		if ok(q.head) {
			break
		}
		q.head = q.next(q.head)
	}
	i := q.head
	j := q.next(i)
	for ; j != i && !ok(j); j = q.next(j) {
	}
	if j == i || !ok(i) {
		return nil
	}
	if k := q.next(i); j != k { // bring the second usable worker next to the first
		q.order[j], q.order[k] = q.order[k], q.order[j]
		j = k
	}
	pair := [2]*worker.Worker{p.workers[q.order[i]], p.workers[q.order[j]]}
	w, busyWinner := p.better(req, &pair)
	switch {
	case w == pair[0]: // to the back
		q.head = j
	case busyWinner: // both to the back, the first ahead
		q.head = q.next(j)
	default: // the second to the back, the first keeps its place
		q.order[i], q.order[j] = q.order[j], q.order[i]
		q.head = j
	}
	return w
}

// spill returns the slow worker, the first in the queue's order usable for req, whose awaiting
// work with score.Scorer.SlowPenalty added is less than that of w, the winner of a pair of
// others; else w. q.mu held.
func (q *queue) spill(req *policy.Request, p *picker, w *worker.Worker) *worker.Worker {
	limit := p.scorer.AwaitingWork(w) - p.scorer.SlowPenalty(req)
	if limit <= 0 {
		return w
	}
	for k, i := 0, q.head; k < len(q.order); k, i = k+1, q.next(i) {
		if s := p.workers[q.order[i]]; p.speeds.Slow(int(q.order[i])) && req.Usable(s) {
			if p.scorer.AwaitingWork(s) < limit {
				return s
			}
			return w
		}
	}
	return w
}

func (q *queue) next(i int) int {
	if i++; i == len(q.order) {
		return 0
	}
	return i
}

// sampleTwo fills pair with two distinct usable workers drawn uniformly at random and returns
// how many it found (fewer than two only when fewer are usable). In the common case, every
// worker usable, it costs two draws; otherwise it counts the usable workers and draws among
// them by rank, which is O(n) but exact.
func sampleTwo(req *policy.Request, ws []*worker.Worker, rnd policy.Rand, pair *[2]*worker.Worker) int {
	n := len(ws)
	if n >= 2 {
		i := rnd.IntN(n)
		j := rnd.IntN(n - 1)
		if j >= i {
			j++
		}
		if a, b := ws[i], ws[j]; req.Usable(a) && req.Usable(b) {
			pair[0], pair[1] = a, b
			return 2
		}
	}
	usable := 0
	for _, w := range ws {
		if req.Usable(w) {
			usable++
		}
	}
	if usable == 0 {
		return 0
	}
	if usable == 1 {
		for _, w := range ws {
			if req.Usable(w) {
				pair[0] = w
				return 1
			}
		}
		return 0 // the only usable worker went away between the two scans
	}
	i := rnd.IntN(usable)
	j := rnd.IntN(usable - 1)
	if j >= i {
		j++
	}
	got, rank := 0, 0
	for _, w := range ws {
		if !req.Usable(w) {
			continue
		}
		if rank == i || rank == j {
			pair[got] = w
			got++
		}
		rank++
	}
	return got
}

// leastRequests keeps every usable worker with the fewest in-flight requests and lets the
// expected wait (then chance) choose among them (score.Ranking.PickFewest).
func (p *picker) leastRequests(req *policy.Request) *worker.Worker {
	return p.fewest.PickFewest(req, p.rate.TokensPerSecond(), p.rnd)
}

// ReadsLoad marks the policy as a policy.LoadReader: its picks read load reports.
func (*Builder) ReadsLoad() {}
