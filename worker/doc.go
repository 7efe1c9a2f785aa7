// Package worker holds what the gateway knows about its engine workers: the Spec a user or
// discovery registers, the live Worker (identity, status, in-flight count and its pooled
// fasthttp.HostClient) and the Registry that owns them.
//
// # Concurrency model
//
// The Registry has exactly one writer: a goroutine that drains a bounded event queue (add,
// remove, status change, settings update) and, after every change, publishes a new immutable
// Snapshot through an atomic.Pointer. Readers on the request hot path call Registry.Current (one atomic load) and never
// lock. Subscribers registered with Config.OnPublish run on the writer goroutine after each
// publication, so derived state (the policy route table) is rebuilt by the same single writer and
// never races with itself.
//
// Fast-changing state is not copied into snapshots: a Worker's in-flight count and status are
// atomics read live, and so are the request path's measurements (the requests awaiting a
// first token, the first-byte waits, the decode-step estimate of speed.go). A Snapshot only changes when membership or status changes.
//
// # Layout
//
// A Worker is one 64-byte cache line holding what load-aware policies read of every candidate
// (in-flight count, load report pointer, since-report and awaiting token counts, and one word
// packing the status with the overload, stall and breaker vetoes), plus a pointer to the rest.
// The registry allocates Workers side by side, so an O(n) pick over a fleet reads consecutive
// lines (hot.go).
//
// # Ownership
//
// A *Worker is shared by every snapshot that lists it and by requests still in flight after it
// was removed; its fields other than the atomics are immutable after construction. What the
// worker API may change (PATCH and PUT /workers/{id}: priority, cost, labels, API key, health
// overrides) lives in one immutable settings value behind an atomic pointer, replaced whole
// by the writer (Registry.Update) and published with the next snapshot; the URL, type, models
// and PD metadata never change while the worker is registered. Removing a
// worker closes nothing a request in flight still uses: its HostClient keeps serving the
// requests already dispatched and idle connections are closed once those finish.
package worker
