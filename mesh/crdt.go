package mesh

import (
	"bytes"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/mesh/wire"
)

// newer reports whether write a wins over write b of the same key: last writer wins by
// Lamport timestamp, then by replica name. An owner never writes two values under one
// timestamp, but the order must still be total for the merge to be a join (commutative,
// associative, idempotent whatever arrives), so a tombstone then the larger value break the
// remaining ties; the property test found the case where they matter.
func newer(a, b *wire.Entry) bool {
	if a.Lamport != b.Lamport {
		return a.Lamport > b.Lamport
	}
	if a.Replica != b.Replica {
		return a.Replica > b.Replica
	}
	if a.Deleted != b.Deleted {
		return a.Deleted
	}
	return bytes.Compare(a.Value, b.Value) > 0
}

// floorKeyPrefix starts an owner's tombstone floor, "floor:<owner>": an entry written only by
// that owner whose Lamport timestamp is the floor (see tombstone collection in the package
// documentation). It is never deleted nor collected: one per owner that collected.
const floorKeyPrefix = "floor:"

func floorKey(owner string) string { return floorKeyPrefix + owner }

// floorOwner returns the owner of a floor key.
func floorOwner(key string) (string, bool) {
	owner, ok := strings.CutPrefix(key, floorKeyPrefix)
	return owner, ok && owner != ""
}

// keyOwner returns the owner of a key that an owner's floor covers ("worker:<owner>:<url>"),
// or "" for keys that are never collected.
func keyOwner(key string) string {
	owner, _, ok := parseWorkerKey(key)
	if !ok {
		return ""
	}
	return owner
}

// Store is a last-writer-wins map: the replicated worker state. It is not safe for concurrent
// use; the Node guards it with its lock.
//
// Each owner's floor (the newest "floor:<owner>" entry) stands for a tombstone of every key of
// that owner at the floor's timestamp: an entry of the owner's keys at or below it is dropped
// and refused on arrival. The state is still a join: a key's value is the newest write of it
// above its owner's floor, whatever the order of arrival (property-tested).
type Store struct {
	entries map[string]*wire.Entry
	floors  map[string]uint64 // owner → floor

	// collected counts tombstones a floor removed; stale counts live entries at or below a
	// floor, removed or refused on arrival (copies of removed workers held by a router that
	// was away). Nil: not counted.
	collected, stale *metrics.Counter
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{entries: map[string]*wire.Entry{}, floors: map[string]uint64{}} }

// Merge folds e into the store and reports whether it changed the store. The store keeps its
// own copy.
func (s *Store) Merge(e wire.Entry) bool {
	owner, isFloor := floorOwner(e.Key)
	if isFloor {
		if e.Replica != owner || e.Deleted {
			return false // only the owner sets its floor, and never deletes it
		}
		e.Value = nil
	} else if o := keyOwner(e.Key); o != "" && e.Lamport <= s.floors[o] {
		if !e.Deleted {
			inc(s.stale)
		}
		return false
	}
	cur := s.entries[e.Key]
	if cur != nil && !newer(&e, cur) {
		return false
	}
	e.Value = append([]byte(nil), e.Value...)
	s.entries[e.Key] = &e
	if isFloor {
		s.raiseFloor(owner, e.Lamport)
	}
	return true
}

// raiseFloor drops every entry of owner's keys at or below f.
func (s *Store) raiseFloor(owner string, f uint64) {
	if f <= s.floors[owner] {
		return
	}
	s.floors[owner] = f
	for k, e := range s.entries {
		if e.Lamport <= f && keyOwner(k) == owner {
			delete(s.entries, k)
			if e.Deleted {
				inc(s.collected)
			} else {
				inc(s.stale)
			}
		}
	}
}

func inc(c *metrics.Counter) {
	if c != nil {
		c.Inc()
	}
}

// Floor returns owner's floor: writes of its keys at or below it are gone for good.
func (s *Store) Floor(owner string) uint64 { return s.floors[owner] }

// Get returns the entry of key, or nil. The entry belongs to the store: do not modify it.
func (s *Store) Get(key string) *wire.Entry { return s.entries[key] }

// Len is the number of keys, tombstones and floors included.
func (s *Store) Len() int { return len(s.entries) }

// Tombstones is the number of tombstones held.
func (s *Store) Tombstones() int {
	n := 0
	for _, e := range s.entries {
		if e.Deleted {
			n++
		}
	}
	return n
}

// Range calls fn for every entry, tombstones included, in no particular order.
func (s *Store) Range(fn func(e *wire.Entry)) {
	for _, e := range s.entries {
		fn(e)
	}
}

func versionOf(e *wire.Entry) wire.Version {
	return wire.Version{Key: e.Key, Lamport: e.Lamport, Replica: e.Replica}
}

// versionNewer reports whether the write e is newer than the acknowledged version v.
func versionNewer(e *wire.Entry, v wire.Version) bool {
	if e.Lamport != v.Lamport {
		return e.Lamport > v.Lamport
	}
	return e.Replica > v.Replica
}
