package random

import "github.com/smg-go/smg/policy"

// Name is the policy's --policy name.
const Name = "random"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, struct{}{}, func(_ struct{}, s policy.Shared) *Builder { return New(s.Rand) })

// Builder builds random pickers. Rand defaults to policy.RuntimeRand.
type Builder struct {
	Rand policy.Rand
}

// New returns a random Builder drawing from rnd (nil: policy.RuntimeRand).
func New(rnd policy.Rand) *Builder {
	rnd = policy.RandOr(rnd)
	return &Builder{Rand: rnd}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	return &picker{g: g, rnd: b.Rand}
}

type picker struct {
	g   policy.Group
	rnd policy.Rand
}

func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	if w := policy.PickRandomUsable(req, p.g.Workers, p.rnd); w != nil {
		return policy.Result{Worker: w}, nil
	}
	return policy.Result{}, policy.ErrNoAvailableWorkers
}
