package sticky

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/zeebo/xxh3"
)

// PinnerConfig configures a Pinner.
type PinnerConfig struct {
	// AssignmentMode (--assignment-mode) chooses the worker of a key without a usable pin:
	// random, min_load, min_group or delegate (ask the policy underneath; the manual policy,
	// which has none, treats delegate as min_load).
	AssignmentMode string
	// MaxIdle (--max-idle-secs) drops a key unused this long; 0 keeps keys forever.
	MaxIdle time.Duration
	// MaxPins bounds the keys remembered (past it new keys are served but not pinned):
	// DefaultMaxPins in DefaultConfig, at least 1 (no flag sets it).
	MaxPins int
	// Metrics receives smg_manual_policy_branch_total and smg_manual_policy_cache_entries.
	// Nil: a private set.
	Metrics *metrics.Set
}

// ValidateAssignmentMode reports an unknown --assignment-mode.
func ValidateAssignmentMode(mode string) error {
	for _, m := range AssignmentModes {
		if mode == m {
			return nil
		}
	}
	return fmt.Errorf("--assignment-mode is %q: choose random (default), min_load, min_group or delegate", mode)
}

// Pinner routes keyed requests through a PinTable: a pinned key goes to its worker (or its
// failover), a new or stranded key is assigned by the assignment mode and pinned. It is the
// engine of the manual policy and of sticky sessions (--routing-key-override); each policy
// instance owns one, so pins are per model.
type Pinner struct {
	table  *PinTable
	counts *KeyCounts
	mode   string
	rnd    policy.Rand
	br     pinBranches
}

type pinBranches struct {
	hit, miss, vacant, noKey, none *metrics.Counter
}

// NewPinner returns a Pinner; cfg.AssignmentMode must be valid and rnd nil selects
// RuntimeRand. now starts the table's coarse clock.
func NewPinner(cfg PinnerConfig, rnd policy.Rand, now time.Time) *Pinner {
	rnd, cfg.Metrics = policy.RandOr(rnd), policy.MetricsOr(cfg.Metrics)
	c := policy.BranchCounters(cfg.Metrics, `smg_manual_policy_branch_total`)
	entries := cfg.Metrics.GetOrCreateGauge(`smg_manual_policy_cache_entries`, nil)
	return &Pinner{
		table:  NewPinTable(now, cfg.MaxIdle, cfg.MaxPins, entries),
		counts: NewKeyCounts(),
		mode:   cfg.AssignmentMode,
		rnd:    rnd,
		br: pinBranches{
			hit: c(BranchOccupiedHit), miss: c(BranchOccupiedMiss), vacant: c(BranchVacant),
			noKey: c(BranchNoRoutingID), none: c(BranchNoHealthyWorkers),
		},
	}
}

// Table returns the pin table.
func (p *Pinner) Table() *PinTable { return p.table }

// Track sets the workers whose pinned keys min_group counts. Call it from Build.
func (p *Pinner) Track(ws []*worker.Worker) { p.counts.Track(ws) }

// Maintain advances the table's clock and evicts idle keys.
func (p *Pinner) Maintain(now time.Time) {
	for w, n := range p.table.Maintain(now) {
		p.counts.Add(w, -int64(n))
	}
}

// PickKeyed routes a request that carries key: its pin when usable, else a new assignment
// (from delegate when the mode is delegate and delegate is non-nil), which is pinned.
func (p *Pinner) PickKeyed(req *policy.Request, key []byte, ws []*worker.Worker, delegate policy.Picker) (policy.Result, error) {
	w, state := p.table.Lookup(req, key)
	if state == PinHit {
		p.br.hit.Inc()
		return policy.Result{Worker: w}, nil
	}
	res, err := p.Assign(req, ws, delegate)
	if err != nil {
		p.br.none.Inc()
		return res, err
	}
	if state == PinStale {
		p.br.miss.Inc()
	} else {
		p.br.vacant.Inc()
	}
	added, dropped := p.table.Pin(key, res.Worker)
	if added {
		p.counts.Add(res.Worker, 1)
	}
	p.counts.Add(dropped, -1)
	return res, nil
}

// PickUnkeyed serves a request without a key by the assignment mode, pinning nothing (the
// manual policy's no_routing_id branch).
func (p *Pinner) PickUnkeyed(req *policy.Request, ws []*worker.Worker) (policy.Result, error) {
	res, err := p.Assign(req, ws, nil)
	if err != nil {
		p.br.none.Inc()
		return res, err
	}
	p.br.noKey.Inc()
	return res, nil
}

// Assign chooses a worker for a key that has no usable pin.
func (p *Pinner) Assign(req *policy.Request, ws []*worker.Worker, delegate policy.Picker) (policy.Result, error) {
	var w *worker.Worker
	switch p.mode {
	case AssignDelegate:
		if delegate != nil {
			return delegate.Pick(req)
		}
		w = policy.LeastInFlight(req, ws, p.rnd, policy.NoHotLimit)
	case AssignMinLoad:
		w = policy.LeastInFlight(req, ws, p.rnd, policy.NoHotLimit)
	case AssignMinGroup:
		w = p.counts.Least(req, ws, p.rnd)
	default:
		w = policy.PickRandomUsable(req, ws, p.rnd)
	}
	if w == nil {
		return policy.Result{}, policy.ErrNoAvailableWorkers
	}
	return policy.Result{Worker: w}, nil
}

// DefaultInFlightCap is how many of a session's own requests may be in flight before the next
// one bypasses the session's worker (the spec product's value): one conversation must not stack
// onto its worker while the rest of the fleet idles.
const DefaultInFlightCap = 2

// BranchCapRespill is the smg_manual_policy_branch_total branch of a request that bypassed
// its session's worker because the session had DefaultInFlightCap requests in flight there.
const BranchCapRespill = "cap_respill"

// Config configures sticky sessions (--routing-key-override) on top of any policy.
type Config struct {
	PinnerConfig
	// KeyLoads, when set, is the gateway's per-session in-flight count (it must Add at
	// dispatch and completion); a pinned session with InFlightCap requests in flight is then
	// reassigned. Nil disables the cap.
	KeyLoads *policy.KeyLoads
	// InFlightCap is the cap: at least 1. Default DefaultInFlightCap.
	InFlightCap int
}

// DefaultConfig: the underlying policy decides where a session starts (delegate), keys
// idle for DefaultMaxIdle are forgotten, a session may have DefaultInFlightCap requests in
// flight on its worker.
func DefaultConfig() Config {
	return Config{PinnerConfig: PinnerConfig{AssignmentMode: AssignDelegate, MaxIdle: DefaultMaxIdle, MaxPins: DefaultMaxPins}, InFlightCap: DefaultInFlightCap}
}

// Validate reports an unknown assignment mode, or a cap or pin bound under 1.
func (c Config) Validate() error {
	if err := ValidateAssignmentMode(c.AssignmentMode); err != nil {
		return err
	}
	if c.MaxPins < 1 {
		return fmt.Errorf("sticky session pin bound %d: give 1 or more (default %d); start from sticky.DefaultConfig()", c.MaxPins, DefaultMaxPins)
	}
	if c.InFlightCap < 1 {
		return fmt.Errorf("sticky session in-flight cap %d: give 1 or more (default %d); start from sticky.DefaultConfig()", c.InFlightCap, DefaultInFlightCap)
	}
	return nil
}

// Builder wraps a policy with sticky sessions: a request whose body rid (lineage
// stripped) or routing-key header names a session goes to that session's worker; the first
// request of a session, and one whose worker became unavailable, is placed by the assignment
// mode (by default the wrapped policy) and pinned. Requests without a key go to the wrapped
// policy untouched. smg_routing_key_source_total counts keyed requests by source.
type Builder struct {
	inner    policy.Builder
	pinner   *Pinner
	source   [2]*metrics.Counter // rid, header
	loads    *policy.KeyLoads
	cap      int32
	respills *metrics.Counter
}

// NewBuilder wraps inner; cfg must pass Validate.
func NewBuilder(inner policy.Builder, cfg Config, rnd policy.Rand, now time.Time) *Builder {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	return &Builder{
		inner:  inner,
		pinner: NewPinner(cfg.PinnerConfig, rnd, now),
		source: [2]*metrics.Counter{
			cfg.Metrics.GetOrCreateCounter(`smg_routing_key_source_total{source="` + policy.KeySourceRid + `"}`),
			cfg.Metrics.GetOrCreateCounter(`smg_routing_key_source_total{source="` + policy.KeySourceHeader + `"}`),
		},
		loads:    cfg.KeyLoads,
		cap:      int32(cfg.InFlightCap),
		respills: cfg.Metrics.GetOrCreateCounter(`smg_manual_policy_branch_total{branch="` + BranchCapRespill + `"}`),
	}
}

// Name is the wrapped policy's name: metrics and the admin API show the real policy.
func (b *Builder) Name() string { return b.inner.Name() }

// Inner returns the wrapped builder.
func (b *Builder) Inner() policy.Builder { return b.inner }

// Build implements Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	b.pinner.Track(g.Workers)
	return &stickyPicker{inner: b.inner.Build(g), workers: g.Workers, b: b}
}

// MaintainWeakly implements Maintainer.
func (b *Builder) MaintainWeakly() func(now time.Time) bool { return policy.Weakly(b) }

// Maintain evicts idle sessions and maintains the wrapped policy.
func (b *Builder) Maintain(now time.Time) {
	b.pinner.Maintain(now)
	if m, ok := b.inner.(interface{ Maintain(now time.Time) }); ok {
		m.Maintain(now)
	}
}

type stickyPicker struct {
	inner   policy.Picker
	workers []*worker.Worker
	b       *Builder
}

func (p *stickyPicker) Pick(req *policy.Request) (policy.Result, error) {
	key, source := policy.StickyKey(req, true)
	if key == nil {
		return p.inner.Pick(req)
	}
	if source == policy.KeySourceRid {
		p.b.source[0].Inc()
	} else {
		p.b.source[1].Inc()
	}
	if l := p.b.loads; l != nil && l.Get(xxh3.Hash(key)) >= p.b.cap {
		return p.respill(req, key)
	}
	return p.b.pinner.PickKeyed(req, key, p.workers, p.inner)
}

// respill serves a session that already has the cap of requests in flight: the assignment
// mode picks a worker for this request, and the pin moves only when that is a strict
// improvement (another worker, usable), so fleet-wide pressure cannot walk a session off its
// prefix holder, which a prefix-affine policy would pick again anyway.
func (p *stickyPicker) respill(req *policy.Request, key []byte) (policy.Result, error) {
	pinned, state := p.b.pinner.table.Lookup(req, key)
	res, err := p.b.pinner.Assign(req, p.workers, p.inner)
	if err != nil {
		return res, err
	}
	p.b.respills.Inc()
	if state != PinHit || res.Worker != pinned {
		added, dropped := p.b.pinner.table.PinFront(key, res.Worker)
		if added {
			p.b.pinner.counts.Add(res.Worker, 1)
		}
		p.b.pinner.counts.Add(dropped, -1)
	}
	return res, nil
}

// Record forwards to the wrapped picker, so cache_aware still learns where requests ran.
func (p *stickyPicker) Record(req *policy.Request, served *worker.Worker) {
	if r, ok := p.inner.(policy.Recorder); ok {
		r.Record(req, served)
	}
}
