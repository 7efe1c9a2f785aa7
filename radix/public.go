package radix

import "unsafe"

// TextTree is a prefix tree over text, counted in Unicode code points (each byte
// of invalid UTF-8 counts as one character). It is safe for concurrent use.
type TextTree struct{ tree }

// NewTextTree returns an empty text tree.
func NewTextTree(cfg Config) (*TextTree, error) { return newTree[TextTree](cfg, false) }

// Match finds the longest stored prefix of text. The tenants are appended to
// dst[:0], which should have capacity MaxMatchTenants to keep the call free of
// allocations. It changes nothing in the tree.
func (t *TextTree) Match(text []byte, dst []Tenant) Match { return t.c.match(text, dst) }

// MatchAndInsert finds the longest stored prefix of text, lets ch choose a tenant
// from it, inserts the rest of text for that tenant and stamps the tenant's use of
// the whole path with now. It does one descent under one shard lock. text is only
// read during the call: the tree copies what it stores.
func (t *TextTree) MatchAndInsert(text []byte, now int64, ch Chooser) Result {
	return t.c.matchAndInsert(text, now, ch, 0)
}

// Insert stores text for tenant and stamps its use of the whole path with now.
func (t *TextTree) Insert(text []byte, tenant Tenant, now int64) Result {
	return t.c.matchAndInsert(text, now, nil, tenant)
}

// TokenTree is a prefix tree over token ids, counted in tokens. It is safe for
// concurrent use. Its methods are TextTree's with tokens for text: counts, sizes and
// budgets are in tokens, and ReadPage's paths are read with Page.Tokens.
type TokenTree struct{ tree }

// NewTokenTree returns an empty token tree.
func NewTokenTree(cfg Config) (*TokenTree, error) { return newTree[TokenTree](cfg, true) }

// tokenBytes views tokens as their native-endian bytes without copying.
func tokenBytes(tokens []uint32) []byte {
	if len(tokens) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens))
}

// Match is TextTree.Match for tokens.
func (t *TokenTree) Match(tokens []uint32, dst []Tenant) Match {
	return t.c.match(tokenBytes(tokens), dst)
}

// MatchAndInsert is TextTree.MatchAndInsert for tokens.
func (t *TokenTree) MatchAndInsert(tokens []uint32, now int64, ch Chooser) Result {
	return t.c.matchAndInsert(tokenBytes(tokens), now, ch, 0)
}

// Insert is TextTree.Insert for tokens.
func (t *TokenTree) Insert(tokens []uint32, tenant Tenant, now int64) Result {
	return t.c.matchAndInsert(tokenBytes(tokens), now, nil, tenant)
}

// tree holds the methods both trees share: they read no key, so characters and tokens are
// counted alike.
type tree struct{ c *core }

// newTree returns an empty TextTree or TokenTree (tokens says which core it needs).
func newTree[T ~struct{ tree }](cfg Config, tokens bool) (*T, error) {
	c, err := newCore(cfg, tokens)
	if err != nil {
		return nil, err
	}
	return &T{tree{c}}, nil
}

// RemoveTenant purges tenant from every node and detaches the nodes no tenant
// holds any more. It returns the tenant-weighted characters removed.
func (t tree) RemoveTenant(tenant Tenant) int64 { return t.c.removeTenant(tenant) }

// Evict trims the tree to at most budget tenant-weighted characters; see
// EvictStats for what it reports.
func (t tree) Evict(budget int64) EvictStats { return t.c.evict(budget) }

// Size is the tenant-weighted character count (what Evict compares with its
// budget), read without locking.
func (t tree) Size() int64 { return t.c.size() }

// TenantChars is the number of characters tenant holds.
func (t tree) TenantChars(tenant Tenant) int64 { return t.c.tenantChars(tenant) }

// Stats reports the contents and arena memory of the tree.
func (t tree) Stats() Stats { return t.c.stats() }

// ReadPage appends to p the entries after cursor; see Page.
func (t tree) ReadPage(cursor Cursor, maxBytes int, p *Page) Cursor {
	return t.c.readPage(cursor, maxBytes, p)
}
