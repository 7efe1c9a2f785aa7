// Package sticky holds sticky sessions: the pin table that maps a routing key (a rid with its
// turn and retry suffixes stripped, or a routing-key header) to a worker (PinTable), the
// Pinner that assigns unpinned keys by --assignment-mode (random, min_load, min_group,
// delegate), and the Builder that --routing-key-override wraps around any policy that
// does not read the routing key itself. manual is a Pinner over every request.
//
// # Concurrency and ownership
//
// PinTable is sharded and safe for concurrent use by pickers; eviction of idle keys runs from
// Maintain, off the hot path, one round at a time. A Builder is built and maintained
// like any policy Builder (see policy.Maintainer); its pickers are safe for concurrent use.
package sticky
