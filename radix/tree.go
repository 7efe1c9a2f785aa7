package radix

import (
	"github.com/zeebo/xxh3"
)

// Match is what a descent found: the longest stored prefix of the input and who
// holds it.
type Match struct {
	// MatchedChars is the length of the longest stored prefix, in characters (text
	// trees) or tokens (token trees).
	MatchedChars int
	// InputChars is the length of the whole input in the same unit.
	InputChars int
	// Tenants hold the whole matched prefix: at most MaxMatchTenants of them, most
	// recently used first, ties broken by lower tenant. Empty when nothing matched.
	// In a Chooser call it is a view into the tree, valid only during the call.
	Tenants []Tenant
	// Stamps are the Tenants' stamps on the matched prefix (the now of the call that
	// last stamped it for each), index for index: set only in a Chooser's Match, and a
	// view into the tree like Tenants.
	Stamps []int64
}

// Chooser picks the tenant a request goes to, from what the descent found. The tree
// calls Choose while it holds the lock of the text's shard, so Choose must be quick,
// must not block, and must not call back into the same tree. Implement it on a
// pointer type the caller keeps (a per-request struct, say): passing an interface
// value does not allocate, where a closure capturing variables would.
type Chooser interface {
	// Choose returns the tenant to insert the input for, or false to insert nothing.
	// m.Tenants is valid only during the call.
	Choose(m Match) (Tenant, bool)
}

// A LiveChooser is a Chooser that knows when a tenant's hold on a prefix has lapsed
// (a worker whose engine has evicted it by now). MatchAndInsert then offers it the
// longest prefix of the text that some tenant still holds, with those tenants only:
// from the deepest node of the match up, the first node with a live tenant; when no
// node has one, a Match of no characters and no tenants. What is inserted is the
// same either way: the rest of the text after the longest stored prefix.
type LiveChooser interface {
	Chooser
	// Live reports whether tenant still holds a prefix it last used at stamp. It runs
	// under the shard's lock, like Choose, and must be as quick.
	Live(tenant Tenant, stamp int64) bool
}

// Result is the outcome of MatchAndInsert and Insert.
type Result struct {
	MatchedChars int
	InputChars   int
	// Tenant is the tenant the input was inserted for; valid when Inserted.
	Tenant   Tenant
	Inserted bool
}

// core is the tree both TextTree and TokenTree wrap; keys are bytes either way.
type core struct {
	shards     []*shard
	shardMask  uint64
	prefix     int // K in bytes
	tokens     bool
	evictSlice int
	// onEvictLock is Config.OnEvictLock.
	onEvictLock func(scan, held bool)
}

func newCore(cfg Config, tokens bool) (*core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &core{
		shards:      make([]*shard, cfg.Shards),
		shardMask:   uint64(cfg.Shards - 1),
		prefix:      cfg.ShardPrefix,
		tokens:      tokens,
		evictSlice:  cfg.EvictSliceNodes,
		onEvictLock: cfg.OnEvictLock,
	}
	if tokens {
		c.prefix *= 4
	}
	for i := range c.shards {
		c.shards[i] = newShard(tokens)
	}
	return c, nil
}

// shardOf picks the shard of a text by a hash of its first K bytes.
func (c *core) shardOf(key []byte) *shard {
	if c.shardMask == 0 {
		return c.shards[0]
	}
	if len(key) > c.prefix {
		key = key[:c.prefix]
	}
	return c.shards[xxh3.Hash(key)&c.shardMask]
}

func (c *core) match(key []byte, dst []Tenant) Match {
	s := c.shardOf(key)
	s.mu.RLock()
	d := s.descend(key)
	matched := s.matchedUnits(d)
	var ts [MaxMatchTenants]Tenant
	var stamps [MaxMatchTenants]int64
	k := 0
	if h := d.holder(); h != 0 {
		k = s.recentTenants(h, &ts, &stamps, nil)
	}
	s.mu.RUnlock()
	m := Match{MatchedChars: matched, InputChars: matched + countUnits(key[d.consumed():], c.tokens)}
	m.Tenants = append(dst[:0], ts[:k]...)
	return m
}

// consumed is how many bytes of the text the descent matched.
func (d descent) consumed() int { return d.pos + d.partLen }

// matchAndInsert is the one-descent hot path. With ch nil it inserts for fixed.
func (c *core) matchAndInsert(key []byte, now int64, ch Chooser, fixed Tenant) Result {
	s := c.shardOf(key)
	s.mu.Lock()
	defer s.mu.Unlock() // a Chooser that panics must not leave the shard locked
	d := s.descend(key)
	matched := s.matchedUnits(d)
	tail := countUnits(key[d.consumed():], c.tokens)
	r := Result{MatchedChars: matched, InputChars: matched + tail, Tenant: fixed, Inserted: true}
	if ch != nil {
		m := Match{MatchedChars: matched, InputChars: r.InputChars}
		k := 0
		if live, ok := ch.(LiveChooser); ok {
			m.MatchedChars, k = s.liveMatch(d, matched, live)
		} else if h := d.holder(); h != 0 {
			k = s.recentTenants(h, &s.chosen, &s.chosenStamps, nil)
		}
		m.Tenants, m.Stamps = s.chosen[:k:k], s.chosenStamps[:k:k]
		r.Tenant, r.Inserted = ch.Choose(m)
	}
	if r.Inserted {
		s.insertFrom(d, key, matched, tail, r.Tenant, now)
	}
	return r
}

// liveMatch walks from the deepest node of the match d found (matched characters
// long) up to the first node with a tenant live reports live, and returns the
// length of that node's prefix and how many live tenants it wrote to s.chosen (and
// their stamps to s.chosenStamps); 0 and 0 when no node has one.
func (s *shard) liveMatch(d descent, matched int, live LiveChooser) (int, int) {
	id := d.holder()
	for id != 0 && id != rootID {
		if k := s.recentTenants(id, &s.chosen, &s.chosenStamps, live); k > 0 {
			return matched, k
		}
		id = s.nodes[id].parent
		matched = int(s.nodes[id].depth)
	}
	return 0, 0
}

func (c *core) removeTenant(t Tenant) int64 {
	var n int64
	for _, s := range c.shards {
		s.mu.Lock()
		n += s.removeTenant(t)
		s.mu.Unlock()
	}
	return n
}

func (c *core) size() int64 {
	var n int64
	for _, s := range c.shards {
		n += s.sizeMirror.Load()
	}
	return n
}

func (c *core) stats() Stats {
	var st Stats
	for _, s := range c.shards {
		s.mu.RLock()
		st.Size += s.size
		st.StoredChars += s.stored
		st.Nodes += int64(s.live - 1)
		st.EdgeBytes += s.bytes.handedBytes() - s.bytes.freeBytes
		st.FreeBytes += s.bytes.freeBytes
		st.MemoryBytes += s.memoryBytes()
		s.mu.RUnlock()
	}
	return st
}

func (c *core) tenantChars(t Tenant) int64 {
	var n int64
	for _, s := range c.shards {
		s.mu.RLock()
		if int(t) < len(s.tenantChars) {
			n += s.tenantChars[t]
		}
		s.mu.RUnlock()
	}
	return n
}

// Stats describes a tree's contents and the memory its arenas hold.
type Stats struct {
	// Size is the tenant-weighted character count Evict compares with its budget.
	Size int64
	// StoredChars counts every stored character once, however many tenants hold it.
	StoredChars int64
	// Nodes is the number of edges.
	Nodes int64
	// EdgeBytes is the bytes of live edges; FreeBytes are released and reusable.
	EdgeBytes, FreeBytes int64
	// MemoryBytes is the capacity of every arena: nodes, child table, edge bytes,
	// tenant sets.
	MemoryBytes int64
}
