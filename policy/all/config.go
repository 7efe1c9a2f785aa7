package all

import (
	"errors"
	"log/slog"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/policy/prefixhash"
	"github.com/smg-go/smg/policy/sticky"
)

// Config carries what policies need to be built: every policy's CLI-tuned settings and the
// shared services. Start from DefaultConfig; NewBuilderFunc also accepts a partly zero
// Config and fills the zero parts.
type Config struct {
	// Per-policy settings, each with its spec defaults and Validate.
	CacheAware cacheaware.Config
	LeastLoad  leastload.Config
	PowerOfTwo poweroftwo.Config
	PrefixHash prefixhash.Config
	Manual     manual.Config
	// Sticky configures --routing-key-override's pins; its assignment mode defaults to
	// delegate (the policy underneath places each session's first request) unless
	// --assignment-mode is given.
	Sticky sticky.Config

	// RoutingKeyOverride (--routing-key-override) turns on sticky sessions keyed by the
	// body's rid (turn and retry suffixes stripped) or the routing-key headers.
	RoutingKeyOverride bool
	// PDMode is true when the gateway runs PD disaggregation; bucket is refused without it.
	PDMode bool
	// KeyLoads is the gateway's per-session in-flight count (policy.StickyKeyHash at dispatch,
	// Add +1 and -1); with it, sticky sessions bypass a session's worker once the session has
	// sticky.DefaultInFlightCap requests in flight. Nil: no cap.
	KeyLoads *policy.KeyLoads

	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Rand is the randomness source (nil: policy.RuntimeRand).
	Rand policy.Rand
	// Clock is read when a policy instance is created (starting coarse clocks). Default
	// clock.Real.
	Clock clock.Clock
	// Metrics receives the policies' branch counters and gauges. Nil: a private set.
	Metrics *metrics.Set
	// TreeObserver is told of every prefix cache_aware records (the mesh). Nil: none.
	TreeObserver policy.TreeObserver
	// Maintenance runs the instances' background work. Nil: DefaultMaintenance.
	Maintenance *Maintenance
}

// DefaultConfig returns every spec default.
func DefaultConfig() Config {
	return Config{
		CacheAware: cacheaware.DefaultConfig(),
		LeastLoad:  leastload.DefaultConfig(),
		PowerOfTwo: poweroftwo.DefaultConfig(),
		PrefixHash: prefixhash.DefaultConfig(),
		Manual:     manual.DefaultConfig(),
		Sticky:     sticky.DefaultConfig(),
	}
}

// Validate reports every setting out of range; each message names the flag and the valid range.
func (c *Config) Validate() error {
	d := c.withDefaults()
	errs := []error{
		d.CacheAware.Validate(), d.LeastLoad.Validate(), d.PowerOfTwo.Validate(),
		d.PrefixHash.Validate(), d.Manual.Validate(), d.Sticky.Validate(),
	}
	return errors.Join(errs...)
}
