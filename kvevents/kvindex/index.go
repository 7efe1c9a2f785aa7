package kvindex

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Config bounds one Index.
type Config struct {
	// MaxBlocks bounds the (worker, block) pairs the index holds, the sum of every worker's
	// blocks. At the bound a new block evicts one of the worker holding the most. Memory
	// stays under about 64 bytes per pair (BytesPerBlock), so the default 4,194,304 pairs
	// costs at most 256 MiB per model. Default DefaultMaxBlocks.
	MaxBlocks int
}

// DefaultMaxBlocks is Config.MaxBlocks's default: 4 Mi (worker, block) pairs, e.g. 16 workers
// of 262,144 blocks each (4 Mi tokens of KV cache apiece at block size 16).
const DefaultMaxBlocks = 1 << 22

// BytesPerBlock is the most memory one (worker, block) pair costs: a reverse slot of 16 bytes
// and at most one forward slot of 16 bytes, each at a load of at least 53%.
const BytesPerBlock = 64

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{MaxBlocks: DefaultMaxBlocks} }

// Validate reports a bound that cannot work.
func (c Config) Validate() error {
	if c.MaxBlocks < 1 {
		return fmt.Errorf("kv index max blocks %d: use at least 1 (default %d)", c.MaxBlocks, DefaultMaxBlocks)
	}
	return nil
}

// Holder is a worker's place in an index (a dense slot, reused after the worker is removed).
type Holder int32

// pageSalt separates the forward keys of holder pages: page p of a prefix hash is the key
// prefix + p×pageSalt, so page 0 is the prefix hash itself.
const pageSalt = 0x94d049bb133111eb

// Stats are the index's counters since it was created.
type Stats struct {
	Blocks  int    // (worker, block) pairs held now
	Bytes   int    // memory of the tables
	Applied uint64 // events applied
	// Ignored events: a block size other than the index's, a later KV-cache group of a
	// hybrid model, tokens that do not fill the blocks, a parent the worker does not hold.
	Ignored uint64
	Evicted uint64 // pairs evicted at MaxBlocks
}

// ErrBlockSize: a stored event's block size differs from the one the index learned first.
var ErrBlockSize = errors.New("block size differs from the model's")

// Index maps the KV-cache blocks of one model to the workers holding them.
//
// A block is named twice: by the engine's hash (opaque, used to find it again when the engine
// removes it or names it as a parent) and by the prefix hash the gateway can compute from a
// request's tokens (PrefixHashes). The forward table maps prefix hash → a 64-bit mask of
// holders per page of 64 holders; each holder's reverse table maps engine hash → prefix hash.
//
// Concurrency: any number of goroutines may call Match, Holder and Stats; writes (Apply*,
// Clear, Remove) take a write lock, one batch at a time, so readers wait at most one batch.
// Apply from one goroutine per worker or share one; the order of a worker's events is its
// caller's to keep.
type Index struct {
	cfg Config

	mu        sync.RWMutex
	blockSize int // learned from the first stored event; 0 until then
	fwd       table
	holders   []*holder // by slot; nil when free
	names     map[string]Holder
	blocks    int
	pages     int      // ceil(highest used slot+1 / 64)
	present   []uint64 // per page: the slots in use

	applied, ignored, evicted atomic.Uint64
}

type holder struct {
	name   string
	rev    table
	cursor int // eviction clock hand into rev.slots
}

// New returns an empty index; cfg must be valid.
func New(cfg Config) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Index{cfg: cfg, names: map[string]Holder{}}, nil
}

// BlockSize returns the tokens per block learned from the engines' events, 0 before any.
func (x *Index) BlockSize() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.blockSize
}

// Holder returns name's slot, adding the worker when it is new.
func (x *Index) Holder(name string) Holder {
	x.mu.RLock()
	h, ok := x.names[name]
	x.mu.RUnlock()
	if ok {
		return h
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if h, ok := x.names[name]; ok {
		return h
	}
	slot := len(x.holders)
	for i, hd := range x.holders {
		if hd == nil {
			slot = i
			break
		}
	}
	if slot == len(x.holders) {
		x.holders = append(x.holders, nil)
	}
	x.holders[slot] = &holder{name: name}
	for slot/64 >= len(x.present) {
		x.present = append(x.present, 0)
	}
	x.present[slot/64] |= 1 << (slot % 64)
	x.pages = len(x.present)
	x.names[name] = Holder(slot)
	return Holder(slot)
}

// Lookup returns name's slot without adding it.
func (x *Index) Lookup(name string) (Holder, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	h, ok := x.names[name]
	return h, ok
}

// Slot is Lookup as an int, the form cache_aware's event mode reads (its EventIndex).
func (x *Index) Slot(name string) (int, bool) {
	h, ok := x.Lookup(name)
	return int(h), ok
}

// Slots returns one past the highest slot in use: the length Match needs for its scores.
func (x *Index) Slots() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.holders)
}

func fwdKey(prefix uint64, page int) uint64 { return norm(prefix + uint64(page)*pageSalt) }

// StoredBlocks is one stored event as the index needs it: the engine hashes of the new blocks
// in chain order, the parent they extend (when HasParent), their tokens (blockSize per block).
type StoredBlocks struct {
	EngineHashes []uint64
	ParentHash   uint64
	HasParent    bool
	Tokens       []uint32
	BlockSize    int
}

// ApplyStored records that h holds the blocks. It reports false (and counts the event as
// ignored) when the event cannot be placed: tokens that do not fill the blocks, another block
// size than the model's, or a parent h does not hold (its chain is unknown).
func (x *Index) ApplyStored(h Holder, ev StoredBlocks) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.applyStoredLocked(h, ev)
}

func (x *Index) applyStoredLocked(h Holder, ev StoredBlocks) bool {
	hd := x.holderAt(h)
	bs := ev.BlockSize
	if hd == nil || bs <= 0 || len(ev.Tokens) != bs*len(ev.EngineHashes) {
		x.ignored.Add(1)
		return false
	}
	if x.blockSize == 0 {
		x.blockSize = bs
	} else if bs != x.blockSize {
		x.ignored.Add(1)
		return false
	}
	var prev uint64
	first := !ev.HasParent
	if ev.HasParent {
		p, ok := hd.rev.get(norm(ev.ParentHash))
		if !ok {
			x.ignored.Add(1)
			return false
		}
		prev = p
	}
	page, bit := int(h)/64, uint64(1)<<(int(h)%64)
	for i, eh := range ev.EngineHashes {
		c := ContentHash(ev.Tokens[i*bs : (i+1)*bs])
		if first {
			prev, first = c, false
		} else {
			prev = PrefixHash(prev, c)
		}
		k := norm(eh)
		if old, ok := hd.rev.get(k); ok {
			if old == prev {
				continue // stored again (another medium): already held
			}
			x.unmark(old, page, bit) // the engine reused its name for other tokens
			hd.rev.del(k)
			x.blocks--
		}
		if x.blocks >= x.cfg.MaxBlocks {
			x.evictOne()
		}
		s, _ := hd.rev.slotFor(k)
		s.v = prev
		x.blocks++
		f, _ := x.fwd.slotFor(fwdKey(prev, page))
		f.v |= bit
	}
	x.applied.Add(1)
	return true
}

func (x *Index) holderAt(h Holder) *holder {
	if h < 0 || int(h) >= len(x.holders) {
		return nil
	}
	return x.holders[h]
}

// unmark clears bit from the forward entry of prefix on page, dropping the entry when no
// holder is left.
func (x *Index) unmark(prefix uint64, page int, bit uint64) {
	i := x.fwd.find(fwdKey(prefix, page))
	if i < 0 {
		return
	}
	if x.fwd.slots[i].v &^= bit; x.fwd.slots[i].v == 0 {
		x.fwd.deleteAt(i)
	}
}

// evictOne removes one block of the holder with the most, at its clock hand: a bound on
// memory, not a cache policy (the engines evict on their own and say so).
func (x *Index) evictOne() {
	var victim *holder
	slot := 0
	for i, hd := range x.holders {
		if hd != nil && (victim == nil || hd.rev.n > victim.rev.n) {
			victim, slot = hd, i
		}
	}
	if victim == nil || victim.rev.n == 0 {
		return
	}
	n := len(victim.rev.slots)
	for range n {
		if victim.cursor >= n {
			victim.cursor = 0
		}
		s := victim.rev.slots[victim.cursor]
		if s.k != 0 {
			x.unmark(s.v, slot/64, 1<<(slot%64))
			victim.rev.deleteAt(victim.cursor)
			x.blocks--
			x.evicted.Add(1)
			return
		}
		victim.cursor++
	}
}

// ApplyRemoved records that h no longer holds the blocks; unknown hashes are skipped.
func (x *Index) ApplyRemoved(h Holder, engineHashes []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.applyRemovedLocked(h, engineHashes)
}

func (x *Index) applyRemovedLocked(h Holder, engineHashes []uint64) {
	hd := x.holderAt(h)
	if hd == nil {
		x.ignored.Add(1)
		return
	}
	page, bit := int(h)/64, uint64(1)<<(int(h)%64)
	for _, eh := range engineHashes {
		if p, ok := hd.rev.del(norm(eh)); ok {
			x.unmark(p, page, bit)
			x.blocks--
		}
	}
	x.applied.Add(1)
}

// Clear drops every block h holds (the engine cleared its cache, restarted, or its event
// stream cannot be resumed); h keeps its slot.
func (x *Index) Clear(h Holder) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clearLocked(h)
}

func (x *Index) clearLocked(h Holder) {
	hd := x.holderAt(h)
	if hd == nil {
		return
	}
	page, bit := int(h)/64, uint64(1)<<(int(h)%64)
	for _, s := range hd.rev.slots {
		if s.k != 0 {
			x.unmark(s.v, page, bit)
		}
	}
	x.blocks -= hd.rev.n
	hd.rev.reset()
	hd.cursor = 0
	if x.blocks == 0 {
		x.fwd.reset() // give the memory back once the model holds nothing
	}
}

// Remove drops the worker name and its blocks; its slot is reused by the next new worker.
func (x *Index) Remove(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	h, ok := x.names[name]
	if !ok {
		return
	}
	x.clearLocked(h)
	delete(x.names, name)
	x.holders[h] = nil
	x.present[h/64] &^= 1 << (h % 64)
}

// Blocks returns how many blocks h holds.
func (x *Index) Blocks(h Holder) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if hd := x.holderAt(h); hd != nil {
		return hd.rev.n
	}
	return 0
}

// Stats returns the index's counters and size.
func (x *Index) Stats() Stats {
	x.mu.RLock()
	st := Stats{Blocks: x.blocks, Bytes: x.fwd.bytes()}
	for _, hd := range x.holders {
		if hd != nil {
			st.Bytes += hd.rev.bytes()
		}
	}
	x.mu.RUnlock()
	st.Applied, st.Ignored, st.Evicted = x.applied.Load(), x.ignored.Load(), x.evicted.Load()
	return st
}

// Match scores a request: for every holder slot s, depth[s] is set to the number of leading
// full blocks of tokens that s holds in a row (0 when it holds not even the first). depth
// should have Slots() entries; holders past len(depth) (added since) are skipped, slots not in
// use are left alone. It returns the longest depth. Match allocates nothing and hashes a block
// only while some holder still matches, so a miss costs one block's hashes.
func (x *Index) Match(tokens []uint32, depth []uint32) uint32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.match(tokens, nil, depth)
}

// PrefixHashes appends to dst the prefix hash of every full block of tokens at the block size
// the index learned (none before it learned one).
func (x *Index) PrefixHashes(dst []uint64, tokens []uint32) []uint64 {
	return PrefixHashes(dst, tokens, x.BlockSize())
}

// MatchHashes is Match on a request's prefix hashes (PrefixHashes), for a caller that needs
// them too.
func (x *Index) MatchHashes(hashes []uint64, depth []uint32) uint32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.match(nil, hashes, depth)
}

// match scores the blocks of hashes, or of tokens when hashes is nil.
func (x *Index) match(tokens []uint32, hashes []uint64, depth []uint32) uint32 {
	bs := x.blockSize
	blocks := len(hashes)
	if hashes == nil && bs > 0 {
		blocks = len(tokens) / bs
	}
	var best uint32
	for page := 0; page < x.pages && page*64 < len(depth); page++ {
		// Holders added since the caller sized depth (Slots) are left out, not written past it.
		active := x.present[page]
		if n := len(depth) - page*64; n < 64 {
			active &= 1<<n - 1
		}
		for a := active; a != 0; a &= a - 1 {
			depth[page*64+bits.TrailingZeros64(a)] = 0
		}
		if bs == 0 || active == 0 {
			continue
		}
		var prev uint64
		var i uint32
		for blk := 0; blk < blocks && active != 0; blk++ {
			switch {
			case hashes != nil:
				prev = hashes[blk]
			case blk == 0:
				prev = ContentHash(tokens[:bs])
			default:
				prev = PrefixHash(prev, ContentHash(tokens[blk*bs:(blk+1)*bs]))
			}
			m, _ := x.fwd.get(fwdKey(prev, page))
			for gone := active &^ m; gone != 0; gone &= gone - 1 {
				depth[page*64+bits.TrailingZeros64(gone)] = i
			}
			if active &= m; active != 0 {
				i++
			}
		}
		if active != 0 {
			for a := active; a != 0; a &= a - 1 {
				depth[page*64+bits.TrailingZeros64(a)] = i
			}
		}
		if i > best {
			best = i
		}
	}
	return best
}

// Tx applies several events under one write lock (Update).
type Tx struct{ x *Index }

// Update runs fn with the write lock held: a consumer applies a whole batch at once, so a
// reader never sees half of it and the lock is taken once per batch, not per event. fn must
// not call the Index's own methods.
func (x *Index) Update(fn func(tx Tx)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	fn(Tx{x})
}

// Stored is ApplyStored inside Update.
func (tx Tx) Stored(h Holder, ev StoredBlocks) bool { return tx.x.applyStoredLocked(h, ev) }

// Removed is ApplyRemoved inside Update.
func (tx Tx) Removed(h Holder, engineHashes []uint64) { tx.x.applyRemovedLocked(h, engineHashes) }

// Clear is Index.Clear inside Update.
func (tx Tx) Clear(h Holder) { tx.x.clearLocked(h); tx.x.applied.Add(1) }

// Ignore counts an event the caller could not apply (a LoRA, a medium it does not index).
func (tx Tx) Ignore() { tx.x.ignored.Add(1) }
