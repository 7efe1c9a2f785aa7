package all

import (
	"context"
	"sync"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
)

// MaintenanceInterval is how often Run calls Maintain; each policy instance decides from the
// time whether its own interval (eviction, idle keys, bucket windows) has come.
const MaintenanceInterval = time.Second

// Maintenance runs the background work of policy instances off the hot path, on one goroutine.
//
// The Router creates an instance per model and drops it when the model's last worker leaves,
// without telling anyone. So Maintenance holds instances through weak pointers: a dropped
// instance is collected like any garbage, and the next round forgets it. No goroutine per
// instance, nothing to close. Safe for concurrent use.
type Maintenance struct {
	round   sync.Mutex             // one round at a time
	mu      sync.Mutex             // guards entries
	entries []func(time.Time) bool // false once the instance is gone
}

// DefaultMaintenance is the Maintenance of a Config that names none. Nothing runs it by
// itself: a program that builds policies without naming a Maintenance must run it
// (go DefaultMaintenance.Run(ctx, clk)), or its trees and pins are never evicted. cmd/smg
// names its own Maintenance and runs it (gateway.startMonitors), which
// internal/e2e.TestCacheAwareTreesAreEvictedByTheShippedBinary and
// TestStickySessionsAndPinsAreForgottenByTheShippedBinary check on the built binary.
var DefaultMaintenance = NewMaintenance()

// NewMaintenance returns an empty Maintenance.
func NewMaintenance() *Maintenance { return &Maintenance{} }

// Track registers b's background work, if it has any (policy.Maintainer).
func (m *Maintenance) Track(b policy.Builder) {
	mb, ok := b.(policy.Maintainer)
	if !ok {
		if _, half := b.(interface{ Maintain(time.Time) }); half {
			// A programming error that would otherwise fail silently (no eviction): every test
			// that builds the policy finds it.
			panic("policy " + b.Name() + " has Maintain but not MaintainWeakly: implement it as `return policy.Weakly(b)`")
		}
		return
	}
	work := mb.MaintainWeakly()
	m.mu.Lock()
	m.entries = append(m.entries, work)
	m.mu.Unlock()
}

// Maintain runs one round at now and forgets the instances that were collected.
func (m *Maintenance) Maintain(now time.Time) {
	m.round.Lock()
	defer m.round.Unlock()
	m.mu.Lock()
	entries := m.entries
	m.mu.Unlock()
	alive := entries[:0:0]
	for _, e := range entries {
		if e(now) {
			alive = append(alive, e)
		}
	}
	m.mu.Lock()
	// Keep what was tracked during the round.
	m.entries = append(alive, m.entries[len(entries):]...)
	m.mu.Unlock()
}

// Run calls Maintain every MaintenanceInterval of clk until ctx is done.
func (m *Maintenance) Run(ctx context.Context, clk clock.Clock) {
	t := clk.NewTicker(MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C():
			m.Maintain(now)
		}
	}
}
