package tokenizer

import (
	"hash/maphash"
	"sync"
)

// wordCache maps a pre-tokenized piece to its ids. It is direct-mapped:
// fixed memory, a colliding insert evicts, and neither hit nor insert
// allocates. Pieces longer than cacheKeyMax or with more than cacheIDsMax
// ids are not cached (they are rare and cost the same either way).
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

const (
	cacheShards     = 64
	cacheShardSlots = 1024
	cacheKeyMax     = 32
	cacheIDsMax     = 8
)

type cacheShard struct {
	mu sync.Mutex
	e  [cacheShardSlots]cacheEntry
}

type cacheEntry struct {
	hash uint64 // 0: empty
	klen uint8
	n    uint8
	key  [cacheKeyMax]byte
	ids  [cacheIDsMax]uint32
}

func newWordCache() *wordCache { return &wordCache{seed: maphash.MakeSeed()} }

func (c *wordCache) hash(s string) uint64 { return maphash.String(c.seed, s) | 1 }

func (c *wordCache) get(h uint64, s string, dst []uint32) ([]uint32, bool) {
	if len(s) > cacheKeyMax {
		return dst, false
	}
	sh := &c.shards[h>>58]
	sh.mu.Lock()
	e := &sh.e[h&(cacheShardSlots-1)]
	if e.hash == h && int(e.klen) == len(s) && string(e.key[:e.klen]) == s {
		dst = append(dst, e.ids[:e.n]...)
		sh.mu.Unlock()
		return dst, true
	}
	sh.mu.Unlock()
	return dst, false
}

func (c *wordCache) put(h uint64, s string, ids []uint32) {
	if len(s) > cacheKeyMax || len(ids) > cacheIDsMax {
		return
	}
	sh := &c.shards[h>>58]
	sh.mu.Lock()
	e := &sh.e[h&(cacheShardSlots-1)]
	e.hash = h
	e.klen = uint8(copy(e.key[:], s))
	e.n = uint8(copy(e.ids[:], ids))
	sh.mu.Unlock()
}

// reset empties the cache (benchmarks of the miss path).
func (c *wordCache) reset() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		clear(sh.e[:])
		sh.mu.Unlock()
	}
}
