package all

import (
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/worker"
)

// TestRebuildsKeepTheWatchBounded: 3,000 snapshots in a row, each with a picker built and
// picked from as the router does, one worker leaving or rejoining the group at each, leave
// every worker watched by at most one set per policy instance. Every picker is kept alive, so
// the count is bounded by the policies handing the watch over, not by garbage collection.
func TestRebuildsKeepTheWatchBounded(t *testing.T) {
	nb := builders(t, func(c *Config) {
		c.PDMode = true
		c.PowerOfTwo.LoadMetric = poweroftwo.MetricLeastRequests
	})
	for _, name := range Names() {
		b, err := nb(name, true)
		if err != nil {
			t.Fatal(err)
		}
		f := policytest.NewFleet(t, 64, "m")
		var kept []policy.Picker
		for k := range 3000 {
			ws := f.Workers
			if k%2 == 1 { // worker k%64 leaves; the next snapshot has it back
				i := k % len(f.Workers)
				ws = append(append([]*worker.Worker{}, f.Workers[:i]...), f.Workers[i+1:]...)
			}
			p := b.Build(f.Group("m", ws...))
			if _, err := p.Pick(&policy.Request{Text: []byte("hello")}); err != nil {
				t.Fatalf("%s: snapshot %d: %v", name, k, err)
			}
			kept = append(kept, p)
		}
		most := 0
		for _, w := range f.Workers {
			most = max(most, w.Watchers())
		}
		if most > 1 {
			t.Errorf("%s: after 3,000 snapshots a worker is watched by %d sets, want at most 1", name, most)
		}
		t.Logf("%s: at most %d watchers per worker after %d snapshots", name, most, len(kept))
	}
}
