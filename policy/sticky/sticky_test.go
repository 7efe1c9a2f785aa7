package sticky_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/roundrobin"
	"github.com/smg-go/smg/policy/sticky"
	"github.com/smg-go/smg/worker"
)

// recordingBuilder wraps a builder so tests see Record and Maintain calls reach it.
type recordingBuilder struct {
	policy.Builder
	recorded []*worker.Worker
	maintain []time.Time
}

func (b *recordingBuilder) Build(g policy.Group) policy.Picker {
	return &recordingPicker{Picker: b.Builder.Build(g), b: b}
}
func (b *recordingBuilder) Maintain(now time.Time) { b.maintain = append(b.maintain, now) }

type recordingPicker struct {
	policy.Picker
	b *recordingBuilder
}

func (p *recordingPicker) Record(_ *policy.Request, w *worker.Worker) {
	p.b.recorded = append(p.b.recorded, w)
}

func TestStickySessionsOnTopOfAPolicy(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f := policytest.NewFleet(t, 4, "m")
	inner := &recordingBuilder{Builder: roundrobin.New()}
	cfg := sticky.DefaultConfig()
	cfg.Metrics = metrics.NewSet()
	sb := sticky.NewBuilder(inner, cfg, testutil.NewRand(1), t0)
	if sb.Name() != roundrobin.Name {
		t.Fatalf("name %q: the sticky wrapper must report the real policy", sb.Name())
	}
	p := sb.Build(f.Group("m"))

	// Keyless requests: plain round robin.
	var rotation []*worker.Worker
	for range 4 {
		res, err := p.Pick(&policy.Request{})
		if err != nil {
			t.Fatal(err)
		}
		rotation = append(rotation, res.Worker)
	}
	for i := range rotation {
		if rotation[i] != f.Workers[i] {
			t.Fatalf("keyless pick %d went to %s, want round robin's %s", i, rotation[i].URL, f.Workers[i].URL)
		}
	}
	// Each session starts where the policy puts it (delegate), then sticks, across turns.
	start := map[string]*worker.Worker{}
	for s := range 8 {
		res, err := p.Pick(&policy.Request{Rid: fmt.Appendf(nil, "s%d_t1", s)})
		if err != nil {
			t.Fatal(err)
		}
		start[fmt.Sprint(s)] = res.Worker
	}
	for turn := 2; turn <= 5; turn++ {
		for s := range 8 {
			res, err := p.Pick(&policy.Request{Rid: fmt.Appendf(nil, "s%d_t%d", s, turn)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Worker != start[fmt.Sprint(s)] {
				t.Fatalf("session %d turn %d moved to %s", s, turn, res.Worker.URL)
			}
		}
	}
	// The round robin placed the 8 sessions on all 4 workers.
	used := map[*worker.Worker]bool{}
	for _, w := range start {
		used[w] = true
	}
	if len(used) != 4 {
		t.Fatalf("sessions were placed on %d workers, want the policy's spread over 4", len(used))
	}
	// A header key sticks too.
	res1, _ := p.Pick(&policy.Request{RoutingKey: []byte("tenant-7")})
	res2, _ := p.Pick(&policy.Request{RoutingKey: []byte("tenant-7")})
	if res1.Worker != res2.Worker {
		t.Fatal("header key did not stick")
	}
	if got := cfg.Metrics.GetOrCreateCounter(`smg_routing_key_source_total{source="rid"}`).Get(); got != 40 {
		t.Fatalf("rid source = %d, want 40", got)
	}
	if got := cfg.Metrics.GetOrCreateCounter(`smg_routing_key_source_total{source="header"}`).Get(); got != 2 {
		t.Fatalf("header source = %d, want 2", got)
	}
	// Record and Maintain reach the wrapped policy.
	p.(policy.Recorder).Record(&policy.Request{}, f.Workers[2])
	sb.Maintain(t0.Add(time.Second))
	if len(inner.recorded) != 1 || inner.recorded[0] != f.Workers[2] || len(inner.maintain) != 1 {
		t.Fatalf("recorded %v, maintained %v", inner.recorded, inner.maintain)
	}
}

func TestStickyKeyStrandedByUnavailableWorkerMovesAndReturns(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f := policytest.NewFleet(t, 3, "m")
	sb := sticky.NewBuilder(roundrobin.New(), sticky.DefaultConfig(), nil, t0)
	p := sb.Build(f.Group("m"))
	req := &policy.Request{Rid: []byte("conv_t1")}
	home, _ := p.Pick(req)
	f.SetStatus(home.Worker, worker.StatusNotReady)
	away, err := p.Pick(req)
	if err != nil || away.Worker == home.Worker {
		t.Fatalf("failover: %v %v", away.Worker, err)
	}
	f.SetStatus(home.Worker, worker.StatusReady)
	back, _ := p.Pick(req)
	if back.Worker != home.Worker {
		t.Fatalf("after recovery went to %s, want home %s", back.Worker.URL, home.Worker.URL)
	}
}

func TestStickyInFlightCapRespills(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f := policytest.NewFleet(t, 3, "m")
	loads := policy.NewKeyLoads()
	cfg := sticky.DefaultConfig()
	cfg.KeyLoads = loads
	cfg.Metrics = metrics.NewSet()
	p := sticky.NewBuilder(roundrobin.New(), cfg, testutil.NewRand(1), t0).Build(f.Group("m"))
	req := &policy.Request{Rid: []byte("conv_t1")}
	h, ok := policy.StickyKeyHash(req, true)
	if !ok {
		t.Fatal("no key hash")
	}
	home, _ := p.Pick(req)
	loads.Add(h, 1) // one request of the session in flight: under the cap
	if res, _ := p.Pick(req); res.Worker != home.Worker {
		t.Fatal("a session under the cap left its worker")
	}
	loads.Add(h, 1) // two in flight: the next request of the session goes elsewhere
	res, err := p.Pick(req)
	if err != nil || res.Worker == home.Worker {
		t.Fatalf("at the cap: %v, %v; want another worker than %s", res.Worker, err, home.Worker.URL)
	}
	if got := cfg.Metrics.GetOrCreateCounter(`smg_manual_policy_branch_total{branch="cap_respill"}`).Get(); got != 1 {
		t.Fatalf("cap_respill = %d", got)
	}
	// The pin moved to the better worker; with the session's requests done it stays there.
	loads.Add(h, -2)
	if again, _ := p.Pick(req); again.Worker != res.Worker {
		t.Fatalf("after the respill went to %s, want the new pin %s", again.Worker.URL, res.Worker.URL)
	}
	if loads.Get(h) != 0 {
		t.Fatal("counts do not balance")
	}
}

// TestConfigValidateRefusesAZeroCap: the cap is explicit (DefaultConfig sets it), and a zero or
// negative one is refused instead of meaning the default.
func TestConfigValidateRefusesAZeroCap(t *testing.T) {
	cfg := sticky.DefaultConfig()
	if cfg.InFlightCap != sticky.DefaultInFlightCap || cfg.Validate() != nil {
		t.Fatalf("DefaultConfig: cap %d, %v", cfg.InFlightCap, cfg.Validate())
	}
	for _, c := range []int{0, -1} {
		cfg.InFlightCap = c
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "give 1 or more") {
			t.Errorf("cap %d: %v", c, err)
		}
	}
	cfg = sticky.DefaultConfig()
	cfg.AssignmentMode = "nope"
	if cfg.Validate() == nil {
		t.Error("unknown assignment mode accepted")
	}
	cfg = sticky.DefaultConfig()
	if cfg.MaxPins != sticky.DefaultMaxPins {
		t.Fatalf("DefaultConfig: pin bound %d, want %d", cfg.MaxPins, sticky.DefaultMaxPins)
	}
	cfg.MaxPins = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "pin bound 0") {
		t.Errorf("a zero pin bound: %v, want it refused (zero is not the default)", err)
	}
}
