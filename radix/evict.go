package radix

// EvictStats reports what one Evict call did.
type EvictStats struct {
	// Before and After are the tree's Size when Evict started and ended.
	Before, After int64
	// Segments is how many (node, tenant) leaf segments were dropped; Nodes how many
	// nodes were detached because no tenant held them any more.
	Segments, Nodes int
	// Rounds is how many times Evict scanned the shards for leaves: more than one
	// only when concurrent inserts invalidated the candidates of the previous scan.
	Rounds int
}

// maxEvictRounds bounds rescans when concurrent traffic keeps the tree over budget.
const maxEvictRounds = 4

// evictScanNodes bounds the node records one lock hold of the leaf scan visits.
const evictScanNodes = 1024

// candidate is a leaf segment: tenant holds node, and no child of node holds it.
type candidate struct {
	stamp  int64
	tenant Tenant
	shard  uint32
	node   uint32
}

func (a candidate) less(b candidate) bool {
	if a.stamp != b.stamp {
		return a.stamp < b.stamp
	}
	if a.tenant != b.tenant {
		return a.tenant < b.tenant
	}
	if a.shard != b.shard {
		return a.shard < b.shard
	}
	return a.node < b.node
}

// candHeap is a binary min-heap of candidates, least recently used on top.
type candHeap []candidate

func (h *candHeap) push(c candidate) {
	*h = append(*h, c)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].less(a[p]) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *candHeap) pop() candidate {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(a) && a[l].less(a[m]) {
			m = l
		}
		if r := l + 1; r < len(a) && a[r].less(a[m]) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// evict drops least-recently-used leaf segments, across all tenants and shards,
// until the tree holds at most budget tenant-weighted characters. A leaf segment is
// a node and a tenant that holds it while none of the node's children do; dropping
// it can make the parent a leaf segment of that tenant, which then competes by its
// own stamp. Because a parent's stamp is never older than its children's, the
// result is the same as dropping (prefix, tenant) pairs oldest first, at node
// granularity.
//
// Evict never holds a shard lock for more than evictScanNodes records of the scan
// or EvictSliceNodes removals, so a concurrent match waits at most that long.
func (c *core) evict(budget int64) EvictStats {
	st := EvictStats{Before: c.size()}
	var h candHeap
	for st.Rounds < maxEvictRounds && c.size() > budget {
		st.Rounds++
		h = h[:0]
		for i := range c.shards {
			h = c.collectLeaves(uint32(i), h)
		}
		// Heapify by pushing; the scan order is arbitrary.
		cands := h
		h = make(candHeap, 0, len(cands))
		for _, x := range cands {
			h.push(x)
		}
		c.evictFrom(&h, budget, &st)
	}
	st.After = c.size()
	return st
}

// collectLeaves appends the leaf segments of shard i to h.
func (c *core) collectLeaves(i uint32, h candHeap) candHeap {
	s := c.shards[i]
	for start := uint32(rootID + 1); ; start += evictScanNodes {
		s.mu.RLock()
		c.notifyEvictLock(true, true)
		end := min(uint32(len(s.nodes)), start+evictScanNodes)
		for id := start; id < end; id++ {
			if s.nodes[id].edgeLen == 0 {
				continue // free record
			}
			v := s.set(id)
			for j, k := range v.kids {
				if k == 0 {
					h = append(h, candidate{stamp: v.st[j], tenant: v.ts[j], shard: i, node: id})
				}
			}
		}
		done := end >= uint32(len(s.nodes))
		c.notifyEvictLock(true, false)
		s.mu.RUnlock()
		if done {
			return h
		}
	}
}

// evictFrom pops candidates until the tree fits the budget or the heap is empty.
// A candidate is still valid if its node holds its tenant with the same stamp and
// no child holds the tenant; concurrent inserts may have changed either.
func (c *core) evictFrom(h *candHeap, budget int64, st *EvictStats) {
	var held *shard
	unlock := func() {
		held.publish()
		c.notifyEvictLock(false, false)
		held.mu.Unlock()
	}
	slice := 0
	over := c.size() - budget
	for len(*h) > 0 {
		if over <= 0 {
			if held != nil {
				held.publish()
			}
			if over = c.size() - budget; over <= 0 {
				break
			}
		}
		x := h.pop()
		s := c.shards[x.shard]
		if s != held || slice >= c.evictSlice {
			if held != nil {
				unlock()
			}
			held, slice = s, 0
			s.mu.Lock()
			c.notifyEvictLock(false, true)
		}
		id := x.node
		if int(id) >= len(s.nodes) || s.nodes[id].edgeLen == 0 {
			continue
		}
		v := s.set(id)
		j, ok := v.find(x.tenant)
		if !ok || v.st[j] != x.stamp || v.kids[j] != 0 {
			continue
		}
		slice++
		parent := s.nodes[id].parent
		before := s.size
		k := s.dropTenant(id, j, x.tenant)
		over -= before - s.size
		st.Segments++
		if s.nodes[id].edgeLen == 0 {
			st.Nodes++
		}
		if k >= 0 {
			h.push(candidate{stamp: s.set(parent).st[k], tenant: x.tenant, shard: x.shard, node: parent})
		}
	}
	if held != nil {
		unlock()
	}
}

// notifyEvictLock calls Config.OnEvictLock, if set.
func (c *core) notifyEvictLock(scan, held bool) {
	if c.onEvictLock != nil {
		c.onEvictLock(scan, held)
	}
}
