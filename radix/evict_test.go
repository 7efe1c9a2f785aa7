package radix

import (
	"fmt"
	"testing"
)

// TestEvictReportsEachLockHold: Config.OnEvictLock hears every shard lock Evict takes, taken
// then released, one scan hold per shard per round, and at least one removal hold per
// EvictSliceNodes segments dropped.
func TestEvictReportsEachLockHold(t *testing.T) {
	type event struct{ scan, held bool }
	var events []event
	cfg := Config{Shards: 4, ShardPrefix: 2, EvictSliceNodes: 2, OnEvictLock: func(scan, held bool) {
		events = append(events, event{scan, held})
	}}
	tr := newText(t, cfg)
	for i := range 40 {
		tr.Insert(fmt.Appendf(nil, "%02d conversation %d", i, i), Tenant(i%3), int64(i+1))
	}
	st := tr.Evict(0)
	if st.After != 0 || st.Segments == 0 {
		t.Fatalf("Evict(0): %+v, want every segment dropped", st)
	}
	scans, removals := 0, 0
	for i := 0; i < len(events); i += 2 {
		if i+1 >= len(events) || !events[i].held || events[i+1].held || events[i].scan != events[i+1].scan {
			t.Fatalf("hold %d: events %v, want a lock taken then released", i/2, events[i:min(i+2, len(events))])
		}
		if events[i].scan {
			scans++
		} else {
			removals++
		}
	}
	if scans != cfg.Shards*st.Rounds {
		t.Fatalf("%d scan holds for %d shards and %d rounds, want one per shard per round", scans, cfg.Shards, st.Rounds)
	}
	if want := (st.Segments + cfg.EvictSliceNodes - 1) / cfg.EvictSliceNodes; removals < want {
		t.Fatalf("%d removal holds for %d segments in slices of %d, want at least %d", removals, st.Segments, cfg.EvictSliceNodes, want)
	}
}
