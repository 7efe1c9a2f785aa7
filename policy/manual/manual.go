package manual

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/sticky"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "manual"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, DefaultConfig(), func(cfg Config, s policy.Shared) *Builder {
	cfg.RoutingKeyOverride, cfg.Metrics = s.RoutingKeyOverride, s.Metrics
	return New(cfg, s.Rand, s.Clock.Now())
})

// Config configures manual.
type Config struct {
	// AssignmentMode (--assignment-mode) places keys without a usable pin: random (default),
	// min_load, min_group, or delegate (min_load under this policy, as the spec says).
	AssignmentMode string
	// MaxIdle (--max-idle-secs) forgets keys unused this long. Default 4 h; 0 keeps them.
	MaxIdle time.Duration
	// RoutingKeyOverride (--routing-key-override) reads the key from the body's rid first.
	RoutingKeyOverride bool
	// Metrics receives smg_manual_policy_branch_total and smg_manual_policy_cache_entries.
	// Nil: a private set.
	Metrics *metrics.Set
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config {
	return Config{AssignmentMode: sticky.AssignRandom, MaxIdle: sticky.DefaultMaxIdle}
}

// Validate reports a setting out of range.
func (c Config) Validate() error {
	if c.MaxIdle < 0 {
		return fmt.Errorf("--max-idle-secs is %v: give a number of seconds >= 0 (default %d)", c.MaxIdle.Seconds(), int(sticky.DefaultMaxIdle/time.Second))
	}
	return sticky.ValidateAssignmentMode(c.AssignmentMode)
}

// Builder owns the pins of one model; they survive snapshots.
type Builder struct {
	cfg    Config
	pinner *sticky.Pinner
}

// New returns a Builder; cfg must be valid, rnd nil selects policy.RuntimeRand, and now
// starts the coarse clock of idle eviction.
func New(cfg Config, rnd policy.Rand, now time.Time) *Builder {
	pc := sticky.PinnerConfig{AssignmentMode: cfg.AssignmentMode, MaxIdle: cfg.MaxIdle, MaxPins: sticky.DefaultMaxPins, Metrics: cfg.Metrics}
	if pc.AssignmentMode == sticky.AssignDelegate {
		pc.AssignmentMode = sticky.AssignMinLoad // nothing to delegate to
	}
	return &Builder{cfg: cfg, pinner: sticky.NewPinner(pc, rnd, now)}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Pins returns the pin table, for tests and the admin API.
func (b *Builder) Pins() *sticky.PinTable { return b.pinner.Table() }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	b.pinner.Track(g.Workers)
	return &picker{workers: g.Workers, pinner: b.pinner, override: b.cfg.RoutingKeyOverride}
}

// Maintain evicts keys idle longer than --max-idle-secs (policy.Maintainer).
func (b *Builder) Maintain(now time.Time) { b.pinner.Maintain(now) }

type picker struct {
	workers  []*worker.Worker
	pinner   *sticky.Pinner
	override bool
}

func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	if key, _ := policy.StickyKey(req, p.override); key != nil {
		return p.pinner.PickKeyed(req, key, p.workers, nil)
	}
	return p.pinner.PickUnkeyed(req, p.workers)
}

// ReadsRoutingKey marks the policy as a policy.KeyReader: it reads the rid and routing key
// itself, so --routing-key-override adds no sticky sessions around it.
func (*Builder) ReadsRoutingKey() {}

// MaintainWeakly implements policy.Maintainer.
func (b *Builder) MaintainWeakly() func(now time.Time) bool { return policy.Weakly(b) }
