package fastpath

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

func TestHTTPRequestSeriesOnlyForStatusesSeen(t *testing.T) {
	set := metrics.NewSet()
	m := newHTTPMetrics(set)
	var before bytes.Buffer
	set.WritePrometheus(&before)
	if strings.Contains(before.String(), "smg_http_requests_total") {
		t.Fatalf("request series before any request:\n%s", before.String())
	}
	m.observe(routeChat, 200, time.Millisecond)
	m.observe(routeChat, 200, time.Millisecond)
	m.observe(routeGenerate, 299, time.Millisecond)
	var after bytes.Buffer
	set.WritePrometheus(&after)
	var got []string
	for _, line := range strings.Split(after.String(), "\n") {
		if strings.HasPrefix(line, "smg_http_requests_total") {
			got = append(got, line)
		}
	}
	want := []string{
		`smg_http_requests_total{path="/generate",status_code="other"} 1`,
		`smg_http_requests_total{path="/v1/chat/completions",status_code="200"} 2`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("request series = %q, want %q", got, want)
	}
}

func TestHTTPMetricsObserveDoesNotAllocate(t *testing.T) {
	m := newHTTPMetrics(metrics.NewSet())
	m.observe(routeChat, 200, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { m.observe(routeChat, 200, time.Millisecond) }); n != 0 {
		t.Fatalf("observe allocates %v times per request once its series exists", n)
	}
}
