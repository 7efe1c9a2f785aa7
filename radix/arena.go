package radix

import "math/bits"

// Edge bytes live in fixed-size chunks addressed by a uint32: chunk index in the high
// bits, offset in the low chunkShift bits. An edge never spans two chunks, so an edge
// is one contiguous slice and no edge is longer than chunkSize.
const (
	chunkShift = 20
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
	// maxChunks keeps addresses inside uint32: 4 GiB of edge bytes per shard.
	maxChunks = 1 << (32 - chunkShift)
	// firstChunkBytes is the size a chunk starts at; it doubles up to chunkSize, so
	// a small tree does not pay a mebibyte per shard.
	firstChunkBytes = 4 << 10
	// minFreeSpan is the smallest freed range worth remembering; shorter ones are
	// counted as waste until the shard is compacted.
	minFreeSpan = 8
)

// span is a range of arena bytes.
type span struct{ off, n uint32 }

// byteArena is an append-only store of edge bytes with a free list. It holds no
// pointer per edge: the GC sees one slice header per chunk.
type byteArena struct {
	chunks [][]byte
	top    uint32 // next unused address in the last chunk's address range
	// free holds released spans binned by floor(log2(n)); freeMask has bit b set
	// when bin b is not empty, so a fitting bin is found with one TrailingZeros.
	free     [33][]span
	freeMask uint64
	// freeBytes counts bytes in free; wasteBytes counts released bytes too short to
	// keep and chunk tails skipped when a new chunk started.
	freeBytes  int64
	wasteBytes int64
}

// view returns the n bytes at off. The slice is capped so an append cannot write
// into a neighbouring edge.
func (a *byteArena) view(off, n uint32) []byte {
	c := a.chunks[off>>chunkShift]
	i := off & chunkMask
	return c[i : i+n : i+n]
}

// alloc reserves n bytes (0 < n <= chunkSize) and returns their address.
func (a *byteArena) alloc(n uint32) uint32 {
	if a.freeMask != 0 {
		// Any span in bin b >= ceil(log2(n)) holds at least n bytes.
		need := uint(bits.Len32(n - 1))
		if m := a.freeMask >> need; m != 0 {
			return a.allocFree(need+uint(bits.TrailingZeros64(m)), n)
		}
	}
	return a.allocTop(n)
}

func (a *byteArena) allocFree(bin uint, n uint32) uint32 {
	list := a.free[bin]
	s := list[len(list)-1]
	a.free[bin] = list[:len(list)-1]
	if len(list) == 1 {
		a.freeMask &^= 1 << bin
	}
	a.freeBytes -= int64(s.n)
	if rest := s.n - n; rest > 0 {
		a.release(s.off+n, rest)
	}
	return s.off
}

func (a *byteArena) allocTop(n uint32) uint32 {
	last := len(a.chunks) - 1
	if last >= 0 {
		inChunk := a.top & chunkMask
		if a.top>>chunkShift == uint32(last) && inChunk+n <= chunkSize {
			if end := inChunk + n; end > uint32(len(a.chunks[last])) {
				a.growLast(end)
			}
			off := a.top
			a.top += n
			return off
		}
		// The request does not fit in the last chunk's address range: keep what is
		// left of the allocated chunk for later, smaller edges.
		if inChunk < uint32(len(a.chunks[last])) && a.top>>chunkShift == uint32(last) {
			a.release(a.top, uint32(len(a.chunks[last]))-inChunk)
		}
	}
	if len(a.chunks) == maxChunks {
		panic("radix: a shard holds more than 4 GiB of edge bytes; use more shards")
	}
	size := max(uint32(firstChunkBytes), n)
	if last >= 0 {
		// The previous chunk filled up, so this shard is big: start at full size.
		size = chunkSize
	}
	a.chunks = append(a.chunks, make([]byte, size))
	off := uint32(len(a.chunks)-1) << chunkShift
	a.top = off + n
	return off
}

// growLast reallocates the last chunk so it holds at least end bytes, doubling.
func (a *byteArena) growLast(end uint32) {
	last := len(a.chunks) - 1
	old := a.chunks[last]
	size := max(uint32(2*len(old)), end)
	size = min(size, chunkSize)
	c := make([]byte, size)
	copy(c, old)
	a.chunks[last] = c
}

// release returns n bytes at off to the free list.
func (a *byteArena) release(off, n uint32) {
	if n < minFreeSpan {
		a.wasteBytes += int64(n)
		return
	}
	bin := uint(bits.Len32(n)) - 1
	a.free[bin] = append(a.free[bin], span{off, n})
	a.freeMask |= 1 << bin
	a.freeBytes += int64(n)
}

// capacityBytes is the memory held by chunks.
func (a *byteArena) capacityBytes() int64 {
	var n int64
	for _, c := range a.chunks {
		n += int64(cap(c))
	}
	return n
}

// handedBytes is the number of bytes handed out so far: live, free and wasted bytes
// together. Every chunk but the last is handed out whole; the last up to top.
func (a *byteArena) handedBytes() int64 {
	if len(a.chunks) == 0 {
		return 0
	}
	var n int64
	for _, c := range a.chunks[:len(a.chunks)-1] {
		n += int64(len(c))
	}
	return n + int64(a.top&chunkMask)
}
