package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// The surface an SMG deployment calls besides generation: the engine pass-through
// routes, the admin routes and the rest of the worker API, against real smg and mockworker
// processes.

var passThroughRequests = []struct{ path, body string }{
	{"/v1/embeddings", `{"model":"mock-model","input":["doc one","doc two"]}`},
	{"/v1/rerank", `{"model":"mock-model","query":"which?","documents":["a","b"]}`},
	{"/rerank", `{"model":"mock-model","query":"which?","documents":["a","b"]}`},
	{"/v1/classify", `{"model":"mock-model","input":"classify me"}`},
	{"/v1/tokenize", `{"model":"mock-model","prompt":"hello there"}`},
	{"/v1/detokenize", `{"model":"mock-model","tokens":[100,101]}`},
	{"/v1/responses", `{"model":"mock-model","input":"hello"}`},
	{"/v1/messages", `{"model":"mock-model","system":"be brief","messages":[{"role":"user","content":"hello"}],"max_tokens":8}`},
}

func TestPassThroughRoutesReachTheEnginesOfBothDialects(t *testing.T) {
	for _, dialect := range []string{"sglang", "vllm"} {
		t.Run(dialect, func(t *testing.T) {
			m := StartMocks(t, 2, "--dialect", dialect)
			g := StartGateway(t, append([]string{"--policy", "round_robin", "--worker-urls"}, m.URLs...)...)
			// One engine refuses everything with 503: every request still succeeds, retried on
			// the other, as generation is.
			if r := MustDo(t, "POST", m.URLs[0]+"/admin/config", `{"status":503}`, nil); r.Status != 200 {
				t.Fatalf("admin config: %d %s", r.Status, r.Body)
			}
			for _, c := range passThroughRequests {
				for range 2 {
					r := MustDo(t, "POST", g.URL+c.path, c.body, nil)
					var body struct {
						Route string `json:"mock_route"`
						Model string `json:"model"`
					}
					_ = json.Unmarshal([]byte(r.Body), &body)
					routed := r.Header.Get("X-Smg-Routed-Worker-Id")
					if r.Status != 200 || body.Route != c.path || body.Model != "mock-model" || routed != m.URLs[1] || "http://"+r.Header.Get("X-Mock-Worker-Id") != routed {
						t.Fatalf("POST %s: %d routed to %s served by %s: %s", c.path, r.Status, routed, r.Header.Get("X-Mock-Worker-Id"), r.Body)
					}
				}
			}
			for _, c := range []struct{ path, body, last string }{
				{"/v1/responses", `{"model":"mock-model","input":"hi","stream":true}`, "response.completed"},
				{"/v1/messages", `{"model":"mock-model","messages":[{"role":"user","content":"hi"}],"stream":true}`, "message_stop"},
			} {
				resp, br := Stream(t, g.URL+c.path, c.body)
				var events []string
				for {
					ev, err := ReadEvent(br)
					if err != nil {
						break
					}
					events = append(events, ev)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
					len(events) != 3 || !strings.Contains(events[0], c.path) || !strings.Contains(events[2], c.last) {
					t.Fatalf("streamed %s: %d %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), events)
				}
			}
			r := MustDo(t, "POST", g.URL+"/v1/rerank", `{"query":5}`, nil)
			if r.Status != 400 || r.Header.Get("X-Smg-Error-Code") != "invalid_request" || !strings.Contains(r.Body, `\"query\" must be a string`) {
				t.Fatalf("bad rerank body: %d %s", r.Status, r.Body)
			}
			for _, u := range m.URLs {
				if v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, u)); !ok || v != 0 {
					t.Fatalf("in flight on %s after the requests: %v (%v)", u, v, ok)
				}
			}
			if v, ok := Metric(t, g.MetricsURL, `smg_http_requests_total{path="/v1/messages",status_code="200"}`); !ok || v != 3 {
				t.Fatalf("smg_http_requests_total for /v1/messages 200 = %v (%v), want 3", v, ok)
			}
		})
	}
}

func TestAdminRoutesAskTheEngines(t *testing.T) {
	sgl := StartMocks(t, 1, "--dialect", "sglang")
	vllm := StartMocks(t, 1, "--dialect", "vllm")
	g := StartGateway(t, "--api-key", "admin", "--worker-urls", sgl.URLs[0], vllm.URLs[0])
	auth := map[string]string{"Authorization": "Bearer admin"}

	if r := MustDo(t, "GET", g.URL+"/get_loads", "", nil); r.Status != 401 {
		t.Fatalf("GET /get_loads without the key: %d", r.Status)
	}
	r := MustDo(t, "GET", g.URL+"/get_loads", "", auth)
	var loads struct {
		Workers []struct {
			Worker  string
			Load    int64
			Details map[string]any
			Error   string
		}
	}
	if err := json.Unmarshal([]byte(r.Body), &loads); err != nil || r.Status != 200 || len(loads.Workers) != 2 {
		t.Fatalf("GET /get_loads: %d %s", r.Status, r.Body)
	}
	for _, w := range loads.Workers {
		switch w.Worker {
		case sgl.URLs[0]:
			if w.Load < 0 || w.Details["loads"] == nil || w.Error != "" {
				t.Errorf("sglang engine's load: %+v", w)
			}
		case vllm.URLs[0]: // vLLM has no /v1/loads: reported, not fatal
			if w.Load != -1 || !strings.Contains(w.Error, "404") {
				t.Errorf("vllm engine's load: %+v", w)
			}
		default:
			t.Errorf("unknown worker %+v", w)
		}
	}

	if r := MustDo(t, "POST", g.URL+"/flush_cache", "", auth); r.Status != 200 || !strings.Contains(r.Body, `"workers_flushed":2`) {
		t.Fatalf("POST /flush_cache: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/get_model_info", "/get_server_info"} {
		r := MustDo(t, "GET", g.URL+path, "", nil) // public, as in the spec product
		if r.Status != 200 || !strings.Contains(r.Body, "mock-model") {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	routes := map[string]bool{}
	for range 4 { // rotates over both engines: SGLang's own route, vLLM a one-token completion
		r := MustDo(t, "GET", g.URL+"/health_generate", "", nil)
		var body struct{ Status, Worker, Route string }
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil || r.Status != 200 || body.Status != "ok" {
			t.Fatalf("GET /health_generate: %d %s", r.Status, r.Body)
		}
		routes[body.Worker+" "+body.Route] = true
	}
	if !routes[sgl.URLs[0]+" /health_generate"] || !routes[vllm.URLs[0]+" /v1/completions"] {
		t.Fatalf("GET /health_generate asked %v", routes)
	}
	r = MustDo(t, "GET", g.URL+"/engine_metrics", "", nil)
	if r.Status != 200 || !strings.Contains(r.Body, `sglang:num_running_reqs{worker="`+sgl.URLs[0]+`"`) ||
		!strings.Contains(r.Body, `vllm:num_requests_running{worker="`+vllm.URLs[0]+`"`) {
		t.Fatalf("GET /engine_metrics: %d\n%s", r.Status, r.Body)
	}
}

func TestWorkerAPIPatchAndPutOnALiveGateway(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	id := listWorkers(t, g).Workers[0].ID
	r := MustDo(t, "PATCH", g.URL+"/workers/"+id, `{"priority":80,"labels":{"tier":"gold"},"health":{"check_interval_secs":5}}`, nil)
	if r.Status != 202 {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
	var w struct {
		Priority int
		Labels   map[string]string
		ModelID  string `json:"model_id"`
	}
	r = MustDo(t, "GET", g.URL+"/workers/"+id, "", nil)
	if err := json.Unmarshal([]byte(r.Body), &w); err != nil || w.Priority != 80 || w.Labels["tier"] != "gold" || w.ModelID != "mock-model" {
		t.Fatalf("after PATCH: %s", r.Body)
	}
	if r := MustDo(t, "PUT", g.URL+"/workers/"+id, `{"url":"http://127.0.0.9:1"}`, nil); r.Status != 400 || !strings.Contains(r.Body, "IMMUTABLE_FIELD") {
		t.Fatalf("PUT with another URL: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "PUT", g.URL+"/workers/"+id, `{"url":"`+m.URLs[0]+`","priority":10}`, nil); r.Status != 202 {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	r = MustDo(t, "GET", g.URL+"/workers", "", nil)
	if !strings.Contains(r.Body, `"priority":10`) || strings.Contains(r.Body, "gold") || !strings.Contains(r.Body, `"regular_count":1`) {
		t.Fatalf("after PUT: %s", r.Body)
	}
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
		t.Fatalf("routing after the updates: %d %s", r.Status, r.Body)
	}
	testutil.Eventually(t, "update logged", func() bool { return strings.Contains(g.Output(), "Updated worker") })
}

func TestEngineMetricsFlagReExportsTheEnginesSeries(t *testing.T) {
	m := StartMocks(t, 2)
	g := StartGateway(t, "--engine-metrics", "--load-monitor-interval", "1", "--drain-settle-secs", "0", "--worker-urls", m.URLs[0], m.URLs[1])
	series := func(u string) string { return `sglang:num_running_reqs{worker="` + u + `"` }
	testutil.Eventually(t, "both engines' series on the gateway's metrics port", func() bool {
		body := MustDo(t, "GET", g.MetricsURL, "", nil).Body
		return strings.Contains(body, series(m.URLs[0])) && strings.Contains(body, series(m.URLs[1]))
	})
	var id string
	for _, w := range listWorkers(t, g).Workers {
		if w.URL == m.URLs[1] {
			id = w.ID
		}
	}
	if r := MustDo(t, "DELETE", g.URL+"/workers/"+id, "", nil); r.Status != 202 {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	testutil.Eventually(t, "the removed worker's engine series gone", func() bool {
		body := MustDo(t, "GET", g.MetricsURL, "", nil).Body
		return !strings.Contains(body, `worker="`+m.URLs[1]+`"`) && strings.Contains(body, series(m.URLs[0]))
	})
}

// TestPassThroughRoutesFollowTheirRoutingText: the pass-through routes give the policy their
// routing text (so that cache_aware and prefix_hash work on them): under each prefix
// policy the same text on a route keeps one worker, and twelve different texts spread.
func TestPassThroughRoutesFollowTheirRoutingText(t *testing.T) {
	routes := []struct{ path, tmpl string }{
		{"/v1/embeddings", `{"model":"mock-model","input":%q}`},
		{"/v1/rerank", `{"model":"mock-model","query":%q,"documents":["a","b"]}`},
		{"/v1/messages", `{"model":"mock-model","messages":[{"role":"user","content":%q}],"max_tokens":8}`},
		{"/v1/responses", `{"model":"mock-model","input":%q}`},
	}
	for _, name := range []string{"cache_aware", "prefix_hash"} {
		t.Run(name, func(t *testing.T) {
			m := StartMocks(t, 3)
			g := StartGateway(t, append([]string{"--policy", name, "--worker-urls"}, m.URLs...)...)
			served := func(path, body string) string {
				r := MustDo(t, "POST", g.URL+path, body, nil)
				if r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") == "" {
					t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
				}
				return r.Header.Get("X-Smg-Routed-Worker-Id")
			}
			for ri, rt := range routes {
				text := longPrompt(100 + ri)
				first := served(rt.path, fmt.Sprintf(rt.tmpl, text))
				for range 5 {
					if got := served(rt.path, fmt.Sprintf(rt.tmpl, text)); got != first {
						t.Fatalf("%s: the same text went to %s, then %s", rt.path, first, got)
					}
				}
				seen := map[string]bool{}
				for i := 1; i <= 12; i++ {
					seen[served(rt.path, fmt.Sprintf(rt.tmpl, longPrompt(200+20*ri+i)))] = true
				}
				if len(seen) < 2 {
					t.Fatalf("%s: 12 different texts all went to %v", rt.path, seen)
				}
			}
		})
	}
}
