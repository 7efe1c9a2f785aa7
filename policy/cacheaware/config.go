package cacheaware

import (
	"fmt"
	"math"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/radix"
)

// Defaults of the spec's flags.
const (
	DefaultCacheThreshold      = 0.3
	DefaultBalanceAbsThreshold = 64
	DefaultBalanceRelThreshold = 1.5
	DefaultEvictionInterval    = radix.DefaultEvictionInterval // 120 s
	DefaultMaxTreeSize         = radix.DefaultMaxTreeSize      // 67,108,864
	DefaultBlockSize           = 16
	DefaultCacheTTL            = 180 * time.Second
	DefaultUnreportedTTL       = 30 * time.Second
)

// The prefix indexes of --cache-index.
const (
	IndexTree = "tree" // the radix trees (default)
	IndexHash = "hash" // the TTL'd placement map at CacheBoundaries (placement.go)
)

// Config configures cache_aware.
type Config struct {
	// CacheThreshold (--cache-threshold): holders are preferred only when the match ratio is
	// above this, in [0, 1]. Default 0.3.
	CacheThreshold float64
	// BalanceAbsThreshold (--balance-abs-threshold): a holder is hot only when its in-flight
	// count exceeds the fleet mean by more than this, or by more than what the hit is worth
	// (ratio/(1-ratio) requests for a match of that share of the prompt) if that is smaller.
	// Default 64.
	BalanceAbsThreshold int
	// BalanceRelThreshold (--balance-rel-threshold): and exceeds this multiple of the fleet
	// mean; at least 1. Default 1.5.
	BalanceRelThreshold float64
	// EvictionInterval (--eviction-interval): how often trees over budget are trimmed; 0
	// disables eviction. Default 120 s.
	EvictionInterval time.Duration
	// MaxTreeSize (--max-tree-size): each tree's budget in tenant-weighted characters (text)
	// or tokens. Default 67,108,864.
	MaxTreeSize int64
	// BlockSize (--block-size): the token tree's page, in tokens; only whole pages match.
	// Default 16.
	BlockSize int
	// CacheIndex (--cache-index): IndexTree or IndexHash; empty is IndexTree. Default
	// IndexTree.
	CacheIndex string
	// CacheBoundaries (--cache-boundaries): the ascending token positions at which hash mode
	// cuts a request's head; required by IndexHash, at most 16.
	CacheBoundaries []int
	// CacheTTL (--cache-ttl-secs): how long hash mode remembers that a worker was sent a
	// head. Default 180 s.
	CacheTTL time.Duration
	// Metrics receives smg_cache_aware_policy_branch_total and the tree gauges. Nil: a
	// private set.
	Metrics *metrics.Set
	// Observer, when set, is told of every prefix recorded for a worker (the mesh). Nil:
	// nobody is told.
	Observer policy.TreeObserver
	// Events, when set, gives each model's KV-event block index: a model whose workers all
	// publish events is routed on the engines' reported caches (event mode, events.go)
	// instead of the approximate tree. Nil: tree (or hash) mode only. Event-driven state is
	// not synchronised over the mesh (spec): each gateway subscribes itself.
	Events EventSource
	// UnreportedTTL: in event mode, how long a worker counts as holding the blocks of a
	// prompt sent to it that its engine has not reported yet (queued or being prefilled);
	// 0 counts reported blocks only. Default 30 s.
	UnreportedTTL time.Duration
	// Clock gives the time New starts the coarse clock at (Maintain's now advances it after).
	// Nil: the system clock.
	Clock clock.Clock
}

// DefaultConfig returns the spec's CLI defaults.
func DefaultConfig() Config {
	return Config{
		CacheThreshold:      DefaultCacheThreshold,
		BalanceAbsThreshold: DefaultBalanceAbsThreshold,
		BalanceRelThreshold: DefaultBalanceRelThreshold,
		EvictionInterval:    DefaultEvictionInterval,
		MaxTreeSize:         DefaultMaxTreeSize,
		BlockSize:           DefaultBlockSize,
		CacheIndex:          IndexTree,
		CacheTTL:            DefaultCacheTTL,
		UnreportedTTL:       DefaultUnreportedTTL,
	}
}

// BuiltinConfig returns the policy's built-in defaults, which a worker's policy label gets
// when --policy names another policy (spec: Policy Scope; the product documents them as a
// cache threshold of 0.5, a spill gate of 32 requests and 1.1× the mean, eviction every 30
// seconds and a tree size of 10,000).
func BuiltinConfig() Config {
	return Config{
		CacheThreshold:      0.5,
		BalanceAbsThreshold: 32,
		BalanceRelThreshold: 1.1,
		EvictionInterval:    30 * time.Second,
		MaxTreeSize:         10_000,
		BlockSize:           DefaultBlockSize,
		CacheIndex:          IndexTree,
		CacheTTL:            DefaultCacheTTL,
		UnreportedTTL:       DefaultUnreportedTTL,
	}
}

// Validate reports the first setting out of range, naming its flag.
func (c Config) Validate() error {
	switch {
	case !(c.CacheThreshold >= 0 && c.CacheThreshold <= 1):
		return fmt.Errorf("--cache-threshold is %v: give a match ratio between 0 and 1 (default %v)", c.CacheThreshold, DefaultCacheThreshold)
	case c.BalanceAbsThreshold < 0:
		return fmt.Errorf("--balance-abs-threshold is %d: give a request count >= 0 (default %d)", c.BalanceAbsThreshold, DefaultBalanceAbsThreshold)
	case !(c.BalanceRelThreshold >= 1) || math.IsInf(c.BalanceRelThreshold, 1):
		return fmt.Errorf("--balance-rel-threshold is %v: give a multiple of the fleet mean >= 1 (default %v)", c.BalanceRelThreshold, DefaultBalanceRelThreshold)
	case c.EvictionInterval < 0:
		return fmt.Errorf("--eviction-interval is %v s: give a number of seconds >= 0 (default %v; 0 disables eviction)", c.EvictionInterval.Seconds(), DefaultEvictionInterval.Seconds())
	case c.MaxTreeSize < 1:
		return fmt.Errorf("--max-tree-size is %d: give a positive number of characters (default %d)", c.MaxTreeSize, DefaultMaxTreeSize)
	case c.BlockSize < 1:
		return fmt.Errorf("--block-size is %d: give the engines' KV page size in tokens, >= 1 (default %d)", c.BlockSize, DefaultBlockSize)
	case c.CacheIndex != "" && c.CacheIndex != IndexTree && c.CacheIndex != IndexHash:
		return fmt.Errorf("--cache-index is %q: give %s (the radix trees) or %s (the placement map at --cache-boundaries)", c.CacheIndex, IndexTree, IndexHash)
	case c.CacheIndex == IndexHash && len(c.CacheBoundaries) == 0:
		return fmt.Errorf("--cache-index hash needs --cache-boundaries, the token positions where heads are cut, such as 2048,8192")
	case len(c.CacheBoundaries) > maxBoundaries:
		return fmt.Errorf("--cache-boundaries has %d positions: give at most %d", len(c.CacheBoundaries), maxBoundaries)
	case c.UnreportedTTL < 0:
		return fmt.Errorf("cache_aware's unreported-block TTL is %v: give a duration >= 0 (default %v; 0 counts only the blocks engines reported)", c.UnreportedTTL, DefaultUnreportedTTL)
	case c.CacheIndex == IndexHash && c.CacheTTL <= 0:
		return fmt.Errorf("--cache-ttl-secs is %v: give a positive number of seconds (default %v)", c.CacheTTL.Seconds(), DefaultCacheTTL.Seconds())
	}
	for i, b := range c.CacheBoundaries {
		if b < 1 || i > 0 && b <= c.CacheBoundaries[i-1] {
			return fmt.Errorf("--cache-boundaries %v: give positive, strictly ascending token positions", c.CacheBoundaries)
		}
	}
	return nil
}
