package all

import (
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/smg-go/smg/policy/sticky"
)

// DefaultPolicy is --policy's default (spec: cache_aware is the production default).
const DefaultPolicy = cacheaware.Name

// entry is one line of the table: a policy's Facts (name and abilities) and how to build an
// instance of it from the gateway's settings.
type entry struct {
	policy.Facts
	// build builds an instance: with the flag-tuned settings when fromFlags, else with the
	// policy's built-in ones (spec: Policy Scope).
	build func(c *Config, s policy.Shared, fromFlags bool) policy.Builder
}

// bind makes d a table line whose flag-tuned settings flags reads from Config; flags is nil
// for a policy without flags of its own, whose instances all get d.Builtin.
func bind[C any](d policy.Descriptor[C], flags func(*Config) C) entry {
	return entry{d.Facts, func(c *Config, s policy.Shared, fromFlags bool) policy.Builder {
		cfg := d.Builtin
		if fromFlags && flags != nil {
			cfg = flags(c)
		}
		return d.New(cfg, s)
	}}
}

// table is every policy. A new policy is its package plus one line here, which names the
// part of Config its flags fill: what it can do (read loads, read the routing key itself,
// route only some PD legs, run background work) is found on its Builder by type assertion,
// not listed by name, and how it is built is its package's Descriptor.
var table = []entry{
	bind(roundrobin.Descriptor, nil),
	bind(random.Descriptor, nil),
	bind(passthrough.Descriptor, nil),
	bind(cacheaware.Descriptor, func(c *Config) cacheaware.Config { return c.CacheAware }),
	bind(leastload.Descriptor, func(c *Config) leastload.Config { return c.LeastLoad }),
	bind(poweroftwo.Descriptor, func(c *Config) poweroftwo.Config { return c.PowerOfTwo }),
	bind(consistenthash.Descriptor, nil),
	bind(prefixhash.Descriptor, func(c *Config) prefixhash.Config { return c.PrefixHash }),
	bind(manual.Descriptor, func(c *Config) manual.Config { return c.Manual }),
	// bucket's spill gate is cache_aware's (--balance-abs-threshold, --balance-rel-threshold).
	bind(bucket.Descriptor, func(c *Config) bucket.Config {
		return bucket.Config{BalanceAbsThreshold: c.CacheAware.BalanceAbsThreshold, BalanceRelThreshold: c.CacheAware.BalanceRelThreshold}
	}),
}

// ErrPDOnly refuses, outside PD mode, a policy that routes only PD legs (bucket: its buckets
// are prefill lengths).
var ErrPDOnly = errors.New("the policy routes only legs of PD disaggregation")

// ErrBucketOutsidePD is ErrPDOnly; bucket is the policy that has no regular leg.
var ErrBucketOutsidePD = ErrPDOnly

// pdOnlyError is ErrPDOnly for one policy, saying which leg it routes.
type pdOnlyError struct{ policy.Facts }

func (e pdOnlyError) Error() string {
	leg := policy.LegPrefill
	if !e.RoutesLeg(leg) {
		leg = policy.LegDecode
	}
	return fmt.Sprintf("policy %s routes the %s leg of PD disaggregation and has nothing to route outside it: "+
		"use it with --pd-disaggregation --%s-policy %s, or choose another --policy such as cache_aware", e.Name, leg, leg, e.Name)
}

func (pdOnlyError) Unwrap() error { return ErrPDOnly }

// lookup returns name's line of the table.
func lookup(name string) (entry, bool) {
	for _, e := range table {
		if e.Name == name {
			return e, true
		}
	}
	return entry{}, false
}

// LoadAware reports whether the policy reads load reports (policy.LoadReader), so that
// --disable-load-monitoring keeps polling while one is in use.
func LoadAware(name string) bool {
	e, ok := lookup(name)
	return ok && policy.Can[policy.LoadReader](e.Facts)
}

// Names returns the known policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(table))
	for _, e := range table {
		out = append(out, e.Name)
	}
	sort.Strings(out)
	return out
}

// Check returns an error naming the valid choices when name is not a known policy.
func Check(name string) error {
	if _, ok := lookup(name); !ok {
		return fmt.Errorf("unknown policy %q: choose one of %s", name, strings.Join(Names(), ", "))
	}
	return nil
}

// CheckPolicy is Check for --policy: it also refuses, outside PD mode, a policy that routes
// only PD legs, with a message that says what to do instead.
func CheckPolicy(name string, pdMode bool) error {
	if err := Check(name); err != nil {
		return err
	}
	if e, _ := lookup(name); !pdMode && !e.RoutesLeg(policy.LegRegular) {
		return pdOnlyError{e.Facts}
	}
	return nil
}

// NewBuilderFunc returns the policy.NewBuilderFunc the Router uses to create policy instances,
// or cfg.Validate's error: start from DefaultConfig, whose every per-policy part is set (a
// zero part is refused, not read as its defaults). fromFlags=false gives a policy its
// built-in defaults (spec: Policy Scope). Every instance is wrapped with sticky sessions when
// cfg.RoutingKeyOverride is set (except the policy.KeyReader ones, manual and
// consistent_hashing, which read the rid themselves), and every instance with background work
// is registered with cfg.Maintenance.
func NewBuilderFunc(cfg Config) (policy.NewBuilderFunc, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withServices()
	shared := policy.Shared{
		Logger: cfg.Logger, Rand: cfg.Rand, Clock: cfg.Clock, Metrics: cfg.Metrics,
		TreeObserver: cfg.TreeObserver, RoutingKeyOverride: cfg.RoutingKeyOverride,
	}
	return func(name string, fromFlags bool) (policy.Builder, error) {
		e, ok := lookup(name)
		if !ok {
			return nil, Check(name)
		}
		if !cfg.PDMode && !e.RoutesLeg(policy.LegRegular) {
			return nil, pdOnlyError{e.Facts}
		}
		b := e.build(&cfg, shared, fromFlags)
		if _, readsKey := b.(policy.KeyReader); cfg.RoutingKeyOverride && !readsKey {
			sc := cfg.Sticky
			sc.Metrics, sc.KeyLoads = cfg.Metrics, cfg.KeyLoads
			b = sticky.NewBuilder(b, sc, cfg.Rand, cfg.Clock.Now())
		}
		cfg.Maintenance.Track(b)
		return b, nil
	}, nil
}

// withServices gives each service left nil its documented stand-in (Config's fields say
// which); a nil service is "not given", not a number read as a default.
func (c Config) withServices() Config {
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
	return c
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
	for _, l := range []struct {
		flag, name, given string
		leg               policy.Leg
	}{{"--prefill-policy", legs.Prefill, prefill, policy.LegPrefill}, {"--decode-policy", legs.Decode, decode, policy.LegDecode}} {
		e, ok := lookup(l.name)
		if !ok {
			return legs, fmt.Errorf("%s: %w", l.flag, Check(l.name))
		}
		if e.RoutesLeg(l.leg) {
			continue
		}
		other := policy.LegDecode // the PD leg that is not l.leg
		if l.leg == policy.LegDecode {
			other = policy.LegPrefill
		}
		switch {
		case !e.RoutesLeg(other):
			return legs, fmt.Errorf("%s %s: a PD leg chooses among its workers; use round_robin, power_of_two or cache_aware", l.flag, l.name)
		case l.given == "":
			return legs, fmt.Errorf("--policy %s would also route the %s leg, and %s routes only the %s leg: set %s, such as power_of_two", l.name, l.leg, l.name, other, l.flag)
		default:
			return legs, fmt.Errorf("%s %s: %s routes only the %s leg; give the %s leg another policy, such as power_of_two", l.flag, l.name, l.name, other, l.leg)
		}
	}
	return legs, nil
}

// DefaultEncodePolicy is --encode-policy's default (spec: PD and EPD Legs).
const DefaultEncodePolicy = consistenthash.Name

// EncodePolicy resolves and checks --encode-policy: empty means DefaultEncodePolicy; the spec
// accepts random, round_robin and consistent_hashing on the encode leg, which has no prefix
// to be cache-aware about and no load report to balance.
func EncodePolicy(name string) (string, error) {
	switch name {
	case "":
		return DefaultEncodePolicy, nil
	case random.Name, roundrobin.Name, consistenthash.Name:
		return name, nil
	}
	return "", fmt.Errorf("--encode-policy %q: the encode leg takes random, round_robin or consistent_hashing (default %s)", name, DefaultEncodePolicy)
}
