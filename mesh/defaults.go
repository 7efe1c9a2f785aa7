package mesh

import (
	"time"

	"github.com/smg-go/smg/mesh/wire"
)

// Timing defaults: the spec's Failure Detection Timing table, plus the knobs the spec's
// product does not have (suspicion timeout, reconnect probes, keep-alive).
const (
	DefaultRound          = time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultBackoffBase    = time.Second
	DefaultBackoffMax     = 60 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
	DefaultIndirectProbes = 3
	// DefaultProbeTimeout is memberlist's: a probe unanswered for this long is retried through
	// helpers as well.
	DefaultProbeTimeout = 500 * time.Millisecond
	// DefaultSuspectTimeout: a SUSPECTED member that has not refuted within it is declared
	// DOWN even if no probe of it failed again (memberlist's suspicion timeout), which bounds
	// failure detection when redial backoff delays the second probe.
	DefaultSuspectTimeout = 5 * time.Second
	// DefaultReconnectEvery: every this many rounds one DOWN member is probed, so that two
	// sides of a healed partition find each other again (Serf's reconnect).
	DefaultReconnectEvery = 10
	// DefaultKeepAlive: the opener of a sync stream sends an empty message after this long
	// without traffic, so only a dead stream reaches the idle timeout.
	DefaultKeepAlive = 20 * time.Second
	// DefaultRepairTimeout, DefaultRepairAttempts and DefaultPageBytes are the spec's tree
	// repair figures.
	DefaultRepairTimeout  = 5 * time.Second
	DefaultRepairAttempts = 3
	DefaultPageBytes      = 2 << 20
	// DefaultDeltaQueue bounds the cache-tree deltas queued between rounds.
	DefaultDeltaQueue = 1 << 16
	// DefaultDeltaQueueBytes bounds the bytes those deltas hold (each holds a whole prompt).
	DefaultDeltaQueueBytes = 64 << 20
	// DefaultMaxSyncBytes bounds one sync message: half the wire's message limit, so an
	// estimate that runs short still fits. A round larger than it goes out as several
	// messages.
	DefaultMaxSyncBytes = wire.DefaultMaxMessage / 2
	// DefaultMaxEntriesPerMessage bounds the CRDT entries of one sync message.
	DefaultMaxEntriesPerMessage = 4096
	// DefaultTombstoneHorizon is how long a router keeps the tombstones of the workers it
	// removed before collecting them under its floor. Safety does not depend on it (the
	// floor is what keeps a removed worker removed); it is an hour so that a tombstone
	// outlives every protocol timer by far (DOWN within 2-17 s, a DOWN peer re-probed every
	// 10 rounds, the 60 s idle timeout, the 60 s redial backoff), and the routers that hear
	// of a removal hear of it as a tombstone, which removes the worker from them at once,
	// rather than waiting for the floor.
	DefaultTombstoneHorizon = time.Hour
)
