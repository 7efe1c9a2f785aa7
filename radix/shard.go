package radix

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// node is one edge of the tree and the tenants that hold the prefix ending with it.
// 72 bytes, no pointers: the GC never looks inside s.nodes.
type node struct {
	edgeOff uint32 // address of the edge bytes in the shard's byteArena
	edgeLen uint32 // edge length in bytes; 0 only for the root and free records
	parent  uint32
	child   uint32 // first child; children form a doubly linked sibling list
	next    uint32 // next sibling, or next free record
	prev    uint32
	depth   uint32 // characters (tokens) from the root through the end of this edge
	ovf     uint32 // tenant-set block in the shard's tenantArena when n > inlineTenants
	n       uint32 // number of tenants
	class   uint8  // overflow block holds 1<<class entries
	tenants [inlineTenants]Tenant
	kids    [inlineTenants]uint32 // children holding each tenant
	stamps  [inlineTenants]int64
}

// rootID is every shard's root. Record 0 is never used, so 0 means "no node".
const rootID = 1

// shard is one independently locked sub-tree with its arenas.
type shard struct {
	mu     sync.RWMutex
	tokens bool

	nodes    []node
	freeNode uint32 // head of the free-record list, linked through next
	live     int    // live nodes, root included

	kids  childTable
	bytes byteArena
	sets  tenantArena

	// size is the tenant-weighted character count (each character counted once per
	// tenant that holds it), the figure Evict compares with its budget. stored
	// counts each stored character once. Both are written under mu and mirrored
	// into atomics so that Size reads them without locking.
	size, stored             int64
	sizeMirror, storedMirror atomic.Int64
	tenantChars              []int64 // per tenant, indexed by Tenant

	// chosen and chosenStamps are the scratch the tenant list of a MatchAndInsert
	// lives in while the Chooser runs; they are guarded by the write lock.
	chosen       [MaxMatchTenants]Tenant
	chosenStamps [MaxMatchTenants]int64

	// stack is scratch for RemoveTenant, guarded by the write lock.
	stack []uint32

	_ [64]byte // keep neighbouring shards' locks off this cache line
}

func newShard(tokens bool) *shard {
	s := &shard{tokens: tokens}
	s.nodes = make([]node, 2, 16)
	s.live = 1
	return s
}

func (s *shard) edge(id uint32) []byte {
	nd := &s.nodes[id]
	return s.bytes.view(nd.edgeOff, nd.edgeLen)
}

// chars is the length of node id's edge in characters (tokens).
func (s *shard) chars(id uint32) int64 {
	nd := &s.nodes[id]
	return int64(nd.depth - s.nodes[nd.parent].depth)
}

func (s *shard) newNode() uint32 {
	s.live++
	if id := s.freeNode; id != 0 {
		s.freeNode = s.nodes[id].next
		s.nodes[id] = node{}
		return id
	}
	s.nodes = append(s.nodes, node{})
	return uint32(len(s.nodes) - 1)
}

func (s *shard) freeRecord(id uint32) {
	s.nodes[id] = node{next: s.freeNode}
	s.freeNode = id
	s.live--
}

func (s *shard) publish() {
	s.sizeMirror.Store(s.size)
	s.storedMirror.Store(s.stored)
}

// descent is where the longest stored prefix of a text ends: after node (pos bytes
// of the text), or partLen bytes into the edge of node part when part != 0.
type descent struct {
	node    uint32
	pos     int
	part    uint32
	partLen int
}

func (s *shard) descend(text []byte) descent {
	cur, pos := uint32(rootID), 0
	for pos < len(text) {
		rest := text[pos:]
		c := s.kids.get(childKey(cur, firstKey(rest, s.tokens)))
		if c == 0 {
			break
		}
		e := s.edge(c)
		q := commonUnits(rest, e, s.tokens)
		if q < len(e) {
			return descent{node: cur, pos: pos, part: c, partLen: q}
		}
		cur, pos = c, pos+q
	}
	return descent{node: cur, pos: pos}
}

// matchedUnits is the length in characters of the prefix d found.
func (s *shard) matchedUnits(d descent) int {
	depth := int(s.nodes[d.node].depth)
	if d.part == 0 {
		return depth
	}
	if s.tokens {
		return depth + d.partLen/4
	}
	// The matched part was just compared, so it is in cache; count the rest of the
	// edge (from memory) instead only when it is much shorter.
	e := s.edge(d.part)
	if rest := len(e) - d.partLen; d.partLen > 4*rest {
		return int(s.nodes[d.part].depth) - countChars(e[d.partLen:])
	}
	return depth + countChars(e[:d.partLen])
}

// holder is the node whose tenants hold the whole prefix d found, or 0.
func (d descent) holder() uint32 {
	if d.part != 0 {
		return d.part
	}
	if d.node == rootID {
		return 0
	}
	return d.node
}

// insertFrom stores text for tenant t after the prefix d found (matched characters
// long; tail more characters follow) and stamps the whole path with now.
func (s *shard) insertFrom(d descent, text []byte, matched, tail int, t Tenant, now int64) {
	cur, pos := d.node, d.pos
	if d.part != 0 {
		cur = s.split(d.part, d.partLen, matched)
		pos += d.partLen
	}
	depth := matched
	for pos < len(text) {
		rest := text[pos:]
		n, chars := len(rest), tail
		if n > chunkSize {
			n = cutUnits(rest, chunkSize, s.tokens)
			chars = countUnits(rest[:n], s.tokens)
		}
		depth += chars
		tail -= chars
		cur = s.addLeaf(cur, rest[:n], depth)
		pos += n
	}
	if len(s.tenantChars) <= int(t) {
		s.growTenantChars(t)
	}
	// Walk up from the end of the text. Where t is new to a node, the node's
	// parent gains a child that holds t.
	added := false
	for id := cur; id != rootID; id = s.nodes[id].parent {
		added = s.touch(id, t, now, added)
	}
	s.publish()
}

func (s *shard) growTenantChars(t Tenant) {
	if t > MaxTenant {
		panic("radix: tenant beyond MaxTenant; number workers densely from 0")
	}
	n := make([]int64, max(int(t)+1, 2*len(s.tenantChars)))
	copy(n, s.tenantChars)
	s.tenantChars = n
}

// touch records that t used node id at now: it adds t or raises its stamp, and
// counts one more child holding t when childAdded. Stamps only grow, so a parent's
// stamp is never older than its children's. It reports whether t was new to id.
func (s *shard) touch(id uint32, t Tenant, now int64, childAdded bool) bool {
	v := s.set(id)
	i, ok := v.find(t)
	if ok {
		if v.st[i] < now {
			v.st[i] = now
		}
		if childAdded {
			v.kids[i]++
		}
		return false
	}
	s.insertTenantAt(id, i, t, now)
	if childAdded {
		s.set(id).kids[i] = 1
	}
	c := s.chars(id)
	s.size += c
	s.tenantChars[t] += c
	return true
}

// split cuts node c after q bytes: a new node takes the first q bytes (ending at
// depth characters) and c's tenants, and c becomes its only child. It returns the
// new node. Sizes do not change: the same tenants hold the same characters.
func (s *shard) split(c uint32, q int, depth int) uint32 {
	mid := s.newNode()
	cn := s.nodes[c]
	s.nodes[mid] = node{
		edgeOff: cn.edgeOff,
		edgeLen: uint32(q),
		parent:  cn.parent,
		child:   c,
		next:    cn.next,
		prev:    cn.prev,
		depth:   uint32(depth),
	}
	s.copyTenants(mid, c)
	// mid takes c's place among its parent's children.
	if cn.prev != 0 {
		s.nodes[cn.prev].next = mid
	} else {
		s.nodes[cn.parent].child = mid
	}
	if cn.next != 0 {
		s.nodes[cn.next].prev = mid
	}
	nd := &s.nodes[c]
	nd.edgeOff += uint32(q)
	nd.edgeLen -= uint32(q)
	nd.parent, nd.next, nd.prev = mid, 0, 0
	first := firstKey(s.edge(mid), s.tokens)
	s.kids.put(childKey(cn.parent, first), mid)
	s.kids.put(childKey(mid, firstKey(s.edge(c), s.tokens)), c)
	return mid
}

// addLeaf copies b into the arena as a new child of parent ending at depth
// characters. The leaf has no tenants yet; touch adds them.
func (s *shard) addLeaf(parent uint32, b []byte, depth int) uint32 {
	off := s.bytes.alloc(uint32(len(b)))
	copy(s.bytes.view(off, uint32(len(b))), b)
	id := s.newNode()
	p := &s.nodes[parent]
	head := p.child
	p.child = id
	if head != 0 {
		s.nodes[head].prev = id
	}
	s.nodes[id] = node{edgeOff: off, edgeLen: uint32(len(b)), parent: parent, next: head, depth: uint32(depth)}
	s.kids.put(childKey(parent, firstKey(b, s.tokens)), id)
	s.stored += int64(depth) - int64(s.nodes[parent].depth)
	return id
}

// dropTenant removes t (at position i of node id's set), which no child of id
// holds, and detaches the node when no tenant holds it any more; such a node has
// no children left, because a child's tenants are a subset of its parent's. It
// returns the parent's position of t when the parent holds t in no other child
// now, so is a new leaf segment of t, or -1.
func (s *shard) dropTenant(id uint32, i int, t Tenant) int {
	c := s.chars(id)
	parent := s.nodes[id].parent
	s.removeTenantAt(id, i)
	s.size -= c
	s.tenantChars[t] -= c
	if s.nodes[id].n == 0 {
		s.detach(id)
	}
	if parent == rootID {
		return -1
	}
	p := s.set(parent)
	j, ok := p.find(t)
	if !ok {
		panic("radix: a parent lost a tenant its child held")
	}
	p.kids[j]--
	if p.kids[j] == 0 {
		return j
	}
	return -1
}

func (s *shard) detach(id uint32) {
	nd := s.nodes[id]
	if nd.child != 0 {
		panic("radix: detaching a node that has children")
	}
	if nd.prev != 0 {
		s.nodes[nd.prev].next = nd.next
	} else {
		s.nodes[nd.parent].child = nd.next
	}
	if nd.next != 0 {
		s.nodes[nd.next].prev = nd.prev
	}
	s.kids.del(childKey(nd.parent, firstKey(s.edge(id), s.tokens)))
	s.stored -= s.chars(id)
	s.bytes.release(nd.edgeOff, nd.edgeLen)
	s.dropTenants(id)
	s.freeRecord(id)
}

// removeTenant purges t from the shard and returns the tenant-weighted characters
// it held. A child holds t only if its parent does, so the search stays inside t's
// part of the tree; nodes are handled children first so that emptied nodes are
// leaves when they are detached.
func (s *shard) removeTenant(t Tenant) int64 {
	if int(t) >= len(s.tenantChars) || s.tenantChars[t] == 0 {
		return 0
	}
	before := s.tenantChars[t]
	order := s.stack[:0]
	order = append(order, rootID)
	for i := 0; i < len(order); i++ {
		for c := s.nodes[order[i]].child; c != 0; c = s.nodes[c].next {
			if _, ok := s.set(c).find(t); ok {
				order = append(order, c)
			}
		}
	}
	for i := len(order) - 1; i > 0; i-- {
		id := order[i]
		j, _ := s.set(id).find(t)
		s.dropTenant(id, j, t)
	}
	s.stack = order[:0]
	s.publish()
	return before
}

// memoryBytes is the heap the shard's arenas hold.
func (s *shard) memoryBytes() int64 {
	return int64(cap(s.nodes))*int64(unsafe.Sizeof(node{})) + s.kids.capacityBytes() + s.bytes.capacityBytes() +
		s.sets.capacityBytes() + int64(cap(s.tenantChars))*8 + int64(cap(s.stack))*4
}
