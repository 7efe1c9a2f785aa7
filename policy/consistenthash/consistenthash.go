package consistenthash

import (
	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/ring"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "consistent_hashing"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below; it has no settings but the gateway-wide --routing-key-override.
var Descriptor = policy.Describe(Name, struct{}{}, func(_ struct{}, s policy.Shared) *Builder {
	return New(Config{RoutingKeyOverride: s.RoutingKeyOverride, Metrics: s.Metrics}, s.Rand)
})

// Branches of smg_consistent_hashing_policy_branch_total.
const (
	BranchTargetWorkerHit  = "target_worker_hit"
	BranchTargetWorkerMiss = "target_worker_miss"
	BranchRoutingKeyHit    = "routing_key_hit"
	BranchRandomFallback   = "random_fallback"
	BranchNoHealthyWorkers = "no_healthy_workers"
)

// Config configures consistent_hashing.
type Config struct {
	// RoutingKeyOverride (--routing-key-override) makes the body's rid, lineage-stripped,
	// the key before the routing-key header.
	RoutingKeyOverride bool
	// Metrics receives smg_consistent_hashing_policy_branch_total. Nil: a private set.
	Metrics *metrics.Set
}

// Builder builds consistent_hashing pickers and keeps the previous ring for fast rebuilds.
type Builder struct {
	cfg      Config
	rnd      policy.Rand
	rings    *ring.Builder
	branches branchCounters
}

type branchCounters struct {
	targetHit, targetMiss, keyHit, random, none *metrics.Counter
}

// New returns a Builder; rnd nil selects policy.RuntimeRand.
func New(cfg Config, rnd policy.Rand) *Builder {
	rnd, cfg.Metrics = policy.RandOr(rnd), policy.MetricsOr(cfg.Metrics)
	c := policy.BranchCounters(cfg.Metrics, `smg_consistent_hashing_policy_branch_total`)
	return &Builder{cfg: cfg, rnd: rnd, rings: ring.NewBuilder(), branches: branchCounters{
		targetHit: c(BranchTargetWorkerHit), targetMiss: c(BranchTargetWorkerMiss),
		keyHit: c(BranchRoutingKeyHit), random: c(BranchRandomFallback), none: c(BranchNoHealthyWorkers),
	}}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	return &picker{
		workers:  g.Workers,
		ring:     b.rings.Build(g.Workers),
		override: b.cfg.RoutingKeyOverride,
		rnd:      b.rnd,
		br:       &b.branches,
	}
}

type picker struct {
	workers  []*worker.Worker
	ring     *ring.Ring
	override bool
	rnd      policy.Rand
	br       *branchCounters
}

func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	if len(req.TargetWorker) > 0 {
		i, ok := policy.ParseTargetWorker(req.TargetWorker)
		var w *worker.Worker
		if ok {
			w = policy.NthUsable(req, p.workers, i)
		}
		if w == nil {
			p.br.targetMiss.Inc()
			return policy.Result{}, policy.ErrInvalidTargetWorker
		}
		p.br.targetHit.Inc()
		return policy.Result{Worker: w}, nil
	}
	if key := p.key(req); key != nil {
		if w := p.ring.Lookup(req, ring.HashBytes(key)); w != nil {
			p.br.keyHit.Inc()
			return policy.Result{Worker: w}, nil
		}
		p.br.none.Inc()
		return policy.Result{}, policy.ErrNoAvailableWorkers
	}
	if w := policy.PickRandomUsable(req, p.workers, p.rnd); w != nil {
		p.br.random.Inc()
		return policy.Result{Worker: w}, nil
	}
	p.br.none.Inc()
	return policy.Result{}, policy.ErrNoAvailableWorkers
}

// key returns the first key the spec's priority order finds, or nil.
func (p *picker) key(req *policy.Request) []byte {
	if k, _ := policy.StickyKey(req, p.override); k != nil {
		return k
	}
	for _, k := range [...][]byte{req.Authorization, req.ForwardedFor, req.Cookie} {
		if len(k) > 0 {
			return k
		}
	}
	return nil
}

// ReadsRoutingKey marks the policy as a policy.KeyReader: it reads the rid and routing key
// itself, so --routing-key-override adds no sticky sessions around it.
func (*Builder) ReadsRoutingKey() {}
