package passthrough

import (
	"log/slog"

	"github.com/smg-go/smg/policy"
)

// Name is the policy's --policy name.
const Name = "passthrough"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, struct{}{}, func(_ struct{}, s policy.Shared) *Builder { return New(s.Logger) })

// Builder builds passthrough pickers.
type Builder struct {
	Logger *slog.Logger
	warned bool
}

// New returns a passthrough Builder (logger nil: slog.Default()).
func New(logger *slog.Logger) *Builder {
	if logger == nil {
		logger = slog.Default()
	}
	return &Builder{Logger: logger}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	if len(g.Workers) > 1 && !b.warned {
		b.warned = true
		b.Logger.Warn("passthrough policy with more than one worker: all traffic goes to the first available worker",
			"model", g.Model, "workers", len(g.Workers))
	}
	return &picker{g: g}
}

type picker struct{ g policy.Group }

func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	for _, w := range p.g.Workers {
		if req.Usable(w) {
			return policy.Result{Worker: w}, nil
		}
	}
	return policy.Result{}, policy.ErrNoAvailableWorkers
}

// RoutesLeg makes the policy a policy.LegRestricted: it forwards to the worker the client
// named, which a PD leg, choosing among its workers, cannot do.
func (*Builder) RoutesLeg(leg policy.Leg) bool { return leg == policy.LegRegular }
