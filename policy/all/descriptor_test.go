package all

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/bucket"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/consistenthash"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/passthrough"
	"github.com/smg-go/smg/policy/poweroftwo"
)

// TestAbilitiesAreTheSpecsFacts: the facts the table used to keep as lists of names now come
// from the policies' Builders, and say the same (spec: Load Signals, PD and EPD Legs).
func TestAbilitiesAreTheSpecsFacts(t *testing.T) {
	var loads, keys, maintained []string
	legs := map[string][]policy.Leg{}
	for _, e := range table {
		if policy.Can[policy.LoadReader](e.Facts) {
			loads = append(loads, e.Name)
		}
		if policy.Can[policy.KeyReader](e.Facts) {
			keys = append(keys, e.Name)
		}
		if policy.Can[policy.Maintainer](e.Facts) {
			maintained = append(maintained, e.Name)
		}
		for _, l := range []policy.Leg{policy.LegRegular, policy.LegPrefill, policy.LegDecode} {
			if e.RoutesLeg(l) {
				legs[e.Name] = append(legs[e.Name], l)
			}
		}
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"load readers", loads, []string{cacheaware.Name, leastload.Name, poweroftwo.Name}},
		{"routing-key readers", keys, []string{consistenthash.Name, manual.Name}},
		{"maintained", maintained, []string{bucket.Name, cacheaware.Name, manual.Name}},
	} {
		slices.Sort(c.got)
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if got := legs[bucket.Name]; !slices.Equal(got, []policy.Leg{policy.LegPrefill}) {
		t.Errorf("bucket routes %v, want the prefill leg only", got)
	}
	if got := legs[passthrough.Name]; !slices.Equal(got, []policy.Leg{policy.LegRegular}) {
		t.Errorf("passthrough routes %v, want the regular leg only", got)
	}
	if got := legs[leastload.Name]; len(got) != 3 {
		t.Errorf("least_load routes %v, want every leg", got)
	}
}

// eleventh is a policy the table does not know: one package's worth of abilities.
type eleventh struct{ maintained []time.Time }

func (*eleventh) Name() string                           { return "eleventh" }
func (*eleventh) Build(policy.Group) policy.Picker       { return nil }
func (*eleventh) ReadsLoad()                             {}
func (*eleventh) RoutesLeg(l policy.Leg) bool            { return l == policy.LegDecode }
func (b *eleventh) Maintain(now time.Time)               { b.maintained = append(b.maintained, now) }
func (b *eleventh) MaintainWeakly() func(time.Time) bool { return policy.Weakly(b) }

// addEleventh adds the eleventh policy's line to the table for the test, and returns the
// Builder its line builds.
func addEleventh(t *testing.T) *eleventh {
	saved := table
	t.Cleanup(func() { table = saved })
	built := &eleventh{}
	table = append(slices.Clone(table), bind(policy.Describe("eleventh", struct{}{}, func(struct{}, policy.Shared) *eleventh { return built }), nil))
	return built
}

// TestAnEleventhPolicyIsOneTableLine: adding a line is all it takes for every check to know
// the new policy's abilities: load polling, PD legs, maintenance.
func TestAnEleventhPolicyIsOneTableLine(t *testing.T) {
	built := addEleventh(t)

	if !LoadAware("eleventh") || !slices.Contains(Names(), "eleventh") {
		t.Fatal("the new policy is not known as load-aware")
	}
	if err := CheckPolicy("eleventh", false); err == nil {
		t.Fatal("a decode-only policy was accepted outside PD mode")
	}
	if _, err := PDPolicies("round_robin", "", "eleventh"); err != nil {
		t.Fatalf("the decode leg refused a decode policy: %v", err)
	}
	if _, err := PDPolicies("round_robin", "eleventh", ""); err == nil {
		t.Fatal("the prefill leg accepted a decode-only policy")
	}
	m := NewMaintenance()
	b, err := builders(t, func(c *Config) { c.Maintenance, c.PDMode = m, true })("eleventh", true)
	if err != nil || b != policy.Builder(built) {
		t.Fatalf("built %v, %v", b, err)
	}
	m.Maintain(time.Unix(1, 0))
	if len(built.maintained) != 1 {
		t.Fatalf("maintained %d times, want 1", len(built.maintained))
	}
}

// TestMaintenanceRunsOnItsClock: Run maintains every MaintenanceInterval of the clock it is
// given, and stops with its context.
func TestMaintenanceRunsOnItsClock(t *testing.T) {
	built := addEleventh(t)
	m, clk := NewMaintenance(), clock.NewFake()
	if _, err := builders(t, func(c *Config) { c.Maintenance, c.PDMode = m, true })("eleventh", true); err != nil {
		t.Fatal(err)
	}
	maintained := func() int {
		m.round.Lock() // Maintain holds it for the whole round
		defer m.round.Unlock()
		return len(built.maintained)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx, clk); close(done) }()
	testutil.Eventually(t, "Run's ticker", func() bool { return clk.Waiting() == 1 })
	if n := maintained(); n != 0 {
		t.Fatalf("maintained %d times before the clock moved", n)
	}
	clk.Advance(MaintenanceInterval)
	testutil.Eventually(t, "a round one interval later", func() bool { return maintained() == 1 })
	if got := built.maintained[0]; !got.Equal(clock.FakeEpoch.Add(MaintenanceInterval)) {
		t.Fatalf("maintained at %v, want the fake clock's time", got)
	}
	cancel()
	<-done
	if clk.Waiting() != 0 {
		t.Fatal("Run left its ticker running")
	}
}
