package all

import (
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/bucket"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/consistenthash"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/passthrough"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/policy/prefixhash"
	"github.com/smg-go/smg/policy/random"
	"github.com/smg-go/smg/policy/roundrobin"
)

// DefaultPolicy is --policy's default (spec: cache_aware is the production default).
const DefaultPolicy = cacheaware.Name

type factory func(cfg *Config, fromFlags bool) (policy.Builder, error)

var factories = map[string]factory{
	roundrobin.Name: func(*Config, bool) (policy.Builder, error) { return roundrobin.New(), nil },
	random.Name:     func(c *Config, _ bool) (policy.Builder, error) { return random.New(c.Rand), nil },
	passthrough.Name: func(c *Config, _ bool) (policy.Builder, error) {
		return passthrough.New(c.Logger), nil
	},
	cacheaware.Name: func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := cacheaware.BuiltinConfig()
		if fromFlags {
			cfg = c.CacheAware
		}
		cfg.Metrics, cfg.Observer = c.Metrics, c.TreeObserver
		return cacheaware.New(cfg, c.Rand), nil
	},
	leastload.Name: func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := leastload.DefaultConfig()
		if fromFlags {
			cfg = c.LeastLoad
		}
		return leastload.New(cfg, c.Rand), nil
	},
	poweroftwo.Name: func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := poweroftwo.DefaultConfig()
		if fromFlags {
			cfg = c.PowerOfTwo
		}
		return poweroftwo.New(cfg, c.Rand), nil
	},
	consistenthash.Name: func(c *Config, _ bool) (policy.Builder, error) {
		// --routing-key-override is gateway-wide: it applies to label-chosen instances too.
		return consistenthash.New(consistenthash.Config{RoutingKeyOverride: c.RoutingKeyOverride, Metrics: c.Metrics}, c.Rand), nil
	},
	prefixhash.Name: func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := prefixhash.DefaultConfig()
		if fromFlags {
			cfg = c.PrefixHash
		}
		cfg.Metrics = c.Metrics
		return prefixhash.New(cfg, c.Rand), nil
	},
	manual.Name: func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := manual.DefaultConfig()
		if fromFlags {
			cfg = c.Manual
		}
		cfg.RoutingKeyOverride, cfg.Metrics = c.RoutingKeyOverride, c.Metrics
		return manual.New(cfg, c.Rand, c.Clock.Now()), nil
	},
	bucket.Name: func(c *Config, fromFlags bool) (policy.Builder, error) {
		if !c.PDMode {
			return nil, ErrBucketOutsidePD
		}
		cfg := bucket.DefaultConfig()
		if fromFlags {
			cfg = bucket.Config{BalanceAbsThreshold: c.CacheAware.BalanceAbsThreshold, BalanceRelThreshold: c.CacheAware.BalanceRelThreshold}
		}
		return bucket.New(cfg, c.Rand), nil
	},
}

// ErrBucketOutsidePD refuses bucket where it has no buckets to give.
var ErrBucketOutsidePD = fmt.Errorf("policy bucket routes the prefill leg of PD disaggregation and has no buckets outside it: " +
	"use it with --pd-disaggregation --prefill-policy bucket, or choose another --policy such as cache_aware")

// loadAware are the policies that read load reports (spec: Load Signals).
var loadAware = map[string]bool{cacheaware.Name: true, leastload.Name: true, poweroftwo.Name: true}

// LoadAware reports whether the policy reads load reports, so that --disable-load-monitoring
// keeps polling while one is in use.
func LoadAware(name string) bool { return loadAware[name] }

// Names returns the known policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Check returns an error naming the valid choices when name is not a known policy.
func Check(name string) error {
	if _, ok := factories[name]; !ok {
		return fmt.Errorf("unknown policy %q: choose one of %s", name, strings.Join(Names(), ", "))
	}
	return nil
}

// CheckPolicy is Check for --policy: it also refuses bucket outside PD mode, with a message
// that says what to do instead.
func CheckPolicy(name string, pdMode bool) error {
	if err := Check(name); err != nil {
		return err
	}
	if name == bucket.Name && !pdMode {
		return ErrBucketOutsidePD
	}
	return nil
}

// NewBuilderFunc returns the policy.NewBuilderFunc the Router uses to create policy instances.
// fromFlags=false gives a policy its built-in defaults (spec: Policy Scope). Sub-configs of cfg
// left entirely zero take their defaults, so Config{} works. Every instance is wrapped with
// sticky sessions when cfg.RoutingKeyOverride is set (except manual and consistent_hashing,
// which read the rid themselves), and every instance with background work is registered with
// cfg.Maintenance (DefaultMaintenance when nil).
func NewBuilderFunc(cfg Config) policy.NewBuilderFunc {
	cfg = cfg.withDefaults()
	return func(name string, fromFlags bool) (policy.Builder, error) {
		if err := Check(name); err != nil {
			return nil, err
		}
		b, err := factories[name](&cfg, fromFlags)
		if err != nil {
			return nil, err
		}
		if cfg.RoutingKeyOverride && name != manual.Name && name != consistenthash.Name {
			sc := cfg.Sticky
			sc.Metrics, sc.KeyLoads = cfg.Metrics, cfg.KeyLoads
			b = policy.NewStickyBuilder(b, sc, cfg.Rand, cfg.Clock.Now())
		}
		cfg.Maintenance.Track(b)
		return b, nil
	}
}

// withDefaults fills what a zero Config leaves out.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Rand == nil {
		c.Rand = policy.RuntimeRand{}
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewSet()
	}
	if c.Maintenance == nil {
		c.Maintenance = DefaultMaintenance
	}
	fill(&c.CacheAware, d.CacheAware)
	fill(&c.LeastLoad, d.LeastLoad)
	fill(&c.PowerOfTwo, d.PowerOfTwo)
	fill(&c.PrefixHash, d.PrefixHash)
	fill(&c.Manual, d.Manual)
	fill(&c.Sticky, d.Sticky)
	return c
}

// fill replaces an entirely zero sub-config with its defaults.
func fill[T any](p *T, def T) {
	if reflect.ValueOf(p).Elem().IsZero() {
		*p = def
	}
}

// PDPolicies resolves and checks the leg policies of PD mode (spec: PD and EPD Legs): each
// leg's flag defaults to --policy; bucket is refused on the decode leg and passthrough on
// either, with a message that says what to give instead.
func PDPolicies(defaultPolicy, prefill, decode string) (policy.PDPolicies, error) {
	legs := policy.PDPolicies{Prefill: prefill, Decode: decode}
	if legs.Prefill == "" {
		legs.Prefill = defaultPolicy
	}
	if legs.Decode == "" {
		legs.Decode = defaultPolicy
	}
	for _, l := range []struct{ flag, name string }{{"--prefill-policy", legs.Prefill}, {"--decode-policy", legs.Decode}} {
		if err := Check(l.name); err != nil {
			return legs, fmt.Errorf("%s: %w", l.flag, err)
		}
		if l.name == passthrough.Name {
			return legs, fmt.Errorf("%s passthrough: a PD leg chooses among its workers; use round_robin, power_of_two or cache_aware", l.flag)
		}
	}
	if legs.Decode == bucket.Name {
		if decode == "" {
			return legs, fmt.Errorf("--policy bucket would also route the decode leg, and bucket routes only the prefill leg: set --decode-policy, such as power_of_two")
		}
		return legs, fmt.Errorf("--decode-policy bucket: bucket routes only the prefill leg; give the decode leg another policy, such as power_of_two")
	}
	return legs, nil
}
