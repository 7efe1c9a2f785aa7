package poweroftwo

import (
	"fmt"
	"math"
	"sync"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "power_of_two"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Descriptor{Name: Name, Prototype: (*Builder)(nil)}

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
}

// New returns a Builder; cfg must be valid and rnd nil selects policy.RuntimeRand. The
// expected wait always uses the default tuning: the spec says the --least-load-* flags do not
// apply to this policy.
func New(cfg Config, rnd policy.Rand) *Builder {
	if rnd == nil {
		rnd = policy.RuntimeRand{}
	}
	return &Builder{cfg: cfg, scorer: score.New(score.DefaultConfig()), rnd: rnd}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	return &picker{workers: g.Workers, metric: b.cfg.LoadMetric, scorer: b.scorer, rate: b.scorer.NewFleetRate(g.Workers), rnd: b.rnd,
		deck: newDeck(len(g.Workers))}
}

type picker struct {
	workers []*worker.Worker
	metric  string
	scorer  *score.Scorer
	rate    *policy.FleetRate // of the whole group, though a pick scores two workers
	rnd     policy.Rand
	deck    *deck // deals the candidate pairs
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
	var pair [2]*worker.Worker
	switch n := p.deck.deal(req, p.workers, p.rnd, &pair); n {
	case 0:
		return nil
	case 1: // a single available worker is selected directly
		return pair[0]
	}
	if p.metric == MetricRequests {
		a, b := pair[0].InFlight.Load(), pair[1].InFlight.Load()
		switch {
		case a < b:
			return pair[0]
		case b < a:
			return pair[1]
		}
	}
	// Lowest, not LowestAt: at the fleet rate for every worker, a slower engine's own rate
	// (score.Rate) is least_load's alone. Deciding a pair on it outright put TTFT p99 at
	// 1.10-1.13 × round robin's against 0.89-1.07 × on uniform engines serving shared
	// prefixes (policytest, 70%; an engine's step estimate moves with its prefill), for
	// 0.94-0.95 × against 1.00 on the heterogeneous fleet (docs/differences.md).
	return p.scorer.Lowest(req, pair[:], p.rate.TokensPerSecond(), p.rnd, policy.NoHotLimit)
}

// deck deals power_of_two's candidate pairs without replacement: the group's workers in a
// random order, two per pick, shuffled again once fewer than two are left. Every pair is
// still two distinct workers drawn at random, but consecutive picks do not redraw the workers
// just drawn, so every worker is a candidate once every n/2 picks. Pairs drawn independently
// (the spec's sampling) made some workers candidates, and so winners, several picks in a row
// while others waited: on the simulated fleet that alone put TTFT p99 at 1.6-1.9 × round
// robin's on uniform prompts (docs/differences.md, issue 13). The shuffle costs one draw per
// card, as the independent pairs did, and a short lock.
type deck struct {
	mu    sync.Mutex
	order []int32 // indexes into the group's workers
	next  int     // the next card to deal
}

func newDeck(n int) *deck {
	d := &deck{order: make([]int32, n), next: n}
	for i := range d.order {
		d.order[i] = int32(i)
	}
	return d
}

// deal fills pair with the next two cards and returns 2 when both are usable for req; else,
// or with fewer than two workers, it leaves the deck as it is and returns sampleTwo's answer.
func (d *deck) deal(req *policy.Request, ws []*worker.Worker, rnd policy.Rand, pair *[2]*worker.Worker) int {
	if len(ws) < 2 {
		return sampleTwo(req, ws, rnd, pair)
	}
	d.mu.Lock()
	if d.next+2 > len(d.order) {
		for i := len(d.order) - 1; i > 0; i-- { // Fisher-Yates
			j := rnd.IntN(i + 1)
			d.order[i], d.order[j] = d.order[j], d.order[i]
		}
		d.next = 0
	}
	a, b := ws[d.order[d.next]], ws[d.order[d.next+1]]
	if req.Usable(a) && req.Usable(b) {
		d.next += 2
		d.mu.Unlock()
		pair[0], pair[1] = a, b
		return 2
	}
	d.mu.Unlock()
	return sampleTwo(req, ws, rnd, pair)
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
// expected wait (then chance) choose among them.
func (p *picker) leastRequests(req *policy.Request) *worker.Worker {
	s := scratchPool.Get().(*scratch)
	defer func() {
		clear(s.ws) // drop the worker pointers before pooling
		s.ws = s.ws[:0]
		scratchPool.Put(s)
	}()
	least := int64(math.MaxInt64)
	for _, w := range p.workers {
		if !req.Usable(w) {
			continue
		}
		switch n := w.InFlight.Load(); {
		case n < least:
			least = n
			clear(s.ws)
			s.ws = append(s.ws[:0], w)
		case n == least:
			s.ws = append(s.ws, w)
		}
	}
	switch len(s.ws) {
	case 0:
		return nil
	case 1:
		return s.ws[0]
	}
	return p.scorer.Lowest(req, s.ws, p.rate.TokensPerSecond(), p.rnd, policy.NoHotLimit)
}

type scratch struct{ ws []*worker.Worker }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// ReadsLoad marks the policy as a policy.LoadReader: its picks read load reports.
func (*Builder) ReadsLoad() {}
