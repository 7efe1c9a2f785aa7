package policy

import (
	"time"
	"weak"
)

// Descriptor describes one policy to the table that knows them all (policy/all): its name,
// and its abilities. Every policy package exports one. An ability is an interface its Builder
// implements, checked by type assertion on Prototype, a nil *Builder of the package (grpc-go's
// balancer style): a policy declares what it does by having the method, and no list of names
// elsewhere must be kept in step, so an eleventh policy is its package plus one table line.
type Descriptor struct {
	Name string
	// Prototype is a nil pointer of the policy's Builder type; only its method set is used.
	Prototype Builder
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
func Can[A any](d Descriptor) bool {
	_, ok := d.Prototype.(A)
	return ok
}

// RoutesLeg reports whether the policy can route leg.
func (d Descriptor) RoutesLeg(leg Leg) bool {
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
