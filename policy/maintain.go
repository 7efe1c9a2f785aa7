package policy

import "time"

// Maintainer is implemented by builders with periodic background work that must stay off the
// hot path: cache_aware's tree eviction, manual's and sticky sessions' idle-key eviction,
// bucket's window rotation and boundary adjustment. The owner (policy/all's Maintenance)
// calls Maintain about once a second with the current time; each builder decides from now
// whether its own interval has elapsed, so tests drive it with a fake clock and no sleeps.
// Maintain runs on one goroutine at a time, concurrently with picks.
//
// MaintainWeakly hands the work to its owner without keeping the builder alive (the Router
// drops an instance without telling anyone): implement it as `return policy.Weakly(b)`.
type Maintainer interface {
	Maintain(now time.Time)
	MaintainWeakly() func(now time.Time) bool
}
