package radix

import "slices"

// Tenant is a worker as the caller numbers it: a dense small integer, at most
// MaxTenant. The caller may reuse a number once RemoveTenant has purged it.
type Tenant uint32

// MaxTenant is the largest Tenant a tree accepts: per-tenant counters are slices
// indexed by tenant, so numbers must stay dense.
const MaxTenant = 1<<20 - 1

// TenantStamp is a tenant with the time it last used a prefix.
type TenantStamp struct {
	Tenant Tenant
	Stamp  int64
}

// inlineTenants is how many tenants a node keeps in its own record. Most nodes are
// leaves held by the one tenant a request was routed to; the shared chat-template
// nodes near the root that many tenants hold move their set to the overflow arena.
const inlineTenants = 2

// minOverflowClass is the smallest overflow block: 1<<2 = 4 entries.
const minOverflowClass = 2

// tenantArena stores the tenant sets that do not fit inline, in blocks of 1<<class
// entries: tenants, stamps and child counts in parallel slices (a binary search over
// tenants reads only tenant ids). Freed blocks are kept per class for reuse.
type tenantArena struct {
	tenants []Tenant
	stamps  []int64
	kids    []uint32
	free    [32][]uint32
}

func (a *tenantArena) alloc(class uint8) uint32 {
	if l := a.free[class]; len(l) > 0 {
		off := l[len(l)-1]
		a.free[class] = l[:len(l)-1]
		return off
	}
	off, k := len(a.tenants), 1<<class
	a.tenants = slices.Grow(a.tenants, k)[:off+k]
	a.stamps = slices.Grow(a.stamps, k)[:off+k]
	a.kids = slices.Grow(a.kids, k)[:off+k]
	return uint32(off)
}

func (a *tenantArena) release(off uint32, class uint8) {
	a.free[class] = append(a.free[class], off)
}

// capacityBytes is the memory held by the arena.
func (a *tenantArena) capacityBytes() int64 {
	return int64(cap(a.tenants))*4 + int64(cap(a.stamps))*8 + int64(cap(a.kids))*4
}

// tset is a view of one node's tenant set: tenants ascending, the stamp of each,
// and how many of the node's children hold each (0: the node is a leaf segment of
// that tenant). The slices alias the node record or the arena: they are valid
// until the next node or tenant-set allocation in this shard.
type tset struct {
	ts   []Tenant
	st   []int64
	kids []uint32
}

func (v tset) find(t Tenant) (int, bool) { return findTenant(v.ts, t) }

// set returns node id's tenant set.
func (s *shard) set(id uint32) tset {
	nd := &s.nodes[id]
	n := nd.n
	if n <= inlineTenants {
		return tset{nd.tenants[:n:n], nd.stamps[:n:n], nd.kids[:n:n]}
	}
	o := nd.ovf
	a := &s.sets
	return tset{a.tenants[o : o+n : o+n], a.stamps[o : o+n : o+n], a.kids[o : o+n : o+n]}
}

// tenantsOf returns node id's tenants and stamps; see tset for how long they live.
func (s *shard) tenantsOf(id uint32) ([]Tenant, []int64) {
	v := s.set(id)
	return v.ts, v.st
}

// findTenant returns where t is, or where it would be inserted, in the sorted set.
func findTenant(ts []Tenant, t Tenant) (int, bool) {
	if len(ts) <= 4 {
		for i, x := range ts {
			if x >= t {
				return i, x == t
			}
		}
		return len(ts), false
	}
	lo, hi := 0, len(ts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ts[m] < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(ts) && ts[lo] == t
}

// copyInsert copies src into dst (one entry longer) with t, stamp and no children
// at position i.
func copyInsert(dst, src tset, i int, t Tenant, stamp int64) {
	copy(dst.ts, src.ts[:i])
	copy(dst.st, src.st[:i])
	copy(dst.kids, src.kids[:i])
	dst.ts[i], dst.st[i], dst.kids[i] = t, stamp, 0
	copy(dst.ts[i+1:], src.ts[i:])
	copy(dst.st[i+1:], src.st[i:])
	copy(dst.kids[i+1:], src.kids[i:])
}

func (a *tenantArena) view(off, n uint32) tset {
	return tset{a.tenants[off : off+n], a.stamps[off : off+n], a.kids[off : off+n]}
}

// insertTenantAt adds t with stamp, held by no child yet, at position i of node
// id's sorted set.
func (s *shard) insertTenantAt(id uint32, i int, t Tenant, stamp int64) {
	nd := &s.nodes[id]
	n := nd.n
	switch {
	case n < inlineTenants:
		copy(nd.tenants[i+1:n+1], nd.tenants[i:n])
		copy(nd.stamps[i+1:n+1], nd.stamps[i:n])
		copy(nd.kids[i+1:n+1], nd.kids[i:n])
		nd.tenants[i], nd.stamps[i], nd.kids[i] = t, stamp, 0
	case n == inlineTenants:
		off := s.sets.alloc(minOverflowClass)
		nd = &s.nodes[id]
		copyInsert(s.sets.view(off, n+1), tset{nd.tenants[:], nd.stamps[:], nd.kids[:]}, i, t, stamp)
		nd.ovf, nd.class = off, minOverflowClass
		nd.tenants, nd.stamps, nd.kids = [inlineTenants]Tenant{}, [inlineTenants]int64{}, [inlineTenants]uint32{}
	case n == 1<<nd.class:
		oldOff, oldClass := nd.ovf, nd.class
		off := s.sets.alloc(oldClass + 1)
		nd = &s.nodes[id]
		copyInsert(s.sets.view(off, n+1), s.sets.view(oldOff, n), i, t, stamp)
		s.sets.release(oldOff, oldClass)
		nd.ovf, nd.class = off, oldClass+1
	default:
		v := s.sets.view(nd.ovf, n+1)
		copy(v.ts[i+1:], v.ts[i:n])
		copy(v.st[i+1:], v.st[i:n])
		copy(v.kids[i+1:], v.kids[i:n])
		v.ts[i], v.st[i], v.kids[i] = t, stamp, 0
	}
	nd.n = n + 1
}

// removeTenantAt drops the entry at position i of node id's sorted set.
func (s *shard) removeTenantAt(id uint32, i int) {
	nd := &s.nodes[id]
	n := nd.n
	if n <= inlineTenants {
		copy(nd.tenants[i:n-1], nd.tenants[i+1:n])
		copy(nd.stamps[i:n-1], nd.stamps[i+1:n])
		copy(nd.kids[i:n-1], nd.kids[i+1:n])
		nd.tenants[n-1], nd.stamps[n-1], nd.kids[n-1] = 0, 0, 0
		nd.n = n - 1
		return
	}
	o := nd.ovf
	v := s.sets.view(o, n)
	copy(v.ts[i:], v.ts[i+1:])
	copy(v.st[i:], v.st[i+1:])
	copy(v.kids[i:], v.kids[i+1:])
	n--
	nd.n = n
	if n == inlineTenants {
		copy(nd.tenants[:], v.ts[:n])
		copy(nd.stamps[:], v.st[:n])
		copy(nd.kids[:], v.kids[:n])
		s.sets.release(o, nd.class)
		nd.ovf, nd.class = 0, 0
	}
}

// copyTenants gives node dst (which has none) the tenants and stamps of node src,
// whose parent dst becomes: every tenant is held by one child, src.
func (s *shard) copyTenants(dst, src uint32) {
	sn := &s.nodes[src]
	n := sn.n
	var to tset
	if n <= inlineTenants {
		d := &s.nodes[dst]
		d.tenants, d.stamps, d.n = sn.tenants, sn.stamps, n
		to = tset{kids: d.kids[:n]}
	} else {
		class := sn.class
		off := s.sets.alloc(class)
		so := s.nodes[src].ovf
		copy(s.sets.tenants[off:off+n], s.sets.tenants[so:so+n])
		copy(s.sets.stamps[off:off+n], s.sets.stamps[so:so+n])
		d := &s.nodes[dst]
		d.ovf, d.class, d.n = off, class, n
		to = s.sets.view(off, n)
	}
	for i := range to.kids {
		to.kids[i] = 1
	}
}

// dropTenants releases node id's overflow block, if any, and empties its set.
func (s *shard) dropTenants(id uint32) {
	nd := &s.nodes[id]
	if nd.n > inlineTenants {
		s.sets.release(nd.ovf, nd.class)
	}
	nd.n, nd.ovf, nd.class = 0, 0, 0
	nd.tenants, nd.stamps, nd.kids = [inlineTenants]Tenant{}, [inlineTenants]int64{}, [inlineTenants]uint32{}
}

// recentTenants writes up to MaxMatchTenants tenants of node id into dst and their
// stamps into top, most recently used first (ties by lower tenant id), and returns how
// many it wrote. With live set, only the tenants it reports live count.
func (s *shard) recentTenants(id uint32, dst *[MaxMatchTenants]Tenant, top *[MaxMatchTenants]int64, live LiveChooser) int {
	ts, st := s.tenantsOf(id)
	k := 0
	for i, t := range ts {
		stamp := st[i]
		if live != nil && !live.Live(t, stamp) {
			continue
		}
		if k == MaxMatchTenants {
			// Entries arrive in ascending tenant order, so an equal stamp loses to
			// the kept, lower tenant.
			if stamp <= top[k-1] {
				continue
			}
			k--
		}
		j := k
		for j > 0 && top[j-1] < stamp {
			top[j], dst[j] = top[j-1], dst[j-1]
			j--
		}
		top[j], dst[j] = stamp, t
		k++
	}
	return k
}
