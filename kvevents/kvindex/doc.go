// Package kvindex is the block index of one model: which workers hold which KV-cache blocks,
// as the engines report them in their KV events, so that cache_aware can send a request to
// the worker that really holds its prefix.
//
// # Names of a block
//
// An engine names a block by its own hash (vLLM: sha256 or a 64-bit integer; SGLang: a 64-bit
// integer), which the gateway cannot recompute from a request. The index therefore also names
// every block by the spec product's rolling prefix hash: ContentHash of the block's tokens
// (XXH3-64, seed 1337, token ids as 4-byte little-endian integers) chained with PrefixHash
// over the blocks before it. PrefixHashes computes the same names from a request's tokens.
//
// # Layout and memory
//
// A forward table maps prefix hash → a 64-bit mask of the workers (holders) that hold it, one
// entry per page of 64 holders; a reverse table per holder maps engine hash → prefix hash, for
// removals and for the parents that stored events name. Both are open-addressing tables of
// 16-byte slots kept between 53% and 80% full, so a (worker, block) pair costs at most
// BytesPerBlock (64) bytes and the collector scans no pointers. Config.MaxBlocks bounds the
// pairs; past it the holder with the most blocks loses one (a clock hand over its table).
// Removing a worker (Remove) drops its blocks; its slot is reused.
//
// # Matching
//
// Match walks a request's blocks from the first, hashing each and probing the forward table
// once per page, intersecting the holders that still match: depth[s] is how many leading
// blocks holder s holds in a row. It allocates nothing and stops hashing as soon as no holder
// matches. A block removed from the middle of a chain ends that holder's match there.
//
// Known approximations: blocks with the same tokens stored under two engine hashes (two
// LoRAs, two mediums) share one mark per holder, and the first removal clears it; LoRA and
// the medium are the caller's to filter.
//
// # Concurrency
//
// One RWMutex per index: Match and the getters take the read lock; writers apply a batch of
// events under the write lock (Update), so a pick waits at most for one batch.
package kvindex
