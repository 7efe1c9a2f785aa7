package all

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"

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
// shared services. Start from DefaultConfig: a per-policy part left zero is refused by
// Validate (and so by NewBuilderFunc), never read as its defaults. The services (Logger,
// Rand, Clock, Metrics, Maintenance) may be left nil: nil means "not given" and each field
// says what stands in; that is no number read as a default.
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

	// Logger: nil means slog.Default().
	Logger *slog.Logger
	// Rand is the randomness source (nil: policy.RuntimeRand).
	Rand policy.Rand
	// Clock is read when a policy instance is created (starting coarse clocks). Nil:
	// clock.Real.
	Clock clock.Clock
	// Metrics receives the policies' branch counters and gauges. Nil: a private set.
	Metrics *metrics.Set
	// TreeObserver is told of every prefix cache_aware records (the mesh). Nil: none.
	TreeObserver policy.TreeObserver
	// Maintenance runs the instances' background work. Nil: DefaultMaintenance, which the
	// caller must then run (nothing runs it by itself).
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

// Validate reports every setting out of range (each message names the flag and the valid
// range) and every per-policy part left zero (the message names the field and says to start
// from DefaultConfig).
func (c *Config) Validate() error {
	var errs []error
	check := func(field string, zero bool, validate func() error) {
		if zero {
			errs = append(errs, fmt.Errorf("policy settings: all.Config.%s is zero: start from all.DefaultConfig() and change what you need", field))
			return
		}
		errs = append(errs, validate())
	}
	check("CacheAware", isZero(c.CacheAware), c.CacheAware.Validate)
	check("LeastLoad", isZero(c.LeastLoad), c.LeastLoad.Validate)
	check("PowerOfTwo", isZero(c.PowerOfTwo), c.PowerOfTwo.Validate)
	check("PrefixHash", isZero(c.PrefixHash), c.PrefixHash.Validate)
	check("Manual", isZero(c.Manual), c.Manual.Validate)
	check("Sticky", isZero(c.Sticky), c.Sticky.Validate)
	return errors.Join(errs...)
}

// isZero reports whether v is its type's zero value.
func isZero[T any](v T) bool { return reflect.ValueOf(&v).Elem().IsZero() }
