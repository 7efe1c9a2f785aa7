// Package radix holds the prefix trees of the cache-aware policy: one tree per model
// holds the routing text of every request routed for it, and every node records
// which tenants (workers, numbered densely by the caller) hold that prefix and when
// each last used it. It is a pure library: no I/O, no clock (callers pass now), no
// goroutines.
//
// # Operations
//
// MatchAndInsert is the request hot path: one descent finds the longest stored
// prefix of the text, hands the match (matched and input length, up to
// MaxMatchTenants holders, most recent first) to a Chooser (a LiveChooser is offered
// the longest prefix that a tenant it deems live holds), then inserts the rest of the
// text for the chosen tenant and stamps the whole path. Match and Insert do half
// of that each. RemoveTenant purges a worker that left. Evict trims the tree to a
// budget of tenant-weighted characters (each character counted once per tenant that
// holds it, like the spec product's tree-wide total), dropping least-recently-used
// leaf segments across tenants. ReadPage walks the tree in bounded pages with a
// resumable Cursor, for shipping it to a mesh peer.
//
// TextTree counts Unicode code points: a match never ends inside a UTF-8 sequence,
// and each byte of invalid UTF-8 counts as one character (Go's decoding rule).
// TokenTree counts uint32 tokens. Both are one implementation over bytes: a token
// is stored as its 4 native-endian bytes.
//
// # Memory layout
//
// Nothing in a tree holds a pointer per node, so the GC's work does not grow with
// the tree:
//
//   - node records are 72-byte structs in one slice per shard, linked by uint32
//     indexes (parent, first child, siblings) with a free list of records;
//   - edge bytes live in a byte arena of 1 MiB chunks addressed by uint32; a split
//     re-slices the edge in place; released ranges coalesce with free neighbours
//     (a free-byte bitmap and length tags kept inside the free bytes) and go to
//     free lists binned by size, so eviction does not fragment the arena;
//   - a node keeps up to two tenants inline with their stamps and the number of
//     children holding each (most nodes are leaves held by the one tenant a request
//     was routed to); larger sets, sorted by tenant for binary search, live in a
//     side arena of power-of-two blocks. The child counts make "is this node a
//     leaf of tenant t" O(1), which eviction asks for every segment it drops;
//   - children are found through one open-addressing table per shard keyed by
//     (parent index, first character), so a chat-template node with thousands of
//     children costs one probe, not a scan.
//
// A stored character costs its UTF-8 bytes plus its share of the node and table
// entries; docs/benchmarks-radix.md has the measured bytes per character.
//
// # Concurrency
//
// A tree is split into Config.Shards sub-trees, each behind its own RWMutex; a
// text's shard is picked by a hash of its first Config.ShardPrefix units, so
// requests from different conversations rarely contend. The price is that texts
// whose first K units differ never share a node: a common prefix shorter than K
// units across shards is not reported (K defaults to 64 bytes, about 16 tokens of
// KV cache). MatchAndInsert and Insert take the shard's write lock, Match its read
// lock. The Chooser runs under the write lock: it must be quick and must not call
// the same tree. Evict, RemoveTenant, ReadPage and Stats lock one shard at a time,
// and Evict and ReadPage release the lock after a bounded slice of work, so a
// concurrent match waits at most one slice. Size reads atomics and never blocks.
//
// # Buffer ownership
//
// Texts and token slices passed in are only read during the call; the tree copies
// what it stores. Match appends tenants to the caller's buffer. The Tenants slice a
// Chooser receives, and the views a Page returns, belong to the tree (or the Page)
// and are valid only during the call (or until the Page is reused).
package radix
