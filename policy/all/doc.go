// Package all is the table of policies: the one place that knows every policy, so that the
// gateway (and per-model policy labels) can name any of them. A line of the table binds a
// policy package's Descriptor (name, built-in settings, constructor) to the part of Config
// its flags fill; everything else about a policy (it reads load reports, reads the routing
// key itself, routes only some PD legs, has background work) is an ability its Builder has,
// found by type assertion (policy.LoadReader, policy.KeyReader, policy.LegRestricted,
// policy.Maintainer), so that no list of names must be kept in step with the table.
//
// It also holds every policy setting of the spec (Config, Validate; cmd/smg registers their
// flags), the rule that refuses a PD-only policy such as bucket outside PD mode (CheckPolicy,
// PDPolicies), the sticky-sessions wrapping of --routing-key-override, and the maintenance
// loop that runs the policies' background work off the hot path (Maintenance).
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
