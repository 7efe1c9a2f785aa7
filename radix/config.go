package radix

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of the spec product's cache-aware flags, for the policy that schedules eviction.
const (
	// DefaultMaxTreeSize is `--max-tree-size`: the tenant-weighted character budget
	// that Evict trims a tree down to.
	DefaultMaxTreeSize = 67_108_864
	// DefaultEvictionInterval is `--eviction-interval`: how often the policy calls Evict.
	DefaultEvictionInterval = 120 * time.Second
)

// Defaults of Config fields.
const (
	// DefaultShards is the number of independently locked sub-trees.
	DefaultShards = 64
	// DefaultTextShardPrefix is K for text trees: the number of leading bytes hashed
	// to pick a shard. See docs/benchmarks-radix.md for the measurement behind it.
	DefaultTextShardPrefix = 64
	// DefaultTokenShardPrefix is K for token trees, in tokens (about 64 bytes of text).
	DefaultTokenShardPrefix = 16
	// DefaultEvictSliceNodes bounds the leaf segments Evict removes per shard lock hold.
	DefaultEvictSliceNodes = 64
)

// MaxShards bounds Config.Shards; more shards than this only cost memory.
const MaxShards = 4096

// MaxMatchTenants bounds the tenants a match reports, like the spec product's
// MATCHED_TENANTS_CAP.
const MaxMatchTenants = 8

// Config configures a tree. Start from DefaultTextConfig or DefaultTokenConfig: every field
// must be set (a zero is refused by Validate, not read as "the default").
type Config struct {
	// Shards is the number of sub-trees, each behind its own lock. A text lands in
	// the shard picked by a hash of its first ShardPrefix units, so requests of
	// different conversations rarely contend. Must be a power of two in
	// [1, MaxShards]. Default DefaultShards (64).
	Shards int
	// ShardPrefix is K: how many leading units (bytes for text trees, tokens for
	// token trees) pick the shard. Texts that differ within their first K units
	// never share a prefix in the tree, so matches shorter than K units across such
	// texts are not reported; a text shorter than K units is hashed whole and
	// matches only texts that start with the same short text in full.
	// Default DefaultTextShardPrefix (64 bytes) or DefaultTokenShardPrefix (16 tokens).
	ShardPrefix int
	// EvictSliceNodes is how many leaf segments Evict removes before it releases a
	// shard's lock and takes it again, bounding how long a concurrent match waits.
	// Default DefaultEvictSliceNodes (64).
	EvictSliceNodes int
	// OnEvictLock, when set, is called by Evict right after it takes a shard lock (held
	// true) and right before it releases it (held false); scan tells a hold of the leaf
	// scan from one of the removals. It lets a caller measure the longest a concurrent
	// match could wait. It runs under the lock: keep it quick. Nil: nothing is called.
	OnEvictLock func(scan, held bool)
}

// DefaultTextConfig returns the defaults of a text tree.
func DefaultTextConfig() Config {
	return Config{Shards: DefaultShards, ShardPrefix: DefaultTextShardPrefix, EvictSliceNodes: DefaultEvictSliceNodes}
}

// DefaultTokenConfig returns the defaults of a token tree.
func DefaultTokenConfig() Config {
	return Config{Shards: DefaultShards, ShardPrefix: DefaultTokenShardPrefix, EvictSliceNodes: DefaultEvictSliceNodes}
}

// Validate reports every field that is out of range, saying how to fix it.
func (c Config) Validate() error {
	var errs []error
	if c.Shards < 1 || c.Shards > MaxShards || c.Shards&(c.Shards-1) != 0 {
		errs = append(errs, fmt.Errorf("radix: Shards is %d: set a power of two between 1 and %d (default %d)",
			c.Shards, MaxShards, DefaultShards))
	}
	if c.ShardPrefix < 1 || c.ShardPrefix > 1<<20 {
		errs = append(errs, fmt.Errorf("radix: ShardPrefix is %d: set a count of leading units between 1 and %d (defaults %d bytes of text, %d tokens)",
			c.ShardPrefix, 1<<20, DefaultTextShardPrefix, DefaultTokenShardPrefix))
	}
	if c.EvictSliceNodes < 1 {
		errs = append(errs, fmt.Errorf("radix: EvictSliceNodes is %d: set a positive count (default %d)",
			c.EvictSliceNodes, DefaultEvictSliceNodes))
	}
	return errors.Join(errs...)
}
