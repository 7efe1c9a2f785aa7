package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
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
	testutil.Eventually(t, "both publishers followed", func() bool {
		return strings.Count(MustDo(t, "GET", g.MetricsURL, "", nil).Body, "smg_kv_events_received_total{") == 2
	})
	requireEventModeRouting(t, g, "m")
	var list struct {
		Workers []map[string]any `json:"workers"`
	}
	if err := json.Unmarshal([]byte(MustDo(t, "GET", g.URL+"/workers", "", nil).Body), &list); err != nil || len(list.Workers) != 2 || list.Workers[0]["kv_events_endpoint"] == nil {
		t.Fatalf("GET /workers does not show the endpoints: %v %v", list, err)
	}
}

// requireEventModeRouting sends /generate prompts sharing five blocks of 16 token ids to
// model and requires that, once the first one's blocks are in the gateway's index, the others
// go to the engine that reported them and are decided in event mode.
func requireEventModeRouting(t *testing.T, g *Gateway, model string) {
	t.Helper()
	metric := func(series string) float64 {
		v, _ := Metric(t, g.MetricsURL, series)
		return v
	}
	ids := make([]string, 80) // five blocks of 16
	for i := range ids {
		ids[i] = strconv.Itoa(1000 + i)
	}
	ask := func(last int) string {
		t.Helper()
		body := `{"model":"` + model + `","input_ids":[` + strings.Join(ids, ",") + `,` + strconv.Itoa(last) + `],"sampling_params":{"max_new_tokens":1}}`
		r := MustDo(t, http.MethodPost, g.URL+"/generate", body, nil)
		if r.Status != 200 {
			t.Fatalf("/generate: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Smg-Routed-Worker-Id")
	}
	picks0 := metric(`smg_cache_aware_event_mode_picks_total`)
	first := ask(1)
	testutil.Eventually(t, "the first prompt's blocks in the index", func() bool {
		return metric(`smg_kv_index_blocks{model="`+model+`"}`) >= 5
	})
	for i := 2; i < 6; i++ {
		if w := ask(i); w != first {
			t.Fatalf("request %d with the same prefix went to %s, the engine holding it is %s", i, w, first)
		}
	}
	if n := metric(`smg_cache_aware_event_mode_picks_total`) - picks0; n < 4 {
		t.Fatalf("%v picks in event mode, want the 4 after the engine reported its blocks", n)
	}
}

// TestFleetKVEventsPortFollowsEveryHTTPEngine: with --kv-events-port (and
// --kv-events-replay-port) the gateway follows every HTTP engine registered without its own
// kv_events_endpoint on that port of the engine's host: two engines on two hosts publishing
// on the same port are both followed and route in event mode.
func TestFleetKVEventsPortFollowsEveryHTTPEngine(t *testing.T) {
	b := Build(t)
	hosts := []string{"127.0.0.2", "127.0.0.3"}
	port := FreePort(t, hosts[0]) // the replay socket is on port + 1 (mockworker: port + count + i)
	var urls []string
	for _, h := range hosts {
		m := Start(t, b.MockWorker, "--host", h, "--port", "0", "--count", "1", "--mode", "engine",
			"--kv-events-port", strconv.Itoa(port), "--block-size", "16", "--model", "m")
		var w []string
		testutil.Eventually(t, "mock engine on "+h+" with KV events listening", func() bool {
			w = kvEventsLine.FindStringSubmatch(m.Output())
			return w != nil
		})
		if want := fmt.Sprintf("tcp://%s:%d", h, port); w[2] != want {
			t.Fatalf("engine on %s publishes on %s, want %s", h, w[2], want)
		}
		urls = append(urls, w[1])
	}
	g := StartGatewayUnready(t, nil, "--policy", "cache_aware", "--kv-events-port", strconv.Itoa(port),
		"--kv-events-replay-port", strconv.Itoa(port+1), "--worker-urls", urls[0], urls[1])
	g.WaitReady(t)
	testutil.Eventually(t, "both engines' publishers followed", func() bool {
		body := MustDo(t, "GET", g.MetricsURL, "", nil).Body
		return strings.Contains(body, `smg_kv_events_received_total{worker="`+urls[0]+`"}`) &&
			strings.Contains(body, `smg_kv_events_received_total{worker="`+urls[1]+`"}`)
	})
	requireEventModeRouting(t, g, "m")
}

// TestDiscoveredEnginesFollowedOnTheirKVEventsAnnotation: a pod on a real kube-apiserver
// whose two engines (smg.ai/worker-ports) name their publishers and replay sockets in
// smg.ai/kv-events-port and smg.ai/kv-events-replay-port, one port per worker port, is
// discovered by the real smg, followed on both publishers, and routed in event mode.
func TestDiscoveredEnginesFollowedOnTheirKVEventsAnnotation(t *testing.T) {
	b := Build(t)
	api, ns := startAPIServer(t, "kvevents")
	mocks := Start(t, b.MockWorker, "--host", "127.0.0.1", "--port", "0", "--count", "2", "--mode", "engine",
		"--kv-events-port", "0", "--block-size", "16", "--model", "m")
	var workers [][]string
	testutil.Eventually(t, "mock engines with KV events listening", func() bool {
		workers = kvEventsLine.FindAllStringSubmatch(mocks.Output(), -1)
		return len(workers) == 2
	})
	portOf := func(u string) string { return u[strings.LastIndexByte(u, ':')+1:] }
	var ports, pubs, replays []string
	for _, w := range workers {
		ports, pubs, replays = append(ports, portOf(w[1])), append(pubs, portOf(w[2])), append(replays, portOf(w[3]))
	}
	spec := k8stest.PodSpec{Namespace: ns, Name: "engines", Labels: map[string]string{"app": "vllm"},
		Annotations: map[string]string{annotationWorkerPorts: strings.Join(ports, ","),
			annotationKVEventsPort: strings.Join(pubs, ","), annotationKVEventsReplayPort: strings.Join(replays, ",")}}
	if _, err := api.ReadyPod(context.Background(), spec, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	g := startGatewayEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig}, "--policy", "cache_aware",
		"--service-discovery", "--selector", "app=vllm", "--service-discovery-namespace", ns)
	testutil.Eventually(t, "both discovered engines followed on their publishers", func() bool {
		body := MustDo(t, "GET", g.MetricsURL, "", nil).Body
		return strings.Contains(body, `smg_kv_events_received_total{worker="`+workers[0][1]+`"}`) &&
			strings.Contains(body, `smg_kv_events_received_total{worker="`+workers[1][1]+`"}`)
	})
	var list struct {
		Workers []struct {
			URL      string `json:"url"`
			Endpoint string `json:"kv_events_endpoint"`
			Replay   string `json:"kv_events_replay_endpoint"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(MustDo(t, "GET", g.URL+"/workers", "", nil).Body), &list); err != nil {
		t.Fatal(err)
	}
	for _, w := range workers {
		found := false
		for _, l := range list.Workers {
			found = found || l.URL == w[1] && l.Endpoint == w[2] && l.Replay == w[3]
		}
		if !found {
			t.Fatalf("GET /workers %+v lacks %s with endpoints %s and %s", list.Workers, w[1], w[2], w[3])
		}
	}
	requireEventModeRouting(t, g, "m")
}

// TestFleetKVEventsPortFollowsEveryDPRank: with --kv-events-dp-size 2 an HTTP worker is
// followed on the event port of each data-parallel rank (port + rank, the replay socket
// likewise): blocks that only rank 1 computed reach the gateway's index under the worker.
// The two ranks are two mock engines publishing on P and P + 1; the gateway knows the first.
func TestFleetKVEventsPortFollowsEveryDPRank(t *testing.T) {
	b := Build(t)
	port := FreePort(t, "127.0.0.1") // ranks on port and port + 1, replay sockets on port + 2 and + 3
	mocks := Start(t, b.MockWorker, "--host", "127.0.0.1", "--port", "0", "--count", "2", "--mode", "engine",
		"--kv-events-port", strconv.Itoa(port), "--block-size", "16", "--model", "m")
	var ranks [][]string
	testutil.Eventually(t, "both rank engines publishing", func() bool {
		ranks = kvEventsLine.FindAllStringSubmatch(mocks.Output(), -1)
		return len(ranks) == 2
	})
	worker := ranks[0][1]
	g := StartGateway(t, "--policy", "cache_aware", "--kv-events-port", strconv.Itoa(port),
		"--kv-events-replay-port", strconv.Itoa(port+2), "--kv-events-dp-size", "2", "--worker-urls", worker)
	ids := make([]string, 80) // five blocks of 16
	for i := range ids {
		ids[i] = strconv.Itoa(2000 + i)
	}
	body := `{"model":"m","input_ids":[` + strings.Join(ids, ",") + `],"sampling_params":{"max_new_tokens":1}}`
	testutil.Eventually(t, "rank 1's blocks in the gateway's index", func() bool {
		// Straight to rank 1, not through the gateway: only its publisher can report them.
		if r := MustDo(t, http.MethodPost, ranks[1][1]+"/generate", body, nil); r.Status != 200 {
			t.Fatalf("rank 1 /generate: %d %s", r.Status, r.Body)
		}
		v, _ := Metric(t, g.MetricsURL, `smg_kv_index_blocks{model="m"}`)
		return v >= 5
	})
	if v, _ := Metric(t, g.MetricsURL, `smg_kv_events_applied_total{worker="`+worker+`"}`); v == 0 {
		t.Fatal("no batch applied under the worker")
	}
}

// TestHTTPTextRequestsRouteOnTheEnginesKVEvents: with the model's tokenizer (--model-path),
// the gateway tokenizes HTTP chat requests as the engines do when their model routes in event
// mode, so text requests sharing a long prefix follow the engine that reported its blocks;
// the engines (mock HTTP engines with the same tokenizer) publish real token ids.
func TestHTTPTextRequestsRouteOnTheEnginesKVEvents(t *testing.T) {
	b := Build(t)
	dir := qwen3Dir(t)
	hosts := []string{"127.0.0.2", "127.0.0.3"}
	port := FreePort(t, hosts[0])
	var urls []string
	for _, h := range hosts {
		m := Start(t, b.MockWorker, "--host", h, "--port", "0", "--count", "1", "--mode", "engine",
			"--kv-events-port", strconv.Itoa(port), "--block-size", "16", "--model", "m", "--tokenizer-path", dir)
		var w []string
		testutil.Eventually(t, "mock engine on "+h+" with KV events listening", func() bool {
			w = kvEventsLine.FindStringSubmatch(m.Output())
			return w != nil
		})
		urls = append(urls, w[1])
	}
	g := StartGatewayUnready(t, nil, "--policy", "cache_aware", "--model-path", dir, "--kv-events-port", strconv.Itoa(port),
		"--kv-events-replay-port", strconv.Itoa(port+1), "--worker-urls", urls[0], urls[1])
	g.WaitReady(t)
	metric := func(series string) float64 {
		v, _ := Metric(t, g.MetricsURL, series)
		return v
	}
	testutil.Eventually(t, "both engines' publishers followed", func() bool {
		body := MustDo(t, "GET", g.MetricsURL, "", nil).Body
		return strings.Contains(body, `smg_kv_events_received_total{worker="`+urls[0]+`"}`) &&
			strings.Contains(body, `smg_kv_events_received_total{worker="`+urls[1]+`"}`)
	})
	system := strings.Repeat("You answer questions about ships, the sea and the weather at sea, briefly and exactly. ", 12)
	ask := func(i int) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"Question %d: why is the sea salty?"}],"max_tokens":1}`, system, i)
		r := MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", body, nil)
		if r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Smg-Routed-Worker-Id")
	}
	picks0, predicted0 := metric(`smg_cache_aware_event_mode_picks_total`), metric(`smg_cache_aware_event_mode_predicted_cached_tokens_total`)
	first := ask(0)
	testutil.Eventually(t, "the first prompt's blocks in the index", func() bool {
		return metric(`smg_kv_index_blocks{model="m"}`) >= 10
	})
	for i := 1; i <= 6; i++ {
		if w := ask(i); w != first {
			t.Fatalf("chat %d with the same system prompt went to %s, the engine holding it is %s", i, w, first)
		}
	}
	if n := metric(`smg_cache_aware_event_mode_picks_total`) - picks0; n < 6 {
		t.Fatalf("%v chat requests picked in event mode, want the 6 after the engine reported its blocks", n)
	}
	if p := metric(`smg_cache_aware_event_mode_predicted_cached_tokens_total`) - predicted0; p < 6*160 {
		t.Fatalf("event mode foretold %v cached tokens over 6 requests sharing about 200 tokens, want at least 960", p)
	}
}
