package radix

import "unsafe"

// Cursor is where a walk resumes: the zero Cursor starts at the beginning and
// CursorDone means the walk is complete. It is a plain number so that a walk can be
// resumed by a later request.
type Cursor uint64

// CursorDone is returned by ReadPage after the last entry.
const CursorDone = ^Cursor(0)

// walkSliceNodes bounds the node records one lock hold of ReadPage visits.
const walkSliceNodes = 1024

// Page holds entries read by ReadPage: each is a full path from the root and the
// tenants whose use of that path is not covered by a longer entry, with their
// stamps. Inserting every (path, tenant, stamp) of a complete walk into an empty
// tree reproduces the tree's prefixes, tenants and stamps (node boundaries may
// differ). A Page's memory is reused across ReadPage calls; the slices its accessors
// return are views valid until the next ReadPage or Reset.
type Page struct {
	buf     []byte
	ends    []uint32
	tenants []TenantStamp
	tends   []uint32
	shards  []uint32 // shard of each entry, for tests
	size    int
}

// Reset empties the page, keeping its memory.
func (p *Page) Reset() {
	p.buf, p.ends, p.tenants, p.tends, p.shards = p.buf[:0], p.ends[:0], p.tenants[:0], p.tends[:0], p.shards[:0]
	p.size = 0
}

// Len is the number of entries.
func (p *Page) Len() int { return len(p.ends) }

// Size is the page's size as ReadPage counts it against maxBytes: path bytes plus
// 12 bytes per tenant.
func (p *Page) Size() int { return p.size }

func (p *Page) pathBytes(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]:p.ends[i]]
}

// Text is the path of entry i of a text tree's page.
func (p *Page) Text(i int) []byte { return p.pathBytes(i) }

// Tokens is the path of entry i of a token tree's page.
func (p *Page) Tokens(i int) []uint32 {
	b := p.pathBytes(i)
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// Tenants are the tenants of entry i with their stamps, ascending by tenant.
func (p *Page) Tenants(i int) []TenantStamp {
	start := uint32(0)
	if i > 0 {
		start = p.tends[i-1]
	}
	return p.tenants[start:p.tends[i]:p.tends[i]]
}

// readPage resets p and fills it with entries after cursor until their size
// reaches maxBytes (at least one entry, so a walk always progresses). Entries are
// visited shard by shard in node-record order, so a walk over a tree that changes
// meanwhile returns every entry that exists for the whole walk exactly once; what
// is added or removed during the walk may or may not appear.
func (c *core) readPage(cursor Cursor, maxBytes int, p *Page) Cursor {
	p.Reset()
	if cursor == CursorDone {
		return CursorDone
	}
	si, id := uint32(cursor>>32), uint32(cursor)
	if id <= rootID {
		id = rootID + 1
	}
	var mark []int64 // mark[t] is the epoch at which a child matched t's stamp
	var epoch int64
	var path []uint32
	for ; int(si) < len(c.shards); si, id = si+1, rootID+1 {
		s := c.shards[si]
		for {
			s.mu.RLock()
			if len(mark) < len(s.tenantChars) {
				mark = append(mark, make([]int64, len(s.tenantChars)-len(mark))...)
			}
			end := min(uint32(len(s.nodes)), id+walkSliceNodes)
			for ; id < end; id++ {
				if s.nodes[id].edgeLen == 0 {
					continue
				}
				epoch++
				if !s.appendEntry(id, p, mark, epoch, &path) {
					continue
				}
				p.shards = append(p.shards, si)
				if p.size >= maxBytes {
					s.mu.RUnlock()
					return Cursor(si)<<32 | Cursor(id+1)
				}
			}
			done := id >= uint32(len(s.nodes))
			s.mu.RUnlock()
			if done {
				break
			}
		}
	}
	return CursorDone
}

// appendEntry adds node id to p if some tenant's stamp on it is not repeated by a
// child (then no longer entry carries it), and reports whether it did.
func (s *shard) appendEntry(id uint32, p *Page, mark []int64, epoch int64, path *[]uint32) bool {
	ts, stamps := s.tenantsOf(id)
	for ch := s.nodes[id].child; ch != 0; ch = s.nodes[ch].next {
		cts, cstamps := s.tenantsOf(ch)
		for j, t := range cts {
			if k, ok := findTenant(ts, t); ok && stamps[k] == cstamps[j] {
				mark[t] = epoch
			}
		}
	}
	start := len(p.tenants)
	for j, t := range ts {
		if mark[t] != epoch {
			p.tenants = append(p.tenants, TenantStamp{Tenant: t, Stamp: stamps[j]})
		}
	}
	if len(p.tenants) == start {
		return false
	}
	*path = (*path)[:0]
	for n := id; n != rootID; n = s.nodes[n].parent {
		*path = append(*path, n)
	}
	before := len(p.buf)
	for i := len(*path) - 1; i >= 0; i-- {
		p.buf = append(p.buf, s.edge((*path)[i])...)
	}
	p.ends = append(p.ends, uint32(len(p.buf)))
	p.tends = append(p.tends, uint32(len(p.tenants)))
	p.size += len(p.buf) - before + 12*(len(p.tenants)-start)
	return true
}
