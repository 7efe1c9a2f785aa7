// Package all is the table from policy names to their builders: the one place that knows
// every policy, so that the gateway (and per-model policy labels) can name any of them.
//
// It also holds every policy setting of the spec (Config, Validate; cmd/smg registers their
// flags), the rule that
// refuses bucket outside PD mode (CheckPolicy), the sticky-sessions wrapping of
// --routing-key-override, and the maintenance loop that runs the policies' background work
// off the hot path (Maintenance).
//
// # Concurrency
//
// NewBuilderFunc's function is called by the Router on the registry's writer goroutine.
// Maintenance is safe for concurrent use; its rounds run one at a time, concurrently with
// picks, and hold instances only through weak pointers.
//
// # Ownership
//
// Config is copied by NewBuilderFunc; its slices (boundaries, header names) must not be
// modified afterwards.
package all
