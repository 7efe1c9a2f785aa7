package mesh

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
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

// Options is what a Node runs with: the settings (Config, whose protocol timing and sizes
// it reads) plus its identity and collaborators. Start from DefaultOptions.
type Options struct {
	Config

	Name string // this router's node name
	Addr string // IP:port peers dial
	// Seeds are bootstrap addresses, dialled with backoff until first contact.
	Seeds []string

	Transport Transport
	// Clock is the time source (default clock.Real). Tests inject a fake one.
	Clock clock.Clock
	// RandSeed seeds the probe order and peer choices (default: from the clock).
	RandSeed uint64
	// Spawn runs fire-and-forget work such as status broadcasts (default: a goroutine).
	// Tests run it inline for determinism.
	Spawn func(func())

	// Trees, when set, takes part in cache-tree sync.
	Trees Trees

	Metrics *metrics.Set // default: a private set
	Logger  *slog.Logger // default: slog.Default()
}

// DefaultOptions returns DefaultConfig's settings; the caller sets the identity (Name, Addr,
// Seeds), the Transport and, optionally, the collaborators.
func DefaultOptions() Options { return Options{Config: DefaultConfig()} }

// fillDefaults supplies the collaborators left nil (and a seed from the clock when RandSeed
// is 0): dependencies, not settings.
func (o *Options) fillDefaults() {
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real{})
	o.RandSeed = cmp.Or(o.RandSeed, uint64(o.Clock.Now().UnixNano()))
	if o.Spawn == nil {
		o.Spawn = func(f func()) { go f() }
	}
	o.Metrics = cmp.Or(o.Metrics, metrics.NewSet())
	o.Logger = cmp.Or(o.Logger, slog.Default())
}

// Validate reports options a Node cannot run with.
func (o *Options) Validate() error {
	switch {
	case o.Name == "":
		return fmt.Errorf("mesh node needs a name")
	case o.Addr == "":
		return fmt.Errorf("mesh node %s needs an advertise address", o.Name)
	case o.Transport == nil:
		return fmt.Errorf("mesh node %s needs a transport", o.Name)
	}
	return o.validateProtocol()
}
