package mesh

import (
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

// Options configures a Node: the protocol's identity, timing and collaborators. Start from
// DefaultOptions: a zero timing or size is refused by Validate, not read as its default.
type Options struct {
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

	// Round is the protocol period: one Tick (probes and sync) per round, at most two rounds
	// overlapping when one waits on a dead peer.
	Round time.Duration
	// RequestTimeout bounds one call to a peer (a probe, a sync exchange).
	RequestTimeout time.Duration
	// BackoffBase and BackoffMax bound the wait before redialling a peer; it doubles from
	// Base to Max.
	BackoffBase, BackoffMax time.Duration
	// IdleTimeout closes a sync stream that carried nothing for this long.
	IdleTimeout time.Duration
	// SuspectTimeout: a SUSPECTED member that has not refuted within it is declared DOWN.
	SuspectTimeout time.Duration
	// KeepAlive: the opener of a sync stream sends an empty message after this long without
	// traffic.
	KeepAlive time.Duration
	// IndirectProbes is how many members are asked to probe a member that missed a direct
	// probe.
	IndirectProbes int
	// ReconnectEvery: every this many rounds one DOWN member is probed again.
	ReconnectEvery int
	// RepairTimeout: a tree repair that made no progress for this long is retried, at most
	// RepairAttempts times; PageBytes bounds one repair page.
	RepairTimeout  time.Duration
	RepairAttempts int
	PageBytes      int
	// DeltaQueue bounds the cache-tree deltas queued between rounds (a delta past it is
	// dropped and counted).
	DeltaQueue int
	// MaxEntriesPerMessage bounds the CRDT entries of one sync message.
	MaxEntriesPerMessage int
	// DeltaQueueBytes bounds the bytes of the queued deltas; a delta past it is dropped and
	// counted, as one past DeltaQueue is.
	DeltaQueueBytes int
	// MaxSyncBytes bounds the encoded size of one sync message (estimated): a round's deltas
	// and entries are split across messages of at most this, and a delta larger than it is
	// dropped when published. It must stay below the transport's message limit (Start sets
	// it to at most half of it).
	MaxSyncBytes int
	// TombstoneHorizon: this router's tombstones older than it are collected
	// (DefaultTombstoneHorizon).
	TombstoneHorizon time.Duration

	// Trees, when set, takes part in cache-tree sync.
	Trees Trees

	Metrics *metrics.Set // default: a private set
	Logger  *slog.Logger // default: slog.Default()
}

// DefaultOptions returns the timing and size defaults above; the caller sets the identity
// (Name, Addr, Seeds), the Transport and, optionally, the collaborators.
func DefaultOptions() Options {
	return Options{
		Round: DefaultRound, RequestTimeout: DefaultRequestTimeout,
		BackoffBase: DefaultBackoffBase, BackoffMax: DefaultBackoffMax,
		IdleTimeout: DefaultIdleTimeout, SuspectTimeout: DefaultSuspectTimeout,
		KeepAlive: DefaultKeepAlive, RepairTimeout: DefaultRepairTimeout,
		TombstoneHorizon: DefaultTombstoneHorizon,
		IndirectProbes:   DefaultIndirectProbes, ReconnectEvery: DefaultReconnectEvery,
		RepairAttempts: DefaultRepairAttempts, PageBytes: DefaultPageBytes,
		DeltaQueue: DefaultDeltaQueue, MaxEntriesPerMessage: DefaultMaxEntriesPerMessage,
		DeltaQueueBytes: DefaultDeltaQueueBytes, MaxSyncBytes: DefaultMaxSyncBytes,
	}
}

// fillDefaults supplies the collaborators left nil (and a seed from the clock when RandSeed
// is 0): dependencies, not settings.
func (o *Options) fillDefaults() {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.RandSeed == 0 {
		o.RandSeed = uint64(o.Clock.Now().UnixNano())
	}
	if o.Spawn == nil {
		o.Spawn = func(f func()) { go f() }
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
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
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Round", o.Round}, {"RequestTimeout", o.RequestTimeout}, {"BackoffBase", o.BackoffBase},
		{"BackoffMax", o.BackoffMax}, {"IdleTimeout", o.IdleTimeout}, {"SuspectTimeout", o.SuspectTimeout},
		{"KeepAlive", o.KeepAlive}, {"RepairTimeout", o.RepairTimeout}, {"TombstoneHorizon", o.TombstoneHorizon},
	} {
		if d.v <= 0 {
			return fmt.Errorf("mesh option %s is %v: give a positive duration (start from mesh.DefaultOptions)", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"IndirectProbes", o.IndirectProbes}, {"ReconnectEvery", o.ReconnectEvery}, {"RepairAttempts", o.RepairAttempts},
		{"PageBytes", o.PageBytes}, {"DeltaQueue", o.DeltaQueue}, {"MaxEntriesPerMessage", o.MaxEntriesPerMessage},
		{"DeltaQueueBytes", o.DeltaQueueBytes}, {"MaxSyncBytes", o.MaxSyncBytes},
	} {
		if n.v < 1 {
			return fmt.Errorf("mesh option %s is %d: give at least 1 (start from mesh.DefaultOptions)", n.name, n.v)
		}
	}
	return nil
}
