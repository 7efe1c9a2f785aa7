package main

import (
	"sync/atomic"

	"github.com/smg-go/smg/mesh"
	"github.com/smg-go/smg/mesh/wire"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

// meshObserver hands every prefix cache_aware records to the mesh once it runs. The policies
// are built before the mesh starts (it must start after the static workers are registered),
// hence the atomic indirection.
type meshObserver struct{ m atomic.Pointer[mesh.Mesh] }

func (o *meshObserver) ObserveText(model string, text []byte, w *worker.Worker) {
	if m := o.m.Load(); m != nil {
		m.PublishTree(model, wire.TreeText, text, w.URL)
	}
}

func (o *meshObserver) ObserveTokens(model string, tokens []uint32, w *worker.Worker) {
	if m := o.m.Load(); m != nil {
		m.PublishTokens(model, tokens, w.URL)
	}
}

// cacheAwareTrees returns the trees of the cache_aware instance routing model, or nils when
// the model's policy is another one.
func cacheAwareTrees(router *policy.Router) func(model string) (*radix.TextTree, *radix.TokenTree) {
	return func(model string) (*radix.TextTree, *radix.TokenTree) {
		rt, ok := router.Current().Lookup([]byte(model))
		if !ok {
			return nil, nil
		}
		if b, ok := policy.Unwrap(rt.Builder).(*cacheaware.Builder); ok {
			return b.TextTree(), b.TokenTree()
		}
		return nil, nil
	}
}
