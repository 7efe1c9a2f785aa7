package mockworker

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// kvCache is a paged KV cache with prefix caching, the model of vLLM's and SGLang's: the
// capacity is split into blocks (pages) of blockSize tokens; a full block of prompt tokens is
// named by a hash chained over every token before it, so two prompts share a block exactly
// when they share the whole prefix up to its end. Blocks are in one of four states:
//
//	free         counted in free
//	private      held by one running sequence, not (yet) named: partial prompt block, output
//	shared       named and referenced by running sequences (refs > 0)
//	cached       named, unreferenced, in the LRU list: reusable by a later prompt, evictable
//
// Eviction takes the least recently released cached block. Not safe for concurrent use.
type kvCache struct {
	blockSize int
	total     int // blocks
	free      int
	blocks    map[uint64]*kvBlock
	lru       kvBlock // sentinel of the circular list of cached blocks, oldest first
	evictable int     // blocks in lru
	evictions uint64
	// record makes the cache keep its changes in events for the worker's KV-event publisher
	// (Config.KVEvents); the engine's driver takes them after every step.
	record bool
	events []kvEvent
}

type kvBlock struct {
	hash       uint64
	refs       int
	prev, next *kvBlock // lru links while refs == 0
}

func newKVCache(tokens, blockSize int) *kvCache {
	c := &kvCache{blockSize: blockSize, total: tokens / blockSize, blocks: map[uint64]*kvBlock{}}
	c.free = c.total
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// used is the number of blocks held by running sequences (private and shared).
func (c *kvCache) used() int { return c.total - c.free - c.evictable }

// match returns how many leading blocks of hashes are cached or shared, and how many of those
// are unreferenced (they stop being evictable once acquired).
func (c *kvCache) match(hashes []uint64) (matched, unreferenced int) {
	for _, h := range hashes {
		b, ok := c.blocks[h]
		if !ok {
			break
		}
		matched++
		if b.refs == 0 {
			unreferenced++
		}
	}
	return matched, unreferenced
}

// canReserve reports whether n more private blocks fit once `pinned` cached blocks are acquired.
func (c *kvCache) canReserve(n, pinned int) bool { return n <= c.free+c.evictable-pinned }

// acquire references the first n blocks of hashes, which match reported as present.
func (c *kvCache) acquire(hashes []uint64) {
	for _, h := range hashes {
		b := c.blocks[h]
		if b.refs == 0 {
			c.unlink(b)
		}
		b.refs++
	}
}

// reserve takes n private blocks, evicting cached blocks as needed; canReserve must hold.
func (c *kvCache) reserve(n int) {
	for c.free < n {
		c.evictOldest()
	}
	c.free -= n
}

// register names a private block that has just been filled with the prompt tokens hashing to
// h. If an identical block exists (a concurrent prompt computed it too) the sequence shares it
// and its private block returns to the free pool. It reports whether the block is new.
func (c *kvCache) register(h uint64) bool {
	if b, ok := c.blocks[h]; ok {
		if b.refs == 0 {
			c.unlink(b)
		}
		b.refs++
		c.free++
		return false
	}
	c.blocks[h] = &kvBlock{hash: h, refs: 1}
	return true
}

// release drops a sequence's references to hashes (most recent last) and returns its private
// blocks. Blocks no longer referenced become cached, most recently used last; the blocks of
// one prompt are released deepest first so that eviction takes a chain from its tail.
func (c *kvCache) release(hashes []uint64, private int) {
	for i := len(hashes) - 1; i >= 0; i-- {
		b := c.blocks[hashes[i]]
		b.refs--
		if b.refs == 0 {
			c.pushNewest(b)
		}
	}
	c.free += private
}

func (c *kvCache) evictOldest() {
	b := c.lru.next
	c.unlink(b)
	delete(c.blocks, b.hash)
	c.free++
	c.evictions++
	if c.record {
		c.events = append(c.events, kvEvent{kind: kvRemoved, hash: b.hash})
	}
}

// clearCached evicts every cached block (flush_cache) and records one AllBlocksCleared, as
// the engines report a flush. Referenced blocks stay (flush_cache ensures there are none).
func (c *kvCache) clearCached() {
	record := c.record
	c.record = false
	for c.evictable > 0 {
		c.evictOldest()
	}
	c.record = record
	if record {
		c.events = append(c.events, kvEvent{kind: kvCleared})
	}
}

func (c *kvCache) unlink(b *kvBlock) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
	c.evictable--
}

func (c *kvCache) pushNewest(b *kvBlock) {
	b.prev, b.next = c.lru.prev, &c.lru
	c.lru.prev.next = b
	c.lru.prev = b
	c.evictable++
}

// promptBlockTokens returns the token ids of the prompt's full blocks, the tokens
// promptBlockHashes hashes: each bytesPerToken-byte piece of text as a little-endian integer
// (the last one zero-padded), then the ids. The events name a block's tokens with them.
func promptBlockTokens(text []byte, ids []uint32, blockSize int) []uint32 {
	n := (len(text)+bytesPerToken-1)/bytesPerToken + len(ids)
	n -= n % blockSize
	out := make([]uint32, 0, n)
	for i := 0; i < len(text) && len(out) < n; i += bytesPerToken {
		var piece [bytesPerToken]byte
		copy(piece[:], text[i:])
		out = append(out, binary.LittleEndian.Uint32(piece[:]))
	}
	for _, id := range ids {
		if len(out) == n {
			break
		}
		out = append(out, id)
	}
	return out
}

// promptBlockHashes returns the chained hashes of the full blocks of a prompt. The prompt's
// tokens are its text cut into bytesPerToken-byte pieces (the last one zero-padded) followed
// by its token ids, each id as 4 little-endian bytes; so a block is blockSize×4 bytes and
// hash(i) = xxh3(block i bytes, seed = hash(i-1)).
func promptBlockHashes(dst []uint64, text []byte, ids []uint32, blockSize int) []uint64 {
	blockBytes := blockSize * bytesPerToken
	var h uint64
	// Whole blocks of text hash straight from the request bytes.
	for len(text) >= blockBytes {
		h = xxh3.HashSeed(text[:blockBytes], h)
		dst = append(dst, h)
		text = text[blockBytes:]
	}
	if len(ids) == 0 {
		return dst
	}
	// The text tail, padded to whole tokens, and the ids share the next blocks.
	buf := make([]byte, 0, blockBytes)
	buf = append(buf, text...)
	for len(buf)%bytesPerToken != 0 {
		buf = append(buf, 0)
	}
	for _, id := range ids {
		buf = binary.LittleEndian.AppendUint32(buf, id)
		if len(buf) == blockBytes {
			h = xxh3.HashSeed(buf, h)
			dst = append(dst, h)
			buf = buf[:0]
		}
	}
	return dst
}
