package radix

import "unsafe"

// TextTree is a prefix tree over text, counted in Unicode code points (each byte
// of invalid UTF-8 counts as one character). It is safe for concurrent use.
type TextTree struct{ c *core }

// NewTextTree returns an empty text tree.
func NewTextTree(cfg Config) (*TextTree, error) {
	c, err := newCore(cfg, false)
	if err != nil {
		return nil, err
	}
	return &TextTree{c}, nil
}

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

// RemoveTenant purges tenant from every node and detaches the nodes no tenant
// holds any more. It returns the tenant-weighted characters removed.
func (t *TextTree) RemoveTenant(tenant Tenant) int64 { return t.c.removeTenant(tenant) }

// Evict trims the tree to at most budget tenant-weighted characters; see
// EvictStats for what it reports.
func (t *TextTree) Evict(budget int64) EvictStats { return t.c.evict(budget) }

// Size is the tenant-weighted character count (what Evict compares with its
// budget), read without locking.
func (t *TextTree) Size() int64 { return t.c.size() }

// TenantChars is the number of characters tenant holds.
func (t *TextTree) TenantChars(tenant Tenant) int64 { return t.c.tenantChars(tenant) }

// Stats reports the contents and arena memory of the tree.
func (t *TextTree) Stats() Stats { return t.c.stats() }

// ReadPage appends to p the entries after cursor; see Page.
func (t *TextTree) ReadPage(cursor Cursor, maxBytes int, p *Page) Cursor {
	return t.c.readPage(cursor, maxBytes, p)
}

// TokenTree is a prefix tree over token ids, counted in tokens. It is safe for
// concurrent use.
type TokenTree struct{ c *core }

// NewTokenTree returns an empty token tree.
func NewTokenTree(cfg Config) (*TokenTree, error) {
	c, err := newCore(cfg, true)
	if err != nil {
		return nil, err
	}
	return &TokenTree{c}, nil
}

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

// RemoveTenant is TextTree.RemoveTenant.
func (t *TokenTree) RemoveTenant(tenant Tenant) int64 { return t.c.removeTenant(tenant) }

// Evict is TextTree.Evict, with the budget in tokens.
func (t *TokenTree) Evict(budget int64) EvictStats { return t.c.evict(budget) }

// Size is TextTree.Size in tokens.
func (t *TokenTree) Size() int64 { return t.c.size() }

// TenantChars is the number of tokens tenant holds.
func (t *TokenTree) TenantChars(tenant Tenant) int64 { return t.c.tenantChars(tenant) }

// Stats is TextTree.Stats; character counts are token counts.
func (t *TokenTree) Stats() Stats { return t.c.stats() }

// ReadPage is TextTree.ReadPage; read paths with Page.Tokens.
func (t *TokenTree) ReadPage(cursor Cursor, maxBytes int, p *Page) Cursor {
	return t.c.readPage(cursor, maxBytes, p)
}
