package mesh

import (
	"bytes"

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

// Store is a last-writer-wins map: the replicated worker state. It is not safe for concurrent
// use; the Node guards it with its lock.
type Store struct {
	entries map[string]*wire.Entry
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{entries: map[string]*wire.Entry{}} }

// Merge folds e into the store and reports whether it changed the store. The store keeps its
// own copy.
func (s *Store) Merge(e wire.Entry) bool {
	cur := s.entries[e.Key]
	if cur != nil && !newer(&e, cur) {
		return false
	}
	e.Value = append([]byte(nil), e.Value...)
	s.entries[e.Key] = &e
	return true
}

// Get returns the entry of key, or nil. The entry belongs to the store: do not modify it.
func (s *Store) Get(key string) *wire.Entry { return s.entries[key] }

// Len is the number of keys, tombstones included.
func (s *Store) Len() int { return len(s.entries) }

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
