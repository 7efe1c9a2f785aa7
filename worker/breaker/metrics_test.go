package breaker

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
)

func exposition(set *metrics.Set) string {
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	return buf.String()
}

func TestMetricsFollowTheBreaker(t *testing.T) {
	set := metrics.NewSet()
	var b Breaker
	fake := clock.NewFake()
	m := NewMetrics(set, "http://10.0.0.7:8000", &b)
	cfg := testConfig()
	cfg.Clock = fake
	if err := b.Init(cfg, m.OnTransition); err != nil {
		t.Fatal(err)
	}
	const state = `smg_worker_cb_state{worker="http://10.0.0.7:8000"} `
	if out := exposition(set); !strings.Contains(out, state+"0\n") {
		t.Fatalf("closed breaker exported as:\n%s", out)
	}
	openBreaker(t, &b, fake.Nanos())
	if out := exposition(set); !strings.Contains(out, state+"1\n") {
		t.Fatalf("open breaker exported as:\n%s", out)
	}
	fake.Advance(5 * time.Second) // the gauge's read makes the lazy transition
	out := exposition(set)
	for _, want := range []string{
		state + "2\n",
		`smg_worker_cb_transitions_total{worker="http://10.0.0.7:8000",from="closed",to="open"} 1`,
		`smg_worker_cb_transitions_total{worker="http://10.0.0.7:8000",from="open",to="half_open"} 1`,
		`smg_worker_cb_transitions_total{worker="http://10.0.0.7:8000",from="half_open",to="closed"} 0`,
		`smg_worker_cb_transitions_total{worker="http://10.0.0.7:8000",from="half_open",to="open"} 0`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
	m.Unregister()
	if out := exposition(set); strings.Contains(out, "10.0.0.7") {
		t.Fatalf("series left after Unregister:\n%s", out)
	}
}
