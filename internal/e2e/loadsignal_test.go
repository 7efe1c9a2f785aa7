package e2e

import (
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// TestFullKVCacheSteersLeastLoadAway: one of three workers reports a nearly full KV cache in
// its /v1/loads; once the gateway has polled it, least_load sends it (almost) nothing, because
// the KV-pressure term k/(1-k) dwarfs the others' queued work.
func TestFullKVCacheSteersLeastLoadAway(t *testing.T) {
	m := StartMocks(t, 3)
	full := m.URLs[2]
	if r := MustDo(t, "POST", full+"/admin/config", `{"kv_usage":0.99}`, nil); r.Status != 200 {
		t.Fatalf("admin config: %d %s", r.Status, r.Body)
	}
	g := StartGateway(t, "--policy", "least_load", "--load-monitor-interval", "1", "--worker-urls", m.URLs[0], m.URLs[1], full)
	time.Sleep(2500 * time.Millisecond) // two polling rounds: every worker has reported

	counts := map[string]int{}
	for range 40 {
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil)
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		counts[r.Header.Get("X-Smg-Routed-Worker-Id")]++
	}
	t.Logf("least_load with a 99%% full KV cache on %s: %v", full, counts)
	if counts[full] > 2 || counts[m.URLs[0]] < 15 || counts[m.URLs[1]] < 15 {
		t.Fatalf("the full worker got %d of 40 requests: %v", counts[full], counts)
	}
}

// TestOverloadProtectionVetoesUnderAnyPolicy: with --worker-overload-protection, a worker
// whose load report shows a KV cache past --worker-overload-token-usage takes no requests,
// even under round_robin, which reads no load; once it reports below the limit it is back.
func TestOverloadProtectionVetoesUnderAnyPolicy(t *testing.T) {
	m := StartMocks(t, 2)
	hot := m.URLs[1]
	MustDo(t, "POST", hot+"/admin/config", `{"kv_usage":0.99}`, nil)
	// Not StartGateway: its wait for every worker routable can lose the race with the first
	// load poll, which vetoes the hot worker within a fraction of the interval.
	g := StartGatewayUnready(t, nil, "--policy", "round_robin", "--load-monitor-interval", "1",
		"--worker-overload-protection", "--worker-overload-token-usage", "0.95", "--worker-urls", m.URLs[0], hot)
	testutil.Eventually(t, "the cool worker routable", func() bool {
		r, err := Do("GET", g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200
	})
	time.Sleep(2500 * time.Millisecond)
	for range 20 {
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil)
		if r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") == hot {
			t.Fatalf("status %d via %s: the overloaded worker must be vetoed", r.Status, r.Header.Get("X-Smg-Routed-Worker-Id"))
		}
	}
	MustDo(t, "POST", hot+"/admin/config", `{"kv_usage":0}`, nil)
	testutil.Eventually(t, "the worker back after a report below the limit", func() bool {
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil)
		return r.Header.Get("X-Smg-Routed-Worker-Id") == hot
	})
}
