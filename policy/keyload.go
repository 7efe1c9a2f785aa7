package policy

import (
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// keyLoadSlots is the size of a KeyLoads table: 65,536 counters, 512 KiB.
const keyLoadSlots = 1 << 16

// KeyLoads counts the gateway's in-flight requests per routing key, the per-key load signal
// sticky sessions cap (a session with sticky.DefaultInFlightCap of its own requests in flight is
// bypassed rather than stacked onto its worker).
//
// Keys are counted in a fixed table of atomic counters indexed by the key's hash, so counting
// neither locks nor allocates, and the table never grows. Two keys sharing a slot add up, which
// can only make a key look busier than it is (with 65,536 slots and a few thousand live
// sessions, rarely). The gateway calls Add(h, +1) at dispatch and Add(h, -1) exactly once when
// the request ends, with h from StickyKeyHash.
type KeyLoads struct {
	slots [keyLoadSlots]atomic.Int32
}

// NewKeyLoads returns an empty table.
func NewKeyLoads() *KeyLoads { return new(KeyLoads) }

// Add adds delta to the in-flight count of the key whose hash is h.
func (k *KeyLoads) Add(h uint64, delta int32) { k.slots[h%keyLoadSlots].Add(delta) }

// Get returns the in-flight count of the key whose hash is h.
func (k *KeyLoads) Get(h uint64) int32 { return k.slots[h%keyLoadSlots].Load() }

// StickyKeyHash returns the hash of the request's sticky key (StickyKey with override), the
// handle of KeyLoads; ok is false when the request has no key.
func StickyKeyHash(req *Request, override bool) (h uint64, ok bool) {
	key, _ := StickyKey(req, override)
	if key == nil {
		return 0, false
	}
	return xxh3.Hash(key), true
}
