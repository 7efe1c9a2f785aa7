// Package ring is the consistent-hash ring that consistent_hashing and prefix_hash route on
// (spec: Consistent Hashing, 150 virtual nodes per worker): built off the hot path by a
// Builder that keeps the previous ring's sorted points, looked up in O(1) expected time
// through a jump table, and checked against a binary-search reference (ring_test.go).
//
// # Concurrency and ownership
//
// A Ring is immutable once built and safe for concurrent Lookup; its worker slice belongs to
// the ring. A Builder is not safe for concurrent use: one policy instance owns it and calls it
// from its own Build, on the registry's writer goroutine.
package ring
