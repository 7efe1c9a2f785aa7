package radix

import "slices"

// Tenant is a worker as the caller numbers it: a dense small integer. The caller may
// reuse a number once RemoveTenant has purged it.
type Tenant uint32

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
// entries: tenants and stamps in parallel slices (a binary search over tenants reads
// only tenant ids). Freed blocks are kept per class for reuse.
type tenantArena struct {
	tenants []Tenant
	stamps  []int64
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
	return uint32(off)
}

func (a *tenantArena) release(off uint32, class uint8) {
	a.free[class] = append(a.free[class], off)
}

// capacityBytes is the memory held by the arena.
func (a *tenantArena) capacityBytes() int64 {
	return int64(cap(a.tenants))*4 + int64(cap(a.stamps))*8
}

// tenantsOf returns a node's tenants (sorted ascending) and their stamps. The
// slices alias the node record or the arena: they are valid until the next node or
// tenant-set allocation in this shard.
func (s *shard) tenantsOf(id uint32) ([]Tenant, []int64) {
	nd := &s.nodes[id]
	n := nd.n
	if n <= inlineTenants {
		return nd.tenants[:n:n], nd.stamps[:n:n]
	}
	o := nd.ovf
	return s.tset.tenants[o : o+n : o+n], s.tset.stamps[o : o+n : o+n]
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

// insertTenantAt adds t with stamp at position i of node id's sorted set.
func (s *shard) insertTenantAt(id uint32, i int, t Tenant, stamp int64) {
	nd := &s.nodes[id]
	n := nd.n
	switch {
	case n < inlineTenants:
		copy(nd.tenants[i+1:n+1], nd.tenants[i:n])
		copy(nd.stamps[i+1:n+1], nd.stamps[i:n])
		nd.tenants[i], nd.stamps[i] = t, stamp
	case n == inlineTenants:
		off := s.tset.alloc(minOverflowClass)
		nd = &s.nodes[id]
		ts, st := s.tset.tenants[off:off+n+1], s.tset.stamps[off:off+n+1]
		copy(ts, nd.tenants[:i])
		copy(st, nd.stamps[:i])
		ts[i], st[i] = t, stamp
		copy(ts[i+1:], nd.tenants[i:n])
		copy(st[i+1:], nd.stamps[i:n])
		nd.ovf, nd.class = off, minOverflowClass
		nd.tenants, nd.stamps = [inlineTenants]Tenant{}, [inlineTenants]int64{}
	case n == 1<<nd.class:
		oldOff, oldClass := nd.ovf, nd.class
		off := s.tset.alloc(oldClass + 1)
		nd = &s.nodes[id]
		ts, st := s.tset.tenants[off:off+n+1], s.tset.stamps[off:off+n+1]
		ots, ost := s.tset.tenants[oldOff:oldOff+n], s.tset.stamps[oldOff:oldOff+n]
		copy(ts, ots[:i])
		copy(st, ost[:i])
		ts[i], st[i] = t, stamp
		copy(ts[i+1:], ots[i:])
		copy(st[i+1:], ost[i:])
		s.tset.release(oldOff, oldClass)
		nd.ovf, nd.class = off, oldClass+1
	default:
		o := nd.ovf
		ts, st := s.tset.tenants[o:o+n+1], s.tset.stamps[o:o+n+1]
		copy(ts[i+1:], ts[i:n])
		copy(st[i+1:], st[i:n])
		ts[i], st[i] = t, stamp
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
		nd.tenants[n-1], nd.stamps[n-1] = 0, 0
		nd.n = n - 1
		return
	}
	o := nd.ovf
	ts, st := s.tset.tenants[o:o+n], s.tset.stamps[o:o+n]
	copy(ts[i:], ts[i+1:])
	copy(st[i:], st[i+1:])
	n--
	nd.n = n
	if n == inlineTenants {
		copy(nd.tenants[:], ts[:n])
		copy(nd.stamps[:], st[:n])
		s.tset.release(o, nd.class)
		nd.ovf, nd.class = 0, 0
	}
}

// copyTenants gives node dst (which has none) the tenant set of node src.
func (s *shard) copyTenants(dst, src uint32) {
	sn := &s.nodes[src]
	n := sn.n
	if n <= inlineTenants {
		d := &s.nodes[dst]
		d.tenants, d.stamps, d.n = sn.tenants, sn.stamps, n
		return
	}
	class := sn.class
	off := s.tset.alloc(class)
	so := s.nodes[src].ovf
	copy(s.tset.tenants[off:off+n], s.tset.tenants[so:so+n])
	copy(s.tset.stamps[off:off+n], s.tset.stamps[so:so+n])
	d := &s.nodes[dst]
	d.ovf, d.class, d.n = off, class, n
}

// dropTenants releases node id's overflow block, if any, and empties its set.
func (s *shard) dropTenants(id uint32) {
	nd := &s.nodes[id]
	if nd.n > inlineTenants {
		s.tset.release(nd.ovf, nd.class)
	}
	nd.n, nd.ovf, nd.class = 0, 0, 0
	nd.tenants, nd.stamps = [inlineTenants]Tenant{}, [inlineTenants]int64{}
}

// recentTenants writes up to MaxMatchTenants tenants of node id into dst, most
// recently used first (ties by lower tenant id), and returns how many it wrote.
func (s *shard) recentTenants(id uint32, dst *[MaxMatchTenants]Tenant) int {
	ts, st := s.tenantsOf(id)
	var top [MaxMatchTenants]int64
	k := 0
	for i, t := range ts {
		stamp := st[i]
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
