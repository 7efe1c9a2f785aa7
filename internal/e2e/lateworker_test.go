package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestWorkerStartedAfterTheGatewayBecomesUsable: smg starts first, with the default 60 s
// health interval, naming a worker that is not running yet; the worker starts after the
// gateway probed it in vain. The gateway probes a pending worker again after about 1 s, 2 s,
// 4 s... so it serves the worker after a few probes, not at the next interval; it learns the
// worker's model at the probe that finds it up, so /v1/models lists it and a request for an
// unknown model gets 404, not a 502 from a worker taken to serve any model.
func TestWorkerStartedAfterTheGatewayBecomesUsable(t *testing.T) {
	port := FreePort(t, "127.0.0.1") // reserved: nothing else takes it before the worker does
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	g := StartGatewayUnready(t, nil, "--policy", "round_robin", "--worker-urls", url)
	failures := `smg_worker_health_checks_total{worker="` + url + `",result="failure"}`
	testutil.Eventually(t, "a failed probe of the worker not yet running", func() bool {
		v, ok := Metric(t, g.MetricsURL, failures)
		return ok && v >= 1
	})
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[]}`, nil); r.Status != 503 {
		t.Fatalf("before the worker runs: %d %s, want 503", r.Status, r.Body)
	}
	StartMocks(t, 1, "--port", strconv.Itoa(port))
	var before float64
	testutil.Eventually(t, "the late worker routable", func() bool {
		// The failures counted up to now; the series goes when the worker is replaced by one
		// that knows its models.
		if v, ok := Metric(t, g.MetricsURL, failures); ok {
			before = max(before, v)
		}
		r, err := Do("GET", g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200
	})
	// Extra probes of a pending worker: after 1, 2, 4, 8, 16 and 32 s (jittered), then the
	// interval. Ready before the interval's second probe means at most 7 failures.
	if before > 7 {
		t.Fatalf("%v failed probes before the worker was served, want at most 7 (the backoff's)", before)
	}
	models := MustDo(t, "GET", g.URL+"/v1/models", "", nil)
	if !strings.Contains(models.Body, `"id":"mock-model"`) {
		t.Fatalf("/v1/models after the late worker is ready: %s", models.Body)
	}
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hi"}]}`, nil); r.Status != 200 {
		t.Fatalf("request for the worker's model: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"nope","messages":[]}`, nil); r.Status != 404 || !strings.Contains(r.Body, "model_not_found") {
		t.Fatalf("request for an unknown model: %d %s, want 404 model_not_found", r.Status, r.Body)
	}
	t.Logf("late worker served after %v failed probes", before)
}
