// Package manual implements the manual policy (spec: Manual): each routing key is pinned to a
// worker in an explicit key-to-worker map. Unlike consistent hashing, adding workers never moves
// a pinned key; a key moves only when its worker becomes unavailable (it then fails over to a
// second worker, and returns once the first recovers) or when it goes unused for
// --max-idle-secs. Keys come from the X-SMG-Routing-Key header (or the names of
// --routing-key-headers), or from the body's rid when --routing-key-override is on; requests
// without a key are spread by --assignment-mode and never pinned.
//
// # Concurrency
//
// The pins live in a sticky.PinTable owned by the Builder and shared by all its Pickers: 64
// independently locked shards keyed by the key's hash. Idle eviction runs in Maintain, off the
// hot path, driven by policy/all's maintenance loop.
//
// # Ownership
//
// A Pick hashes the key bytes and keeps none of them. A hit allocates nothing; pinning a new
// key allocates only when its shard's map grows.
package manual
