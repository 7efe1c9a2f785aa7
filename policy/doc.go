// Package policy declares how load-balancing policies plug into the gateway, and builds the
// route table the hot path reads.
//
// A Builder is one policy instance for one model. The registry's writer goroutine calls
// Builder.Build with the model's candidate workers after every registry change; Build returns an
// immutable Picker holding whatever it can precompute (rings, candidate slices, bucket bounds).
// State a policy keeps across snapshots (round-robin cursors, manual pins, radix trees) lives
// in the Builder, keyed by worker, and is reconciled in Build. Pickers read fast-changing worker
// state (in-flight counts, load reports) live from the Worker's atomics, never from a copy.
//
// The Router turns each worker.Snapshot into a Table (model → Route with its Picker) and
// publishes it through an atomic.Pointer, on the registry's writer goroutine; the hot path does
// one atomic load (Router.Current), one map lookup (Table.Lookup) and one Pick.
//
// # Hot-path rules for pickers
//
// Pick must not allocate, lock a global mutex, log above debug or do I/O. The Request's byte
// slices are views into the client's request buffer, valid only during Pick: a picker that keeps
// any of it must copy.
package policy
