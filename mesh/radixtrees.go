package mesh

import (
	"github.com/smg-go/smg/mesh/wire"
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

// RadixTrees implements Trees over the cache_aware policy's per-model radix trees
// (cacheaware.Builder's TextTree and TokenTree). Tenants are worker indexes, which differ
// between routers, so paths travel with worker URLs and are mapped through the current
// registry snapshot.
type RadixTrees struct {
	// Lookup returns model's trees, or nils when this router has no cache_aware policy for
	// the model.
	Lookup func(model string) (*radix.TextTree, *radix.TokenTree)
	// Snapshot returns the registry's current snapshot.
	Snapshot func() *worker.Snapshot
	// Stamp returns the LRU stamp for a path learned from a peer. Nil stamps 1: older than
	// anything this router routed itself, so eviction drops peers' hints first.
	Stamp func() int64
}

var _ Trees = (*RadixTrees)(nil)

func (r *RadixTrees) stamp() int64 {
	if r.Stamp == nil {
		return 1
	}
	return r.Stamp()
}

// Apply implements Trees.
func (r *RadixTrees) Apply(model string, kind wire.TreeKind, path []byte, workerURL string) bool {
	text, tokens := r.Lookup(model)
	w := r.Snapshot().ByURL(workerURL)
	if w == nil || len(path) == 0 {
		return true
	}
	var buf [radix.MaxMatchTenants]radix.Tenant
	switch kind {
	case wire.TreeText:
		if text == nil {
			return true
		}
		m := text.Match(path, buf[:0])
		text.Insert(path, radix.Tenant(w.Index), r.stamp())
		return m.MatchedChars == m.InputChars
	case wire.TreeTokens:
		toks := wire.Tokens(nil, path)
		if tokens == nil || toks == nil {
			return true
		}
		m := tokens.Match(toks, buf[:0])
		tokens.Insert(toks, radix.Tenant(w.Index), r.stamp())
		return m.MatchedChars == m.InputChars
	}
	return true
}

// ReadPage implements Trees.
func (r *RadixTrees) ReadPage(model string, kind wire.TreeKind, cursor uint64, maxBytes int, emit func(path []byte, workerURLs []string)) uint64 {
	text, tokens := r.Lookup(model)
	var page radix.Page
	var next radix.Cursor
	switch {
	case kind == wire.TreeText && text != nil:
		next = text.ReadPage(radix.Cursor(cursor), maxBytes, &page)
	case kind == wire.TreeTokens && tokens != nil:
		next = tokens.ReadPage(radix.Cursor(cursor), maxBytes, &page)
	default:
		return wire.CursorDone
	}
	snap := r.Snapshot()
	byIndex := make(map[radix.Tenant]string, len(snap.Workers))
	for _, w := range snap.Workers {
		byIndex[radix.Tenant(w.Index)] = w.URL
	}
	var urls []string
	for i := 0; i < page.Len(); i++ {
		urls = urls[:0]
		for _, ts := range page.Tenants(i) {
			if u, ok := byIndex[ts.Tenant]; ok {
				urls = append(urls, u)
			}
		}
		if len(urls) > 0 {
			emit(page.Text(i), urls)
		}
	}
	return uint64(next)
}
