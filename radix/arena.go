package radix

import (
	"encoding/binary"
	"math/bits"
)

// Edge bytes live in chunks addressed by a uint32: chunk index in the high bits,
// offset in the low chunkShift bits. An edge never spans two chunks, so an edge is
// one contiguous slice and no edge is longer than chunkSize.
const (
	chunkShift = 20
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
	// maxChunks keeps addresses inside uint32: 4 GiB of edge bytes per shard.
	maxChunks = 1 << (32 - chunkShift)
	// firstChunkBytes is the size a chunk starts at; it doubles up to chunkSize, so
	// a small tree does not pay a mebibyte per shard.
	firstChunkBytes = 4 << 10
	// minBinSpan is the shortest free span kept in a bin: it holds its length, the
	// previous and next span of its bin, and its length again at its end. Shorter
	// spans stay marked free and rejoin a neighbour when it is released.
	minBinSpan = 16
	// noSpan ends a bin's list; address 0 is a valid span.
	noSpan = ^uint32(0)
)

// span is a range of arena bytes.
type span struct{ off, n uint32 }

// byteArena stores edge bytes: bump allocation at the top of the last chunk, and
// free lists for bytes released by eviction. It holds no pointer per edge: the GC
// sees one slice header per chunk and per bitmap.
//
// Released bytes coalesce, as in a classic boundary-tag allocator. A bitmap with
// one bit per byte marks free bytes (12.5% of the arena), so a release sees whether
// its neighbours are free. Every maximal free span of minBinSpan bytes or more
// stores, in its own bytes, its length at both ends and the links of a doubly
// linked list, the bin of floor(log2(length)); so a release finds where a free
// neighbour begins or ends, unlinks it and links the merged span, all in O(1), and
// a span that reaches the top retracts the top instead. Splitting an edge
// re-slices it without copying, so the two halves of one allocation may be released
// separately; the bitmap joins them again.
type byteArena struct {
	chunks [][]byte
	free   [][]uint64 // free[c] has bit i set when byte i of chunk c is free
	// top is the next unused address in the last chunk's address range; when the
	// last chunk is full it equals the address of the chunk after it, so read it
	// through topInLast.
	top uint32

	bins    [33]uint32 // first span of each bin, or noSpan
	binMask uint64     // bit b set when bins[b] is not empty

	freeBytes int64
	freeSpans int // maximal free spans of any length
}

// view returns the n bytes at off. The slice is capped so an append cannot write
// into a neighbouring edge.
func (a *byteArena) view(off, n uint32) []byte {
	c := a.chunks[off>>chunkShift]
	i := off & chunkMask
	return c[i : i+n : i+n]
}

// Fields a binned free span keeps in its own first twelve bytes and last four.
func (a *byteArena) spanLen(off uint32) uint32 { return binary.LittleEndian.Uint32(a.view(off, 4)) }
func (a *byteArena) spanPrev(off uint32) uint32 {
	return binary.LittleEndian.Uint32(a.view(off+4, 4))
}
func (a *byteArena) spanNext(off uint32) uint32 {
	return binary.LittleEndian.Uint32(a.view(off+8, 4))
}
func (a *byteArena) setPrev(off, v uint32) { binary.LittleEndian.PutUint32(a.view(off+4, 4), v) }
func (a *byteArena) setNext(off, v uint32) { binary.LittleEndian.PutUint32(a.view(off+8, 4), v) }

func binOf(n uint32) uint { return uint(bits.Len32(n)) - 1 }

// link adds the free span [off, off+n) to its bin, if it is long enough.
func (a *byteArena) link(off, n uint32) {
	if n < minBinSpan {
		return
	}
	b := binOf(n)
	head := noSpan
	if a.binMask&(1<<b) != 0 {
		head = a.bins[b]
	}
	binary.LittleEndian.PutUint32(a.view(off, 4), n)
	binary.LittleEndian.PutUint32(a.view(off+n-4, 4), n)
	a.setPrev(off, noSpan)
	a.setNext(off, head)
	if head != noSpan {
		a.setPrev(head, off)
	}
	a.bins[b] = off
	a.binMask |= 1 << b
}

// unlink removes the binned span at off from its bin.
func (a *byteArena) unlink(off uint32) {
	n := a.spanLen(off)
	b := binOf(n)
	prev, next := a.spanPrev(off), a.spanNext(off)
	if prev == noSpan {
		a.bins[b] = next
		if next == noSpan {
			a.binMask &^= 1 << b
		}
	} else {
		a.setNext(prev, next)
	}
	if next != noSpan {
		a.setPrev(next, prev)
	}
}

// alloc reserves n bytes (0 < n <= chunkSize) and returns their address.
func (a *byteArena) alloc(n uint32) uint32 {
	if a.binMask != 0 {
		// Any span in bin b >= ceil(log2(n)) holds at least n bytes.
		need := uint(bits.Len32(n - 1))
		if m := a.binMask >> need; m != 0 {
			return a.carve(a.bins[need+uint(bits.TrailingZeros64(m))], n)
		}
		// Spans in bin floor(log2(n)) may hold n bytes too: look at the first few
		// before growing the arena.
		if b := binOf(n); a.binMask&(1<<b) != 0 {
			off := a.bins[b]
			for i := 0; i < floorBinScan && off != noSpan; i++ {
				if a.spanLen(off) >= n {
					return a.carve(off, n)
				}
				off = a.spanNext(off)
			}
		}
	}
	return a.allocTop(n)
}

// floorBinScan bounds how many spans of bin floor(log2(n)) alloc examines.
const floorBinScan = 8

// carve takes n bytes from the start of the binned span at off.
func (a *byteArena) carve(off, n uint32) uint32 {
	size := a.spanLen(off)
	a.unlink(off)
	a.setFree(off, n, false)
	a.freeBytes -= int64(n)
	if rest := size - n; rest > 0 {
		a.link(off+n, rest)
	} else {
		a.freeSpans--
	}
	return off
}

func (a *byteArena) allocTop(n uint32) uint32 {
	last := len(a.chunks) - 1
	var tail span
	if last >= 0 {
		inChunk := a.topInLast()
		if inChunk+n <= chunkSize {
			if end := inChunk + n; end > uint32(len(a.chunks[last])) {
				a.growLast(end)
			}
			off := a.top
			a.top += n
			return off
		}
		// The request does not fit in the last chunk's address range: what is left
		// of the allocated chunk becomes free space for later, smaller edges.
		tail = span{a.top, uint32(len(a.chunks[last])) - inChunk}
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
	a.free = append(a.free, make([]uint64, (size+63)/64))
	off := uint32(len(a.chunks)-1) << chunkShift
	a.top = off + n
	if tail.n > 0 {
		a.release(tail.off, tail.n)
	}
	return off
}

// topInLast is how many bytes of the last chunk's address range are handed out:
// chunkSize when it is full.
func (a *byteArena) topInLast() uint32 {
	return a.top - uint32(len(a.chunks)-1)<<chunkShift
}

// growLast reallocates the last chunk so it holds at least end bytes, doubling.
func (a *byteArena) growLast(end uint32) {
	last := len(a.chunks) - 1
	old := a.chunks[last]
	size := min(max(uint32(2*len(old)), end), chunkSize)
	c := make([]byte, size)
	copy(c, old)
	a.chunks[last] = c
	f := make([]uint64, (size+63)/64)
	copy(f, a.free[last])
	a.free[last] = f
}

// release returns n bytes at off, merging them with free neighbours in O(1): the
// neighbours' length tags say where they begin and end. Only the released bytes are
// touched in the bitmap.
func (a *byteArena) release(off, n uint32) {
	if n == 0 {
		return
	}
	a.setFree(off, n, true)
	a.freeBytes += int64(n)
	start, end := off, off+n
	a.freeSpans++
	if off&chunkMask != 0 && a.isFree(off-1) {
		var binned bool
		start, binned = a.prevRun(off)
		if binned {
			a.unlink(start)
		}
		a.freeSpans--
	}
	if end&chunkMask != 0 && a.isFree(end) { // runs never continue into the next chunk
		var binned bool
		next := end
		end, binned = a.nextRun(end)
		if binned {
			a.unlink(next)
		}
		a.freeSpans--
	}
	if end == a.top && int(start>>chunkShift) == len(a.chunks)-1 {
		// The span reaches the top: give it back to bump allocation.
		a.setFree(start, end-start, false)
		a.freeBytes -= int64(end - start)
		a.freeSpans--
		a.top = start
		return
	}
	a.link(start, end-start)
}

// prevRun returns the start of the maximal free run that ends just before off, and
// whether it is long enough to be binned (then its last four bytes hold its
// length).
func (a *byteArena) prevRun(off uint32) (uint32, bool) {
	base := off &^ chunkMask
	k := uint32(0)
	for k < minBinSpan && off-k > base && a.isFree(off-k-1) {
		k++
	}
	if k < minBinSpan {
		return off - k, false
	}
	return off - binary.LittleEndian.Uint32(a.view(off-4, 4)), true
}

// nextRun returns the end of the maximal free run that starts at off, and whether
// it is long enough to be binned (then its first four bytes hold its length).
func (a *byteArena) nextRun(off uint32) (uint32, bool) {
	k := uint32(0)
	for k < minBinSpan && a.isFree(off+k) {
		k++
		if (off+k)&chunkMask == 0 {
			break // the run ends with the chunk
		}
	}
	if k < minBinSpan {
		return off + k, false
	}
	return off + a.spanLen(off), true
}

func (a *byteArena) isFree(addr uint32) bool {
	c, i := addr>>chunkShift, addr&chunkMask
	if int(c) >= len(a.free) || int(i) >= len(a.chunks[c]) {
		return false
	}
	return a.free[c][i/64]&(1<<(i%64)) != 0
}

// setFree marks n bytes at off (inside one chunk) free or not.
func (a *byteArena) setFree(off, n uint32, free bool) {
	words := a.free[off>>chunkShift]
	i, end := off&chunkMask, off&chunkMask+n
	for i < end {
		w := i / 64
		lo := i % 64
		hi := min(end-w*64, 64)
		mask := ^uint64(0) >> (64 - (hi - lo)) << lo
		if free {
			words[w] |= mask
		} else {
			words[w] &^= mask
		}
		i = w*64 + hi
	}
}

// capacityBytes is the memory held by chunks and their bitmaps.
func (a *byteArena) capacityBytes() int64 {
	var n int64
	for c := range a.chunks {
		n += int64(cap(a.chunks[c])) + 8*int64(cap(a.free[c]))
	}
	return n
}

// handedBytes is the number of bytes handed out so far, live and free together.
// Every chunk but the last is handed out whole; the last up to top.
func (a *byteArena) handedBytes() int64 {
	if len(a.chunks) == 0 {
		return 0
	}
	var n int64
	for _, c := range a.chunks[:len(a.chunks)-1] {
		n += int64(len(c))
	}
	return n + int64(a.topInLast())
}
