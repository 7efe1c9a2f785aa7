package cacheaware

import (
	"testing"

	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker/workertest"
)

// TestDoubtfulHolderKeptWhenNoWorkerIsFree checks where the doubtful-holder spill may send a
// request: only to a worker with nothing awaiting its first token. When every engine has a
// prefill queued (a saturated fleet), spilling a doubtful hit costs the fleet a whole
// prefill of the prefix and waits behind another queue anyway; at the shared-prefix case's
// saturation the rule sent ~5% of requests off their sole holder, most to engines that then
// computed the prefix anew (per-request join of the gateway's decisions and the engines'
// records, docs/benchmarks.md §3 run Q9), which is where the hit rate sat at the 3× edge.
func TestDoubtfulHolderKeptWhenNoWorkerIsFree(t *testing.T) {
	for _, c := range []struct {
		name          string
		otherAwaiting int // tokens awaiting a first token on the other worker
		spill         bool
	}{
		{"the other worker has nothing awaiting: spill", 0, true},
		{"the other worker has a prefill awaiting too: keep the holder", 500, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := policytest.NewFleet(t, 2, "m")
			reportCapacity(f.Workers, 4000) // horizon 8,000 clock tokens
			b, set := newBuilder(t, DefaultConfig())
			p := b.Build(f.Group("m"))
			turn := distinctText(9999, 500)
			holder := pick(t, p, text(turn))
			for i := range 22 { // 5,500 more tokens: the holder's stamp is 6,000 old, doubt 0.5
				pick(t, p, text(distinctText(i, 250)))
			}
			other := f.Workers[0]
			if other == holder {
				other = f.Workers[1]
			}
			workertest.NoteAwaiting(holder, 3000) // a queue of prefills on the holder
			defer workertest.NoteFirstToken(holder, 3000)
			if c.otherAwaiting > 0 {
				workertest.NoteAwaiting(other, c.otherAwaiting)
				defer workertest.NoteFirstToken(other, c.otherAwaiting)
			}
			spills := branch(set, BranchSpill)
			got := pick(t, p, text(turn+" and the next turn"))
			if spilled := got != holder; spilled != c.spill || branch(set, BranchSpill)-spills != boolCount(c.spill) {
				t.Fatalf("went to %s (holder %s), spill counter +%d: want spill=%v", got.URL, holder.URL, branch(set, BranchSpill)-spills, c.spill)
			}
		})
	}
}
