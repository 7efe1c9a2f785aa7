package radix

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// model is the naive reference: for each shard and tenant, every prefix (cut at a
// character boundary) of every text inserted for the tenant, with the newest stamp.
// Matching tries every prefix of the input, longest first. The shard a text lands
// in is the one piece of the tree it borrows: prefixes are only shared within a
// shard (see Config.ShardPrefix).
type model struct {
	c    *core
	held map[int]map[Tenant]map[string]int64
}

func newModel(c *core) *model {
	return &model{c: c, held: map[int]map[Tenant]map[string]int64{}}
}

func (m *model) shardIndex(key []byte) int {
	s := m.c.shardOf(key)
	return slices.Index(m.c.shards, s)
}

// boundaries lists the byte offsets that end a character (token) of key, ascending.
func boundaries(key []byte, tokens bool) []int {
	var out []int
	if tokens {
		for b := 4; b <= len(key); b += 4 {
			out = append(out, b)
		}
		return out
	}
	for i := 0; i < len(key); {
		_, w := utf8.DecodeRune(key[i:])
		i += w
		out = append(out, i)
	}
	return out
}

func (m *model) insert(key []byte, t Tenant, now int64) {
	sh := m.shardIndex(key)
	if m.held[sh] == nil {
		m.held[sh] = map[Tenant]map[string]int64{}
	}
	if m.held[sh][t] == nil {
		m.held[sh][t] = map[string]int64{}
	}
	prefixes := m.held[sh][t]
	for _, b := range boundaries(key, m.c.tokens) {
		p := string(key[:b])
		if old, ok := prefixes[p]; !ok || old < now {
			prefixes[p] = now
		}
	}
}

func (m *model) match(key []byte) (Match, []TenantStamp) {
	bs := boundaries(key, m.c.tokens)
	res := Match{InputChars: len(bs)}
	sh := m.held[m.shardIndex(key)]
	for i := len(bs) - 1; i >= 0; i-- {
		p := key[:bs[i]]
		var holders []TenantStamp
		for t, prefixes := range sh {
			if st, ok := prefixes[string(p)]; ok {
				holders = append(holders, TenantStamp{t, st})
			}
		}
		if len(holders) == 0 {
			continue
		}
		slices.SortFunc(holders, func(a, b TenantStamp) int {
			if c := cmp.Compare(b.Stamp, a.Stamp); c != 0 {
				return c
			}
			return cmp.Compare(a.Tenant, b.Tenant)
		})
		res.MatchedChars = i + 1
		for _, h := range holders[:min(len(holders), MaxMatchTenants)] {
			res.Tenants = append(res.Tenants, h.Tenant)
		}
		return res, holders
	}
	return res, nil
}

func (m *model) removeTenant(t Tenant) int64 {
	var n int64
	for _, sh := range m.held {
		n += int64(len(sh[t]))
		delete(sh, t)
	}
	return n
}

func (m *model) size() int64 {
	var n int64
	for _, sh := range m.held {
		for _, prefixes := range sh {
			n += int64(len(prefixes))
		}
	}
	return n
}

func (m *model) stored() int64 {
	var n int64
	for _, sh := range m.held {
		all := map[string]bool{}
		for _, prefixes := range sh {
			for p := range prefixes {
				all[p] = true
			}
		}
		n += int64(len(all))
	}
	return n
}

// content is the model's state in a comparable form: "shard|tenant|prefix" → stamp.
type content map[string]int64

func contentKey(sh int, t Tenant, p string) string { return fmt.Sprintf("%d|%d|%q", sh, t, p) }

func (m *model) content() content {
	out := content{}
	for sh, tenants := range m.held {
		for t, prefixes := range tenants {
			for p, st := range prefixes {
				out[contentKey(sh, t, p)] = st
			}
		}
	}
	return out
}

// treeContent reads the tree through ReadPage, in pages of at most pageBytes, and
// expands every entry to all its prefixes: the newest stamp of any entry a prefix
// is part of is the stamp the tree holds for it.
func treeContent(c *core, pageBytes int) (content, int) {
	out := content{}
	var p Page
	pages := 0
	for cur := Cursor(0); cur != CursorDone; {
		cur = c.readPage(cur, pageBytes, &p)
		pages++
		for i := 0; i < p.Len(); i++ {
			path := p.pathBytes(i)
			for _, b := range boundaries(path, c.tokens) {
				for _, ts := range p.Tenants(i) {
					k := contentKey(int(p.shards[i]), ts.Tenant, string(path[:b]))
					if old, ok := out[k]; !ok || old < ts.Stamp {
						out[k] = ts.Stamp
					}
				}
			}
		}
	}
	return out, pages
}

// adopt replaces the model's state with the given content (after an eviction whose
// exact cut the model does not predict; the checks in checkEvict bound it).
func (m *model) adopt(ct content) {
	m.held = map[int]map[Tenant]map[string]int64{}
	for k, st := range ct {
		var sh int
		var t Tenant
		var q string
		if _, err := fmt.Sscanf(k, "%d|%d|%q", &sh, &t, &q); err != nil {
			panic(err)
		}
		if m.held[sh] == nil {
			m.held[sh] = map[Tenant]map[string]int64{}
		}
		if m.held[sh][t] == nil {
			m.held[sh][t] = map[string]int64{}
		}
		m.held[sh][t][q] = st
	}
}

// diff describes how two contents differ, or returns "".
func diff(want, got content) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			out = append(out, "missing "+k)
		} else if g != want[k] {
			out = append(out, fmt.Sprintf("stamp of %s: %d, want %d", k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			out = append(out, "unexpected "+k)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("... %d more", len(out)-8))
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}
