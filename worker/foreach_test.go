package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// TestForEachVisitsEveryItemOnceWithinTheLimit: each item is handed to do exactly once, never
// on more than limit goroutines at a time, and a limit below 1 still makes progress.
func TestForEachVisitsEveryItemOnceWithinTheLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 3, 500} {
		items := make([]int, 200)
		for i := range items {
			items[i] = i
		}
		var mu sync.Mutex
		seen := map[int]int{}
		var running, peak atomic.Int64
		ForEach(context.Background(), limit, items, func(i int) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			running.Add(-1)
		})
		if len(seen) != len(items) {
			t.Fatalf("limit %d: %d items visited, want %d", limit, len(seen), len(items))
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("limit %d: item %d visited %d times", limit, i, n)
			}
		}
		if want := int64(max(limit, 1)); peak.Load() > want {
			t.Errorf("limit %d: %d calls ran at once, want at most %d", limit, peak.Load(), want)
		}
	}
}

// TestForEachStartsNothingOnceTheContextIsDone: with ctx already done, do is never called.
func TestForEachStartsNothingOnceTheContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int64
	ForEach(ctx, 4, make([]int, 100), func(int) { calls.Add(1) })
	if calls.Load() != 0 {
		t.Fatalf("%d calls after the context was done, want 0", calls.Load())
	}
}
