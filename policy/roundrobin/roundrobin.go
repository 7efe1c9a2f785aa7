package roundrobin

import (
	"strings"
	"sync/atomic"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "round_robin"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, struct{}{}, func(struct{}, policy.Shared) *Builder { return New() })

// MaxSets bounds the number of candidate sets whose cursors are kept (spec: at most 4,096).
const MaxSets = 4096

// Builder keeps one cursor per candidate set.
type Builder struct {
	cursors map[string]*atomic.Uint64
}

// New returns a round_robin Builder.
func New() *Builder { return &Builder{cursors: map[string]*atomic.Uint64{}} }

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	key := setKey(g.Workers)
	c := b.cursors[key]
	if c == nil {
		if len(b.cursors) >= MaxSets {
			clear(b.cursors) // a fleet churning through sets restarts rotations, not memory
		}
		c = new(atomic.Uint64)
		b.cursors[key] = c
	}
	return &picker{workers: g.Workers, cursor: c}
}

func setKey(ws []*worker.Worker) string {
	var sb strings.Builder
	for _, w := range ws {
		sb.WriteString(w.ID)
		sb.WriteByte(',')
	}
	return sb.String()
}

type picker struct {
	workers []*worker.Worker
	cursor  *atomic.Uint64
}

// Pick takes the next worker in rotation, skipping any that is not usable right now.
func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	n := uint64(len(p.workers))
	if n == 0 {
		return policy.Result{}, policy.ErrNoAvailableWorkers
	}
	start := p.cursor.Add(1) - 1
	for i := range n {
		if w := p.workers[(start+i)%n]; req.Usable(w) {
			return policy.Result{Worker: w}, nil
		}
	}
	return policy.Result{}, policy.ErrNoAvailableWorkers
}
