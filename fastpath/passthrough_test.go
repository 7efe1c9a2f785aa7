package fastpath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// passThroughBodies are one request per engine pass-through route, each with routing text
// (or token IDs) for the policy.
var passThroughBodies = []struct{ path, body string }{
	{"/v1/embeddings", `{"model":"m1","input":["doc one","doc two"]}`},
	{"/v1/rerank", `{"model":"m1","query":"which doc?","documents":["a","b"]}`},
	{"/rerank", `{"model":"m1","query":"which doc?","documents":["a","b"]}`},
	{"/v1/classify", `{"model":"m1","input":"classify me"}`},
	{"/v1/tokenize", `{"model":"m1","prompt":"hello"}`},
	{"/v1/detokenize", `{"model":"m1","tokens":[1,2,3]}`},
	{"/v1/responses", `{"model":"m1","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
	{"/v1/messages", `{"model":"m1","system":"be brief","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`},
}

func TestPassThroughRoutesAreForwardedWithAccountingAndRetries(t *testing.T) {
	bad, good := newFakeWorker(t, "bad", 503), newFakeWorker(t, "good", 200)
	g := newGateway(t, "round_robin", Config{Retry: DefaultRetryConfig()}, bad, good)
	for _, c := range passThroughBodies {
		for range 2 { // round robin: one of the two lands on the 503 worker first and is retried
			resp := g.do("POST", c.path, c.body)
			if resp.StatusCode() != 200 || string(resp.Header.Peek("X-Seen-Path")) != c.path ||
				string(resp.Header.Peek("X-Mock-Worker-Id")) != "good" || len(resp.Header.Peek(headerRequestID)) == 0 {
				t.Fatalf("POST %s: %d path %q worker %q: %s", c.path, resp.StatusCode(), resp.Header.Peek("X-Seen-Path"), resp.Header.Peek("X-Mock-Worker-Id"), resp.Body())
			}
		}
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

func TestPassThroughRoutesRefuseBadInputInTheEnvelope(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	for _, c := range []struct{ path, body, mentions string }{
		{"/v1/embeddings", `{"input":{}}`, `"input" must be`},
		{"/v1/rerank", `{"query":1}`, `"query" must be a string`},
		{"/rerank", `{"query":"q"`, "invalid JSON"},
		{"/v1/classify", `{"input":[1,"a"]}`, `"input" must be`},
		{"/v1/tokenize", `{"prompt":true}`, `"prompt" must be`},
		{"/v1/detokenize", `{"tokens":[-1]}`, `"tokens" must be`},
		{"/v1/responses", `{"input":[5]}`, `"input[0]" must be an object`},
		{"/v1/messages", `{"system":[{"type":"text"}]}`, `"system[0].text" must be a string`},
		{"/v1/messages", `{"model":"nope","messages":[]}`, "not served"},
	} {
		resp := g.do("POST", c.path, c.body)
		var e struct {
			Error struct{ Message, Code string }
		}
		decodeBody(t, resp.Body(), &e)
		if code := resp.StatusCode(); code != 400 && code != 404 || !strings.Contains(e.Error.Message, c.mentions) || string(resp.Header.Peek(headerErrorCode)) != e.Error.Code {
			t.Errorf("POST %s %s: %d %s, want the envelope mentioning %s", c.path, c.body, resp.StatusCode(), resp.Body(), c.mentions)
		}
	}
	if r := g.do("GET", "/v1/embeddings", ""); r.StatusCode() != 405 {
		t.Errorf("GET /v1/embeddings: %d", r.StatusCode())
	}
	if g.inFlight() != 0 {
		t.Fatalf("refused requests left %d in flight", g.inFlight())
	}
}

// TestPassThroughRoutingTextReachesThePolicy: with prefix_hash, a route's routing text
// decides the worker: the same text always lands on the same worker, and different texts
// spread over both.
func TestPassThroughRoutingTextReachesThePolicy(t *testing.T) {
	g := newGateway(t, "prefix_hash", Config{}, newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200))
	for _, route := range []struct{ path, tmpl string }{
		{"/v1/rerank", `{"model":"m1","query":"%s","documents":["x"]}`},
		{"/v1/embeddings", `{"model":"m1","input":"%s"}`},
		{"/v1/messages", `{"model":"m1","messages":[{"role":"user","content":"%s"}]}`},
		{"/v1/responses", `{"model":"m1","input":"%s"}`},
	} {
		seen := map[string]bool{}
		for i := range 16 {
			text := fmt.Sprintf("question number %d about something", i)
			first := ""
			for range 3 {
				resp := g.do("POST", route.path, fmt.Sprintf(route.tmpl, text))
				w := string(resp.Header.Peek("X-Mock-Worker-Id"))
				if first != "" && w != first {
					t.Fatalf("%s: the same text went to %s and %s", route.path, first, w)
				}
				first = w
			}
			seen[first] = true
		}
		if len(seen) != 2 {
			t.Fatalf("%s: 16 different texts all went to %v", route.path, seen)
		}
	}
}

func TestPassThroughRoutesAreRefusedInPDMode(t *testing.T) {
	g := newPDGateway(t, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	resp := g.do("POST", "/v1/embeddings", `{"model":"m1","input":"x"}`)
	if resp.StatusCode() != 501 || string(resp.Header.Peek(headerErrorCode)) != "unsupported_in_pd_mode" {
		t.Fatalf("POST /v1/embeddings in PD mode: %d %s", resp.StatusCode(), resp.Body())
	}
}
