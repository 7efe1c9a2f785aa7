package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestKVEventsFollowAWorkerAddedAtRuntime: a gRPC engine added through POST /workers after
// start is followed on its SubscribeKvEvents stream and joins its model's event-mode picker
// (the pickers are rebuilt once its slot exists): a prompt it served is routed back to it
// on the blocks it reported, decided in event mode.
func TestKVEventsFollowAWorkerAddedAtRuntime(t *testing.T) {
	urls := startGRPCMocks(t, 2, "sglang", "--mode", "engine", "--kv-events-port", "0", "--block-size", "16")
	first, added := urls[0], urls[1]
	g := StartGateway(t, "--model-path", qwen3Dir(t), "--policy", "cache_aware", "--worker-urls", first)
	metric := func(series string) float64 {
		v, _ := Metric(t, g.MetricsURL, series)
		return v
	}
	if r := MustDo(t, http.MethodPost, g.URL+"/workers", `{"url":"`+added+`"}`, nil); r.Status != 202 {
		t.Fatalf("POST /workers %s: %d %s", added, r.Status, r.Body)
	}
	long := strings.Repeat("A long document the engine keeps in its KV cache, block after block. ", 30)
	ask := func(i int) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":"qwen3","max_tokens":2,"messages":[{"role":"system","content":"%d %s"},{"role":"user","content":"summarise"}]}`, i, long)
		r := MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", body, nil)
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Smg-Routed-Worker-Id")
	}
	// Distinct prompts until one is served by the added engine: it is then routable.
	onAdded := -1
	for i := 0; onAdded < 0; i++ {
		if i == 50 {
			t.Fatalf("50 distinct prompts and none routed to the added worker %s", added)
		}
		if ask(i) == added {
			onAdded = i
		}
	}
	testutil.Eventually(t, "the added engine's events applied to the gateway's index", func() bool {
		return metric(`smg_kv_events_applied_total{worker="`+added+`"}`) > 0
	})
	picks0 := metric(`smg_cache_aware_event_mode_picks_total`)
	for n := 0; n < 3; n++ {
		if w := ask(onAdded); w != added {
			t.Fatalf("repeat %d of a prompt the added engine holds went to %s, want %s", n, w, added)
		}
	}
	if d := metric(`smg_cache_aware_event_mode_picks_total`) - picks0; d != 3 {
		t.Fatalf("%v of the 3 repeats decided in event mode: the picker with the added worker is not on the engines' events", d)
	}
}
