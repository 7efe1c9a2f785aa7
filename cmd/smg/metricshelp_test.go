package main

import (
	"bytes"
	"slices"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

func TestMetricsHaveHelpText(t *testing.T) {
	metrics.ExposeMetadata(true)
	t.Cleanup(func() { metrics.ExposeMetadata(false) })
	set := metrics.NewSet()
	set.GetOrCreateCounter(`smg_router_requests_total{model="m"}`).Inc()
	set.GetOrCreatePrometheusHistogram(`smg_router_ttft_seconds{model="m"}`).Update(0.1)
	set.GetOrCreateCounter(`smg_not_documented_total`).Inc()
	var raw, out bytes.Buffer
	set.WritePrometheus(&raw)
	if err := writeWithHelp(&out, raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# HELP smg_router_requests_total " + metricHelp["smg_router_requests_total"] + "\n# TYPE smg_router_requests_total counter\n",
		"# HELP smg_router_ttft_seconds " + metricHelp["smg_router_ttft_seconds"] + "\n# TYPE smg_router_ttft_seconds histogram\n",
		`smg_router_requests_total{model="m"} 1` + "\n",
	} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Fatalf("no %q in\n%s", want, out.String())
		}
	}
	if got := familiesWithoutHelp(out.String()); !slices.Equal(got, []string{"smg_not_documented_total"}) {
		t.Fatalf("families without help text: %v, want only the undocumented one", got)
	}
	if out.Len() <= raw.Len() {
		t.Fatal("nothing was added")
	}
}
