package all

import (
	"errors"
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
	"github.com/smg-go/smg/policy/sticky"
)

// DefaultPolicy is --policy's default (spec: cache_aware is the production default).
const DefaultPolicy = cacheaware.Name

// factory builds an instance of a policy: from cfg's flag-tuned settings when fromFlags, else
// from the policy's built-in defaults (spec: Policy Scope).
type factory func(cfg *Config, fromFlags bool) (policy.Builder, error)

// entry is one line of the table: a policy's descriptor (name and abilities) and how to build
// it from Config.
type entry struct {
	policy.Descriptor
	build factory
}

// table is every policy. A new policy is its package plus one line here: what it can do
// (read loads, read the routing key itself, route only some PD legs, run background work) is
// found on its Builder by type assertion, not listed by name.
var table = []entry{
	{roundrobin.Descriptor, func(*Config, bool) (policy.Builder, error) { return roundrobin.New(), nil }},
	{random.Descriptor, func(c *Config, _ bool) (policy.Builder, error) { return random.New(c.Rand), nil }},
	{passthrough.Descriptor, func(c *Config, _ bool) (policy.Builder, error) {
		return passthrough.New(c.Logger), nil
	}},
	{cacheaware.Descriptor, func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := cacheaware.BuiltinConfig()
		if fromFlags {
			cfg = c.CacheAware
		}
		cfg.Metrics, cfg.Observer = c.Metrics, c.TreeObserver
		return cacheaware.New(cfg, c.Rand), nil
	}},
	{leastload.Descriptor, func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := leastload.DefaultConfig()
		if fromFlags {
			cfg = c.LeastLoad
		}
		return leastload.New(cfg, c.Rand), nil
	}},
	{poweroftwo.Descriptor, func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := poweroftwo.DefaultConfig()
		if fromFlags {
			cfg = c.PowerOfTwo
		}
		return poweroftwo.New(cfg, c.Rand), nil
	}},
	{consistenthash.Descriptor, func(c *Config, _ bool) (policy.Builder, error) {
		// --routing-key-override is gateway-wide: it applies to label-chosen instances too.
		return consistenthash.New(consistenthash.Config{RoutingKeyOverride: c.RoutingKeyOverride, Metrics: c.Metrics}, c.Rand), nil
	}},
	{prefixhash.Descriptor, func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := prefixhash.DefaultConfig()
		if fromFlags {
			cfg = c.PrefixHash
		}
		cfg.Metrics = c.Metrics
		return prefixhash.New(cfg, c.Rand), nil
	}},
	{manual.Descriptor, func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := manual.DefaultConfig()
		if fromFlags {
			cfg = c.Manual
		}
		cfg.RoutingKeyOverride, cfg.Metrics = c.RoutingKeyOverride, c.Metrics
		return manual.New(cfg, c.Rand, c.Clock.Now()), nil
	}},
	{bucket.Descriptor, func(c *Config, fromFlags bool) (policy.Builder, error) {
		cfg := bucket.DefaultConfig()
		if fromFlags {
			cfg = bucket.Config{BalanceAbsThreshold: c.CacheAware.BalanceAbsThreshold, BalanceRelThreshold: c.CacheAware.BalanceRelThreshold}
		}
		return bucket.New(cfg, c.Rand), nil
	}},
}

// ErrPDOnly refuses, outside PD mode, a policy that routes only PD legs (bucket: its buckets
// are prefill lengths).
var ErrPDOnly = errors.New("the policy routes only legs of PD disaggregation")

// ErrBucketOutsidePD is ErrPDOnly; bucket is the policy that has no regular leg.
var ErrBucketOutsidePD = ErrPDOnly

// pdOnlyError is ErrPDOnly for one policy, saying which leg it routes.
type pdOnlyError struct{ policy.Descriptor }

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
	return ok && policy.Can[policy.LoadReader](e.Descriptor)
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
		return pdOnlyError{e.Descriptor}
	}
	return nil
}

// NewBuilderFunc returns the policy.NewBuilderFunc the Router uses to create policy instances.
// fromFlags=false gives a policy its built-in defaults (spec: Policy Scope). Sub-configs of cfg
// left entirely zero take their defaults, so Config{} works. Every instance is wrapped with
// sticky sessions when cfg.RoutingKeyOverride is set (except the policy.KeyReader ones, manual
// and consistent_hashing, which read the rid themselves), and every instance with background work is registered with
// cfg.Maintenance (DefaultMaintenance when nil).
func NewBuilderFunc(cfg Config) policy.NewBuilderFunc {
	cfg = cfg.withDefaults()
	return func(name string, fromFlags bool) (policy.Builder, error) {
		e, ok := lookup(name)
		if !ok {
			return nil, Check(name)
		}
		if !cfg.PDMode && !e.RoutesLeg(policy.LegRegular) {
			return nil, pdOnlyError{e.Descriptor}
		}
		b, err := e.build(&cfg, fromFlags)
		if err != nil {
			return nil, err
		}
		if _, readsKey := b.(policy.KeyReader); cfg.RoutingKeyOverride && !readsKey {
			sc := cfg.Sticky
			sc.Metrics, sc.KeyLoads = cfg.Metrics, cfg.KeyLoads
			b = sticky.NewBuilder(b, sc, cfg.Rand, cfg.Clock.Now())
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
