package worker

import (
	"context"
	"sync"
	"sync/atomic"
)

// ForEach calls do on every item of items, on at most limit goroutines (at least 1), and
// returns when all are done: no goroutine outlives the call and none is started per item, so
// a round of probes or polls over a large fleet costs limit goroutines. Once ctx is done no
// further item is started.
func ForEach[T any](ctx context.Context, limit int, items []T, do func(T)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(limit, 1), len(items)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(items) || ctx.Err() != nil {
					return
				}
				do(items[i])
			}
		})
	}
	wg.Wait()
}
