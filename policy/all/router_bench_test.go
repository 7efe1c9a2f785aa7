package all

import (
	"fmt"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
)

// BenchmarkRouterUpdate measures the route table change of one worker joining or leaving a
// fleet of n workers serving one model: each op publishes the snapshot with the worker, then the one
// without it, alternately (so an op is one join or one departure), and, in the pick=1
// variant, picks once from the new table as the first request after a change does. cpu-ns/op
// is the loop's own CPU (policytest.CPUPerOp): wall time follows the shared machine's load.
func BenchmarkRouterUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, name := range []string{cacheaware.Name, leastload.Name} {
			for _, pick := range []bool{false, true} {
				b.Run(fmt.Sprintf("workers=%d/policy=%s/pick=%v", n, name, pick), func(b *testing.B) {
					f := policytest.NewFleet(b, n, "m")
					without := f.Reg.Current()
					f.Add("m", nil)
					with := f.Reg.Current()
					pc := DefaultConfig()
					pc.Logger = testutil.Quiet
					nb, err := NewBuilderFunc(pc)
					if err != nil {
						b.Fatal(err)
					}
					r, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: name, NewBuilder: nb, Logger: testutil.Quiet})
					if err != nil {
						b.Fatal(err)
					}
					req := &policy.Request{Model: []byte("m")}
					snaps := [2]*worker.Snapshot{with, without}
					r.Update(without)
					b.ReportAllocs()
					stop := policytest.CPUPerOp(b)
					i := 0
					for b.Loop() {
						r.Update(snaps[i&1])
						i++
						if pick {
							rt, _ := r.Current().Lookup(req.Model)
							if _, err := rt.Picker.Pick(req); err != nil {
								b.Fatal(err)
							}
						}
					}
					stop()
				})
			}
		}
	}
}
