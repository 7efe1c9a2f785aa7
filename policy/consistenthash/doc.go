// Package consistenthash implements the consistent_hashing policy (spec: Consistent Hashing):
// each request's routing key is hashed onto a ring with 150 virtual nodes per worker, so a key
// keeps its worker while the fleet changes around it, and adding or removing one of N workers
// moves only about 1/N of the keys.
//
// Priority, as the spec orders it: X-SMG-Target-Worker (0-based index into the model's
// currently available workers; past the end or not a number fails with 503, no fallback), then
// the body's rid when --routing-key-override is on, then the routing-key header, then the
// implicit keys Authorization, X-Forwarded-For and Cookie, and finally a random available
// worker. A key whose ring worker is unavailable walks clockwise to the next available one.
//
// Each model's route has its own ring, and the route that serves requests naming no model has
// a ring over every worker: the Router builds one Picker per route, so each gets its ring.
//
// # Concurrency
//
// Rings are built in Build, on the registry's writer goroutine, and are immutable; the Builder's
// ring.Builder (which makes rebuilds incremental) is touched only there. Picks only read.
//
// # Ownership
//
// A Picker keeps its ring and the Group's worker slice; Pick allocates nothing and keeps no
// reference to the request's bytes.
package consistenthash
