package mesh

import (
	"time"

	"github.com/smg-go/smg/mesh/wire"
)

// overrides reports whether claim a about a member supersedes claim b (memberlist's rule): a
// higher incarnation wins; at the same incarnation the later status in the order ALIVE,
// SUSPECTED, DOWN, LEAVING wins. Only the member itself raises its incarnation, which is how
// it refutes a suspicion or a DOWN mark.
func overrides(a, b wire.Member) bool {
	if a.Incarnation != b.Incarnation {
		return a.Incarnation > b.Incarnation
	}
	return a.Status > b.Status
}

// peer is this node's view of one other member.
type peer struct {
	wire.Member
	since     time.Time     // when Status last changed
	nextDial  time.Time     // redial backoff: no probe before this
	backoff   time.Duration // current backoff; 0 after a success
	probing   bool          // a probe of it is in flight
	probeSoon bool          // its sync stream broke while it was ALIVE: probe it next
	suspectAt time.Time     // when it became SUSPECTED
}

func (p *peer) probeable() bool {
	return p.Status == wire.StatusAlive || p.Status == wire.StatusSuspected
}
