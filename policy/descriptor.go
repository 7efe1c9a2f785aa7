package policy

import (
	"log/slog"
	"time"
	"weak"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
)

// Descriptor is what a policy package exports to the table that knows them all (policy/all):
// its Facts (name and abilities), the settings of an instance no flag tunes, and how to build
// an instance. C is the package's Config (struct{} for a policy without settings). The table
// line only says which part of the gateway's settings is the package's C.
type Descriptor[C any] struct {
	Facts
	// Builtin is the settings of an instance no flag tunes: a worker's policy label naming a
	// policy other than --policy gets them (spec: Policy Scope). New must not modify its
	// slices: every such instance shares them.
	Builtin C
	// New builds an instance from cfg (Builtin or the flags') and what the gateway shares.
	New func(cfg C, s Shared) Builder
}

// Describe returns a policy package's Descriptor: name, the settings of an instance no flag
// tunes, and its constructor. The abilities are those of build's result type B (its
// Prototype), so they cannot disagree with what build returns.
func Describe[C any, B Builder](name string, builtin C, build func(cfg C, s Shared) B) Descriptor[C] {
	var prototype B
	return Descriptor[C]{
		Facts:   Facts{Name: name, Prototype: prototype},
		Builtin: builtin,
		New:     func(cfg C, s Shared) Builder { return build(cfg, s) },
	}
}

// Facts are what the table knows of a policy without building it: its name, and its
// abilities. An ability is an interface its Builder implements, checked by type assertion on
// Prototype, a nil *Builder of the package (grpc-go's balancer style): a policy declares what
// it does by having the method, and no list of names elsewhere must be kept in step, so an
// eleventh policy is its package plus one table line.
type Facts struct {
	Name string
	// Prototype is a nil pointer of the policy's Builder type; only its method set is used.
	Prototype Builder
}

// Shared is what every policy instance is built with besides its own settings: the
// gateway's services and gateway-wide settings. policy/all fills every service (none is nil).
type Shared struct {
	Logger *slog.Logger
	Rand   Rand
	// Clock is read when an instance is created (starting coarse clocks).
	Clock clock.Clock
	// Metrics receives the policies' branch counters and gauges.
	Metrics *metrics.Set
	// TreeObserver is told of every prefix cache_aware records (the mesh); nil: none.
	TreeObserver TreeObserver
	// RoutingKeyOverride is --routing-key-override: the body's rid is a routing key too.
	RoutingKeyOverride bool
}

// LoadReader is the ability of a policy whose pickers read load reports (spec: Load
// Signals). While one is in use, --disable-load-monitoring keeps polling.
type LoadReader interface {
	ReadsLoad()
}

// KeyReader is the ability of a policy that reads the request's rid and routing key itself
// (manual's pins, consistent_hashing's ring): --routing-key-override does not wrap it in
// sticky sessions.
type KeyReader interface {
	ReadsRoutingKey()
}

// LegRestricted is the ability of a policy that routes only some legs (spec: PD and EPD
// Legs). A policy without it routes every leg.
type LegRestricted interface {
	// RoutesLeg reports whether the policy can route leg.
	RoutesLeg(leg Leg) bool
}

// Can reports whether the policy has ability A.
func Can[A any](d Facts) bool {
	_, ok := d.Prototype.(A)
	return ok
}

// RoutesLeg reports whether the policy can route leg.
func (d Facts) RoutesLeg(leg Leg) bool {
	r, ok := d.Prototype.(LegRestricted)
	return !ok || r.RoutesLeg(leg)
}

// Weakly returns b's Maintain as a function that holds b only through a weak pointer and
// reports false once b has been collected: the implementation of Maintainer.MaintainWeakly.
func Weakly[T any, P interface {
	*T
	Maintain(now time.Time)
}](b P) func(now time.Time) bool {
	wp := weak.Make((*T)(b))
	return func(now time.Time) bool {
		x := wp.Value()
		if x == nil {
			return false
		}
		P(x).Maintain(now)
		return true
	}
}
