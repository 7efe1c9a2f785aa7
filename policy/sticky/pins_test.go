package sticky

import (
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/policy/policytest"
)

// TestIdlePinsAreSweptWithinTwiceTheMaxIdleTime: a table whose max idle time is under
// PinEvictionInterval sweeps every max idle time, so a key idle for 1 s is gone 2 s after its
// last use, not a minute later; a sub-second max idle time is one second, not "forever".
func TestIdlePinsAreSweptWithinTwiceTheMaxIdleTime(t *testing.T) {
	for _, idle := range []time.Duration{time.Second, 500 * time.Millisecond} {
		t0 := time.Unix(1_700_000_000, 0)
		set := metrics.NewSet()
		g := set.GetOrCreateGauge("entries", nil)
		tab := NewPinTable(t0, idle, DefaultMaxPins, g)
		w := policytest.NewFleet(t, 1, "m").Workers[0]
		tab.Pin([]byte("k"), w)
		if g.Get() != 1 {
			t.Fatalf("entries %v after one pin", g.Get())
		}
		var swept bool
		for s := 1; s <= 2; s++ {
			if lost := tab.Maintain(t0.Add(time.Duration(s) * time.Second)); lost[w] == 1 {
				swept = true
			}
		}
		if !swept || g.Get() != 0 {
			t.Fatalf("max idle %v: key still pinned 2 s after its last use (entries %v)", idle, g.Get())
		}
	}
}
