package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

var kvEventsLine = regexp.MustCompile(`listening on (http://\S+) .*kv events (tcp://[^,]+), replay (tcp://[^)]+)\)`)

// TestHTTPEnginesKVEventsRouteCacheAware: HTTP engines registered with kv_events_endpoint
// (and the replay socket) are followed on their ZMQ publishers; requests with token ids
// (/generate input_ids) are routed in event mode onto the engine that reported the prefix,
// and a bad endpoint is refused with the way to fix it.
func TestHTTPEnginesKVEventsRouteCacheAware(t *testing.T) {
	b := Build(t)
	mocks := Start(t, b.MockWorker, "--host", "127.0.0.1", "--port", "0", "--count", "2", "--mode", "engine",
		"--kv-events-port", "0", "--block-size", "16", "--model", "m")
	var workers [][]string
	testutil.Eventually(t, "mock engines with KV events listening", func() bool {
		workers = kvEventsLine.FindAllStringSubmatch(mocks.Output(), -1)
		return len(workers) == 2
	})
	g := StartGatewayUnready(t, nil, "--policy", "cache_aware")
	if r := MustDo(t, http.MethodPost, g.URL+"/workers", `{"url":"http://127.0.0.1:1","kv_events_endpoint":"tcp://*:5557"}`, nil); r.Status != 400 || !strings.Contains(r.Body, "engine's host") {
		t.Fatalf("a wildcard endpoint: %d %s, want a 400 saying to give the engine's host", r.Status, r.Body)
	}
	for _, w := range workers {
		body := fmt.Sprintf(`{"url":%q,"model_id":"m","kv_events_endpoint":%q,"kv_events_replay_endpoint":%q}`, w[1], w[2], w[3])
		if r := MustDo(t, http.MethodPost, g.URL+"/workers", body, nil); r.Status != 202 {
			t.Fatalf("register %s: %d %s", w[1], r.Status, r.Body)
		}
	}
	metric := func(series string) float64 {
		v, _ := Metric(t, g.MetricsURL, series)
		return v
	}
	testutil.Eventually(t, "both publishers followed", func() bool {
		return strings.Count(MustDo(t, "GET", g.MetricsURL, "", nil).Body, "smg_kv_events_received_total{") == 2
	})
	ids := make([]string, 80) // five blocks of 16
	for i := range ids {
		ids[i] = strconv.Itoa(1000 + i)
	}
	ask := func(last int) string {
		t.Helper()
		body := `{"model":"m","input_ids":[` + strings.Join(ids, ",") + `,` + strconv.Itoa(last) + `],"sampling_params":{"max_new_tokens":1}}`
		r := MustDo(t, http.MethodPost, g.URL+"/generate", body, nil)
		if r.Status != 200 {
			t.Fatalf("/generate: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Smg-Routed-Worker-Id")
	}
	first := ask(1)
	testutil.Eventually(t, "the first prompt's blocks in the index", func() bool { return metric(`smg_kv_index_blocks{model="m"}`) >= 5 })
	for i := 2; i < 6; i++ {
		if w := ask(i); w != first {
			t.Fatalf("request %d with the same prefix went to %s, the engine holding it is %s", i, w, first)
		}
	}
	if n := metric(`smg_cache_aware_event_mode_picks_total`); n < 4 {
		t.Fatalf("%v picks in event mode, want the 4 after the engine reported its blocks", n)
	}
	var list struct {
		Workers []map[string]any `json:"workers"`
	}
	if err := json.Unmarshal([]byte(MustDo(t, "GET", g.URL+"/workers", "", nil).Body), &list); err != nil || len(list.Workers) != 2 || list.Workers[0]["kv_events_endpoint"] == nil {
		t.Fatalf("GET /workers does not show the endpoints: %v %v", list, err)
	}
}
