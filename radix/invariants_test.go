package radix

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// checkInvariants verifies the structure of every shard: edges, tenant subsets and
// stamps, depths, the child table, sibling links, size counters and the arenas'
// accounting. Tests call it after every operation.
func checkInvariants(c *core) error {
	for i, s := range c.shards {
		s.mu.RLock()
		err := s.check()
		s.mu.RUnlock()
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

func (s *shard) check() error {
	root := s.nodes[rootID]
	if root.edgeLen != 0 || root.n != 0 || root.parent != 0 || root.depth != 0 {
		return fmt.Errorf("root record is not empty: %+v", root)
	}
	free := 0
	for id := s.freeNode; id != 0; id = s.nodes[id].next {
		if s.nodes[id].edgeLen != 0 {
			return fmt.Errorf("free record %d has an edge", id)
		}
		free++
		if free > len(s.nodes) {
			return fmt.Errorf("free list has a cycle")
		}
	}
	if got := len(s.nodes) - 1 - free; got != s.live {
		return fmt.Errorf("live = %d, records minus free = %d", s.live, got)
	}
	var size, stored int64
	tenantChars := make([]int64, len(s.tenantChars))
	var spans []span
	var blocks []span
	seen := 0
	queue := []uint32{rootID}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		var prev uint32
		firsts := map[uint32]bool{}
		for ch := s.nodes[id].child; ch != 0; ch = s.nodes[ch].next {
			nd := &s.nodes[ch]
			if nd.parent != id {
				return fmt.Errorf("node %d: parent %d, listed under %d", ch, nd.parent, id)
			}
			if nd.prev != prev {
				return fmt.Errorf("node %d: prev %d, want %d", ch, nd.prev, prev)
			}
			prev = ch
			if err := s.checkNode(ch); err != nil {
				return fmt.Errorf("node %d: %w", ch, err)
			}
			first := firstKey(s.edge(ch), s.tokens)
			if firsts[first] {
				return fmt.Errorf("node %d: two children of %d start with unit %#x", ch, id, first)
			}
			firsts[first] = true
			chars := s.chars(ch)
			ts, _ := s.tenantsOf(ch)
			size += chars * int64(len(ts))
			stored += chars
			for _, t := range ts {
				if int(t) >= len(tenantChars) {
					return fmt.Errorf("node %d: tenant %d beyond tenantChars", ch, t)
				}
				tenantChars[t] += chars
			}
			spans = append(spans, span{nd.edgeOff, nd.edgeLen})
			if nd.n > inlineTenants {
				blocks = append(blocks, span{nd.ovf, 1 << nd.class})
			}
			seen++
			queue = append(queue, ch)
		}
	}
	if seen != s.live-1 {
		return fmt.Errorf("%d nodes reachable, %d live", seen, s.live-1)
	}
	if s.kids.count != seen {
		return fmt.Errorf("child table holds %d entries for %d nodes", s.kids.count, seen)
	}
	if size != s.size || stored != s.stored {
		return fmt.Errorf("size %d stored %d, counted %d and %d", s.size, s.stored, size, stored)
	}
	if s.sizeMirror.Load() != s.size || s.storedMirror.Load() != s.stored {
		return fmt.Errorf("mirrors not published")
	}
	if !slices.Equal(tenantChars, s.tenantChars) {
		return fmt.Errorf("tenantChars %v, counted %v", s.tenantChars, tenantChars)
	}
	// Edge bytes: live edges and free spans are disjoint and, with the waste, add up
	// to what the arena handed out.
	var live int64
	for _, sp := range spans {
		live += int64(sp.n)
	}
	if err := disjoint(spans); err != nil {
		return fmt.Errorf("edge arena: %w", err)
	}
	if err := s.bytes.check(live); err != nil {
		return fmt.Errorf("edge arena: %w", err)
	}
	// Tenant blocks: in use and free blocks are disjoint and tile the arena.
	var total int64
	for class, offs := range s.sets.free {
		for _, o := range offs {
			blocks = append(blocks, span{o, 1 << class})
		}
	}
	for _, b := range blocks {
		total += int64(b.n)
	}
	if err := disjoint(blocks); err != nil {
		return fmt.Errorf("tenant arena: %w", err)
	}
	if total != int64(len(s.sets.tenants)) {
		return fmt.Errorf("tenant arena: blocks cover %d of %d entries", total, len(s.sets.tenants))
	}
	return nil
}

func (s *shard) checkNode(id uint32) error {
	nd := &s.nodes[id]
	if nd.edgeLen == 0 {
		return fmt.Errorf("empty edge")
	}
	if s.tokens && nd.edgeLen%4 != 0 {
		return fmt.Errorf("token edge of %d bytes", nd.edgeLen)
	}
	if want := s.nodes[nd.parent].depth + uint32(countUnits(s.edge(id), s.tokens)); nd.depth != want {
		return fmt.Errorf("depth %d, want %d", nd.depth, want)
	}
	if got := s.kids.get(childKey(nd.parent, firstKey(s.edge(id), s.tokens))); got != id {
		return fmt.Errorf("child table maps its key to %d", got)
	}
	if nd.n == 0 {
		return fmt.Errorf("no tenant holds it")
	}
	if nd.n > inlineTenants && (nd.class < minOverflowClass || 1<<nd.class < nd.n) {
		return fmt.Errorf("%d tenants in a block of class %d", nd.n, nd.class)
	}
	if nd.n <= inlineTenants && nd.class != 0 {
		return fmt.Errorf("inline set with class %d", nd.class)
	}
	ts, st := s.tenantsOf(id)
	for i := 1; i < len(ts); i++ {
		if ts[i-1] >= ts[i] {
			return fmt.Errorf("tenants not strictly ascending: %v", ts)
		}
	}
	holding := map[Tenant]uint32{}
	for ch := nd.child; ch != 0; ch = s.nodes[ch].next {
		cts, _ := s.tenantsOf(ch)
		for _, t := range cts {
			holding[t]++
		}
	}
	for i, t := range ts {
		if k := s.set(id).kids[i]; k != holding[t] {
			return fmt.Errorf("tenant %d: %d children counted, %d hold it", t, k, holding[t])
		}
	}
	if nd.parent == rootID {
		return nil
	}
	pts, pst := s.tenantsOf(nd.parent)
	for i, t := range ts {
		j, ok := findTenant(pts, t)
		if !ok {
			return fmt.Errorf("tenant %d not held by parent %d", t, nd.parent)
		}
		if st[i] > pst[j] {
			return fmt.Errorf("tenant %d: stamp %d newer than parent's %d", t, st[i], pst[j])
		}
	}
	return nil
}

func disjoint(spans []span) error {
	slices.SortFunc(spans, func(a, b span) int { return int(int64(a.off) - int64(b.off)) })
	for i := 1; i < len(spans); i++ {
		if spans[i-1].off+spans[i-1].n > spans[i].off {
			return fmt.Errorf("spans %v and %v overlap", spans[i-1], spans[i])
		}
	}
	return nil
}

// check verifies the arena's free-space bookkeeping against its bitmap: live edges
// and free bytes add up to what was handed out, bytes past the top are not marked
// free, every free run of minBinSpan bytes is binned with a correct tag, and the
// counters agree with a recount.
func (a *byteArena) check(live int64) error {
	var free int64
	var runs []span
	for c, words := range a.free {
		n := uint32(len(a.chunks[c]))
		for w, x := range words {
			if lo := uint32(w) * 64; lo+64 > n && x>>(min(64, max(n, lo)-lo)) != 0 {
				return fmt.Errorf("bits beyond chunk %d's %d bytes are set", c, n)
			}
			free += int64(bits.OnesCount64(x))
		}
		if c == len(a.chunks)-1 && a.topInLast() < n && a.runEnd(a.top) > a.top {
			return fmt.Errorf("bytes past the top %#x are marked free", a.top)
		}
	}
	a.forEachRun(func(r span) { runs = append(runs, r) })
	if free != a.freeBytes {
		return fmt.Errorf("freeBytes %d, bitmap counts %d", a.freeBytes, free)
	}
	if len(runs) != a.freeSpans {
		return fmt.Errorf("freeSpans %d, bitmap has %d runs", a.freeSpans, len(runs))
	}
	if live+free != a.handedBytes() {
		return fmt.Errorf("live %d + free %d != handed %d", live, free, a.handedBytes())
	}
	// Every run of minBinSpan bytes or more is in its bin, tagged at both ends, and
	// the bins hold nothing else; their links are consistent.
	want := map[uint32]uint32{}
	for _, r := range runs {
		if r.n >= minBinSpan {
			want[r.off] = r.n
		}
	}
	binned := 0
	for b := range a.bins {
		if a.binMask&(1<<b) == 0 {
			continue
		}
		prev := noSpan
		for off := a.bins[b]; off != noSpan; off = a.spanNext(off) {
			n := a.spanLen(off)
			if want[off] != n {
				return fmt.Errorf("bin %d holds %#x+%d, not a free run", b, off, n)
			}
			if binOf(n) != uint(b) || binary.LittleEndian.Uint32(a.view(off+n-4, 4)) != n {
				return fmt.Errorf("span %#x+%d: wrong bin %d or end tag", off, n, b)
			}
			if a.spanPrev(off) != prev {
				return fmt.Errorf("span %#x: prev link %#x, want %#x", off, a.spanPrev(off), prev)
			}
			prev = off
			binned++
			if binned > len(want) {
				return fmt.Errorf("bin %d has a cycle", b)
			}
		}
	}
	if binned != len(want) {
		return fmt.Errorf("%d spans binned, %d free runs of %d bytes or more", binned, len(want), minBinSpan)
	}
	return nil
}

// The free-run walk below serves the invariant checks only.

// runEnd returns the address just after the free run that contains addr.
func (a *byteArena) runEnd(addr uint32) uint32 {
	c := addr >> chunkShift
	words := a.free[c]
	base := addr &^ chunkMask
	limit := uint32(len(a.chunks[c]))
	i := addr & chunkMask
	for i < limit {
		w := i / 64
		x := ^words[w] >> (i % 64)
		if x != 0 {
			return base + min(i+uint32(bits.TrailingZeros64(x)), limit)
		}
		i = (w + 1) * 64
	}
	return base + limit
}

// forEachRun calls fn with every maximal run of free bytes, in address order.
func (a *byteArena) forEachRun(fn func(span)) {
	for c, words := range a.free {
		base := uint32(c) << chunkShift
		for i := uint32(0); ; {
			// Find the next free byte at or after i.
			w := int(i / 64)
			if w >= len(words) {
				break
			}
			x := words[w] &^ (1<<(i%64) - 1)
			for x == 0 && w+1 < len(words) {
				w++
				x = words[w]
			}
			if x == 0 {
				break
			}
			start := base + uint32(w*64+bits.TrailingZeros64(x))
			end := a.runEnd(start)
			fn(span{start, end - start})
			i = end - base
		}
	}
}
