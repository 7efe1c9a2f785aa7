package fastpath

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/smg-go/smg/worker"
)

func decodeBody(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

func TestPatchWorkerChangesItsSettingsInTheNextSnapshot(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	w := g.reg.Current().Workers[0]
	before := g.reg.Current().Version
	resp := g.do("PATCH", "/workers/"+w.ID, `{"priority":75,"cost":2.5,"labels":{"tier":"gold"},"api_key":"rotated","health":{"timeout_secs":3}}`)
	if resp.StatusCode() != 202 || !strings.Contains(string(resp.Body()), `"worker_id":"`+w.ID+`"`) {
		t.Fatalf("PATCH: %d %s", resp.StatusCode(), resp.Body())
	}
	if g.reg.Current().Version <= before || g.reg.Current().ByID(w.ID) != w || w.Revision() != 1 {
		t.Fatalf("version %d -> %d, revision %d: the update was not published on the same worker", before, g.reg.Current().Version, w.Revision())
	}
	var v workerView
	decodeBody(t, g.do("GET", "/workers/"+w.ID, "").Body(), &v)
	if v.Priority != 75 || v.Cost != 2.5 || v.Labels["tier"] != "gold" || v.ModelID != "m1" {
		t.Fatalf("after PATCH the worker shows %+v", v)
	}
	if h := w.Spec().Health; h == nil || h.TimeoutSecs == nil || *h.TimeoutSecs != 3 {
		t.Fatalf("health override not applied: %+v", h)
	}
	// The rotated key is what the next forwarded request carries; the API never shows it.
	resp = g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[]}`)
	if got := string(resp.Header.Peek("X-Seen-Authorization")); got != "Bearer rotated" {
		t.Fatalf("worker saw Authorization %q after the key rotation", got)
	}
	if strings.Contains(string(g.do("GET", "/workers", "").Body()), "rotated") {
		t.Fatal("GET /workers shows the API key")
	}
	// A second PATCH merges: labels and health fields not named stay.
	g.do("PATCH", "/workers/"+w.ID, `{"labels":{"zone":"b"},"health":{"failure_threshold":7}}`)
	sp := w.Spec()
	if sp.Labels["tier"] != "gold" || sp.Labels["zone"] != "b" || *sp.Priority != 75 ||
		*sp.Health.TimeoutSecs != 3 || *sp.Health.FailureThreshold != 7 {
		t.Fatalf("second PATCH did not merge: %+v labels %v health %+v", sp, sp.Labels, *sp.Health)
	}
}

func TestPatchAndPutRefuseBadInputWithTheWorkerAPIEnvelope(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	w := g.reg.Current().Workers[0]
	cases := []struct {
		method, path, body string
		status             int
		code, mentions     string
	}{
		{"PATCH", "/workers/" + w.ID, `{"priorty":1}`, 400, "INVALID_REQUEST", `"priorty"`},
		{"PATCH", "/workers/" + w.ID, `{"priority":"high"}`, 400, "INVALID_REQUEST", "priority"},
		{"PATCH", "/workers/" + w.ID, `{"cost":-1}`, 400, "INVALID_REQUEST", "cost"},
		{"PATCH", "/workers/" + w.ID, `{"priority":-1}`, 400, "INVALID_REQUEST", "must be in 0-4294967295"},
		{"PATCH", "/workers/" + w.ID, `{"priority":4294967296}`, 400, "INVALID_REQUEST", "must be in 0-4294967295"},
		{"PATCH", "/workers/" + w.ID, `{"labels":{"big":"` + strings.Repeat("x", 4097) + `"}}`, 400, "INVALID_REQUEST", `labels["big"] is 4097 bytes, at most 4096`},
		{"PATCH", "/workers/" + w.ID, `{"labels":{"big":"` + strings.Repeat("x", 1<<20) + `"}}`, 413, "SPEC_TOO_LARGE", "at most 1048576"},
		{"POST", "/workers", `{"url":"http://10.0.0.7:8000","labels":{"big":"` + strings.Repeat("x", 5000) + `"}}`, 400, "INVALID_REQUEST", `labels["big"] is 5000 bytes`},
		{"POST", "/workers", `{"url":"http://10.0.0.7:8000","api_key":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "SPEC_TOO_LARGE", "at most 1048576"},
		{"PATCH", "/workers/" + w.ID, `{"url":"http://10.0.0.9:8000"}`, 400, "INVALID_REQUEST", `"url"`},
		{"PATCH", "/workers/" + w.ID, `{"labels":{"sglang.ai/bootstrap-port":"9000"}}`, 400, "IMMUTABLE_FIELD", "bootstrap-port"},
		{"PATCH", "/workers/" + w.ID, `{} {}`, 400, "INVALID_REQUEST", "after the JSON object"},
		{"PATCH", "/workers/" + w.ID, `not json`, 400, "INVALID_REQUEST", "invalid worker update"},
		{"PATCH", "/workers/nope", `{"priority":1}`, 404, "WORKER_NOT_FOUND", "nope"},
		{"PUT", "/workers/" + w.ID, `{"url":"http://10.0.0.9:8000"}`, 400, "IMMUTABLE_FIELD", "DELETE it and POST"},
		{"PUT", "/workers/" + w.ID, `{"url":"http://10.0.0.1:8000","worker_type":"decode"}`, 400, "IMMUTABLE_FIELD", "worker_type"},
		{"PUT", "/workers/" + w.ID, `{"url":"http://10.0.0.1:8000","model_id":"other"}`, 400, "IMMUTABLE_FIELD", "models"},
		{"PUT", "/workers/" + w.ID, `{"url":"http://10.0.0.1:8000","bogus":1}`, 400, "INVALID_REQUEST", `"bogus"`},
		{"PUT", "/workers/" + w.ID, `{"url":"http://10.0.0.1:8000","connection_mode":"grpc"}`, 400, "INVALID_REQUEST", "needs a grpc://host:port url"},
		{"PUT", "/workers/nope", `{"url":"http://10.0.0.1:8000"}`, 404, "WORKER_NOT_FOUND", "nope"},
		{"POST", "/workers/" + w.ID, `{}`, 405, "METHOD_NOT_ALLOWED", "PATCH"},
	}
	for _, c := range cases {
		resp := g.do(c.method, c.path, c.body)
		var e struct{ Error, Code string }
		decodeBody(t, resp.Body(), &e)
		if resp.StatusCode() != c.status || e.Code != c.code || !strings.Contains(e.Error, c.mentions) {
			t.Errorf("%s %s %s: %d %s, want %d %s mentioning %s", c.method, c.path, c.body, resp.StatusCode(), resp.Body(), c.status, c.code, c.mentions)
		}
	}
	if w.Revision() != 0 {
		t.Fatalf("a refused update changed the worker (revision %d)", w.Revision())
	}
}

func TestPutWorkerReplacesTheWholeSpec(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	w := g.reg.Current().Workers[0]
	g.do("PATCH", "/workers/"+w.ID, `{"priority":90,"labels":{"a":"1"},"api_key":"k"}`)
	resp := g.do("PUT", "/workers/"+w.ID, `{"url":"10.0.0.1:8000","labels":{"b":"2"},"runtime_type":"sglang"}`)
	if resp.StatusCode() != 202 {
		t.Fatalf("PUT: %d %s", resp.StatusCode(), resp.Body())
	}
	sp := w.Spec()
	if *sp.Priority != worker.DefaultPriority || len(sp.Labels) != 1 || sp.Labels["b"] != "2" || sp.RuntimeType != "sglang" || w.AuthHeader() != nil {
		t.Fatalf("PUT did not replace the spec: %+v labels %v auth %q", sp, sp.Labels, w.AuthHeader())
	}
	if sp.ModelID != "m1" { // a PUT naming no model keeps the worker's
		t.Fatalf("PUT dropped the worker's model: %+v", sp)
	}
	if r := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[]}`); r.StatusCode() != 200 || len(r.Header.Peek("X-Seen-Authorization")) != 0 {
		t.Fatalf("after PUT without api_key: %d, worker saw Authorization %q", r.StatusCode(), r.Header.Peek("X-Seen-Authorization"))
	}
}

func TestConcurrentPatchesLoseNoUpdate(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	w := g.reg.Current().Workers[0]
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := g.do("PATCH", "/workers/"+w.ID, fmt.Sprintf(`{"labels":{"k%d":"v"}}`, i)); r.StatusCode() != 202 {
				t.Errorf("PATCH %d: %d %s", i, r.StatusCode(), r.Body())
			}
		}()
	}
	wg.Wait()
	if labels := w.Spec().Labels; len(labels) != n || w.Revision() != n {
		t.Fatalf("%d labels, revision %d after %d concurrent PATCHes: %v", len(labels), w.Revision(), n, labels)
	}
}

func TestWorkerStatsCarryTheSpecProductsKeys(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200))
	var list struct {
		Stats map[string]int `json:"stats"`
	}
	decodeBody(t, g.do("GET", "/workers", "").Body(), &list)
	want := map[string]int{"regular_count": 2, "prefill_count": 0, "decode_count": 0, "regular_workers": 2, "total_workers": 2, "healthy_workers": 2}
	for k, v := range want {
		if got, ok := list.Stats[k]; !ok || got != v {
			t.Errorf("stats[%q] = %d (present %v), want %d; stats %v", k, got, ok, v, list.Stats)
		}
	}
}

func TestAddWorkerTakesModelCards(t *testing.T) {
	g := newGateway(t, "round_robin", Config{})
	g.setFake("10.0.0.5:8000", newFakeWorker(t, "c", 200))
	resp := g.do("POST", "/workers", `{"url":"http://10.0.0.5:8000","models":[{"id":"card-model","owned_by":"x"},"plain"],"connection_mode":"http","runtime_type":"vllm"}`)
	if resp.StatusCode() != 202 {
		t.Fatalf("POST: %d %s", resp.StatusCode(), resp.Body())
	}
	w := g.reg.Current().ByURL("http://10.0.0.5:8000")
	if w == nil || strings.Join(w.Models, ",") != "card-model,plain" {
		t.Fatalf("registered %+v", w)
	}
	if r := g.do("POST", "/workers", `{"url":"http://10.0.0.6:8000","models":[{"name":"x"}]}`); r.StatusCode() != 400 || !strings.Contains(string(r.Body()), `models[0]`) {
		t.Fatalf("a model card without id: %d %s", r.StatusCode(), r.Body())
	}
}

// TestPatchRemovesALabelGivenNull: "labels": {"k": null} removes k and leaves the others.
func TestPatchRemovesALabelGivenNull(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	w := g.reg.Current().Workers[0]
	if r := g.do("PATCH", "/workers/"+w.ID, `{"labels":{"tier":"gold","zone":"b"}}`); r.StatusCode() != 202 {
		t.Fatalf("PATCH: %d %s", r.StatusCode(), r.Body())
	}
	if r := g.do("PATCH", "/workers/"+w.ID, `{"labels":{"tier":null,"absent":null}}`); r.StatusCode() != 202 {
		t.Fatalf("PATCH with null: %d %s", r.StatusCode(), r.Body())
	}
	var v workerView
	decodeBody(t, g.do("GET", "/workers/"+w.ID, "").Body(), &v)
	if _, ok := v.Labels["tier"]; ok || v.Labels["zone"] != "b" || len(v.Labels) != 1 {
		t.Fatalf("labels after removing tier: %v", v.Labels)
	}
}
