package policy

import "github.com/smg-go/smg/worker"

// TreeObserver is told of every prefix a cache-aware policy records for a worker (after a
// pick, and after a retry moved the request), so that the mesh can send it to the other
// routers. The slices are views valid only during the call; an observer that keeps them must
// copy. It runs on the request path: it must be quick and must not block.
type TreeObserver interface {
	ObserveText(model string, text []byte, w *worker.Worker)
	ObserveTokens(model string, tokens []uint32, w *worker.Worker)
}

// Unwrap returns the policy instance under any wrappers (sticky sessions), for callers that
// need the concrete policy, such as the mesh reading cache_aware's trees.
func Unwrap(b Builder) Builder {
	for {
		w, ok := b.(interface{ Inner() Builder })
		if !ok {
			return b
		}
		b = w.Inner()
	}
}
