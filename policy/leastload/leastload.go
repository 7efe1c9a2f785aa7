package leastload

import (
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "least_load"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, DefaultConfig(), func(cfg Config, s policy.Shared) *Builder { return New(cfg, s.Rand) })

// Config configures least_load: the expected-wait tuning of the --least-load-* flags.
type Config struct {
	score.Config
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config { return Config{Config: score.DefaultConfig()} }

// Validate reports a flag out of range.
func (c Config) Validate() error { return c.Config.Validate() }

// Builder builds least_load pickers. What it keeps across snapshots is the workers' watch
// (score.Succession).
type Builder struct {
	scorer *score.Scorer
	rnd    policy.Rand
	orders score.Succession
}

// New returns a Builder; cfg must be valid and rnd nil selects policy.RuntimeRand.
func New(cfg Config, rnd policy.Rand) *Builder {
	rnd = policy.RandOr(rnd)
	return &Builder{scorer: score.New(cfg.Config), rnd: rnd}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	p := &picker{workers: g.Workers, scorer: b.scorer, rate: b.scorer.NewFleetRate(g.Workers), rnd: b.rnd,
		turns: b.orders.Turns(g.Workers, b.rnd), speeds: score.NewSpeedFlags(len(g.Workers))}
	p.ranking = b.orders.Succeed(b.scorer.NewRanking(p.workers, p.turns, p.speeds))
	return p
}

type picker struct {
	workers []*worker.Worker
	scorer  *score.Scorer
	rate    *policy.FleetRate
	rnd     policy.Rand
	// turns records when each worker was last picked: of workers equal for all the gateway
	// can tell, the one picked longest ago wins (score.Scorer.LowestInTurn).
	turns *score.Turns
	// speeds flags the workers that decode clearly more slowly than the others: they take work
	// only when the others queue (score.Scorer.LowestInTurnAt).
	speeds *score.SpeedFlags
	// ranking keeps the workers in the scorer's order as their load changes, so that a pick
	// does not rescan them.
	ranking *score.Ranking
}

// Pick returns the lowest expected wait, equal workers taken in turn. When the waiting-queue
// cap excludes every reporting worker and none is left, it fails with ErrNoAvailableWorkers
// (503) rather than deepen a backlog, as the spec says.
func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	p.speeds.Observe(p.workers)
	w, i := p.ranking.Pick(req, p.scorer.RateOf(p.rate), p.rnd, policy.NoHotLimit)
	if w == nil {
		return policy.Result{}, policy.ErrNoAvailableWorkers
	}
	p.turns.Note(i)
	return policy.Result{Worker: w}, nil
}

// ReadsLoad marks the policy as a policy.LoadReader: its picks read load reports.
func (*Builder) ReadsLoad() {}
