package fastpath

import (
	"fmt"
	"github.com/smg-go/smg/internal/clock"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// newEPDGateway is newPDGateway in EPD mode: encode workers at 10.0.3.x (their bootstrap
// port 9100, and the prefill's KV connector if it has one), prefill workers at 10.0.1.x with
// prefillLabels, decode workers at 10.0.2.x; every leg round robin.
func newEPDGateway(t testing.TB, encode, prefill, decode []*pdFake, prefillLabels map[string]string) *gateway {
	return newEPDGatewayConfig(t, Config{Retry: DefaultRetryConfig()}, encode, prefill, decode, prefillLabels)
}

// newEPDGatewayConfig is newEPDGateway with the gateway configured by cfg.
func newEPDGatewayConfig(t testing.TB, cfg Config, encode, prefill, decode []*pdFake, prefillLabels map[string]string) *gateway {
	encodeLabels := map[string]string{worker.LabelBootstrapPort: "9100"}
	if c := prefillLabels[worker.LabelKVConnector]; c != "" {
		encodeLabels[worker.LabelKVConnector] = c
	}
	rc := policy.RouterConfig{DefaultPolicy: "round_robin", PD: &policy.PDPolicies{Prefill: "round_robin", Decode: "round_robin", Encode: "round_robin"}}
	return newLegsGateway(t, cfg, rc, legFakes{"10.0.3", worker.TypeEncode, encodeLabels, encode},
		legFakes{"10.0.1", worker.TypePrefill, prefillLabels, prefill}, legFakes{"10.0.2", worker.TypeDecode, nil, decode})
}

const (
	epdImageChat = `{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"http://x/a.png"}}]}],"stream":false,"max_tokens":8}`
	epdTextChat  = `{"model":"m1","messages":[{"role":"user","content":"no picture"}]}`
)

// TestEPDSGLangHandover: the encode worker gets the request with its own bootstrap address
// and a room; the prefill and decode workers get the same body, carrying that room as the
// encode handshake and their own PD room. A text-only request skips the encode leg.
func TestEPDSGLangHandover(t *testing.T) {
	e := newPDFake(t, answerJSON(`{"encoded":true}`))
	p := newPDFake(t, answerJSON(`{"prefill":1}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newEPDGateway(t, []*pdFake{e}, []*pdFake{p}, []*pdFake{d}, map[string]string{worker.LabelBootstrapPort: "9001"})
	resp := g.do("POST", "/v1/chat/completions", epdImageChat)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
		t.Fatalf("got %d %s", resp.StatusCode(), resp.Body())
	}
	if got := string(resp.Header.Peek(headerEncodeWorker)); got != "http://10.0.3.1:8000" {
		t.Fatalf("encode worker header %q", got)
	}
	if got := string(resp.Header.Peek(headerPrefillWorker)); got != "http://10.0.1.1:8000" {
		t.Fatalf("prefill worker header %q", got)
	}
	// The PD legs run at once: the prefill leg may reach its fake after the answer is back.
	testutil.Eventually(t, "the prefill leg at its worker", func() bool { return len(p.received()) == 1 })
	eb, pb, db := e.received(), p.received(), d.received()
	if len(eb) != 1 || len(pb) != 1 || len(db) != 1 {
		t.Fatalf("encode %d prefill %d decode %d requests, want 1 each", len(eb), len(pb), len(db))
	}
	room := eb[0]["bootstrap_room"]
	if eb[0]["bootstrap_host"] != "10.0.3.1" || eb[0]["bootstrap_port"] != float64(9100) || room == nil || eb[0]["max_tokens"] != float64(8) {
		t.Fatalf("encode body %v", eb[0])
	}
	for leg, b := range map[string]map[string]any{"prefill": pb[0], "decode": db[0]} {
		if b["encode_bootstrap_host"] != "10.0.3.1" || b["encode_bootstrap_port"] != float64(9100) || b["encode_bootstrap_room"] != room {
			t.Fatalf("%s body without the encode handshake of room %v: %v", leg, room, b)
		}
		if b["bootstrap_host"] != "10.0.1.1" || b["bootstrap_port"] != float64(9001) || b["bootstrap_room"] == room {
			t.Fatalf("%s body without its own PD room: %v", leg, b)
		}
	}
	if pb[0]["bootstrap_room"] != db[0]["bootstrap_room"] {
		t.Fatalf("prefill room %v, decode room %v", pb[0]["bootstrap_room"], db[0]["bootstrap_room"])
	}

	resp = g.do("POST", "/v1/chat/completions", epdTextChat)
	if resp.StatusCode() != 200 || len(resp.Header.Peek(headerEncodeWorker)) != 0 || len(e.received()) != 1 || len(p.received()) != 2 {
		t.Fatalf("text-only request: %d, encode header %q, encode saw %d requests", resp.StatusCode(), resp.Header.Peek(headerEncodeWorker), len(e.received()))
	}
	if _, ok := p.received()[1]["encode_bootstrap_room"]; ok {
		t.Fatalf("text-only prefill body with an encode handshake: %v", p.received()[1])
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestEPDVLLMEncodesUnstreamedWithOneToken: vLLM's encode leg is the client's request,
// unstreamed with one output token; the PD legs then run vLLM's KV handover.
func TestEPDVLLMEncodesUnstreamedWithOneToken(t *testing.T) {
	const params = `{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e1","remote_block_ids":[1],"remote_host":"10.0.1.1","remote_port":5600}`
	e := newPDFake(t, answerJSON(`{"id":"e","choices":[]}`))
	p := newPDFake(t, answerJSON(`{"id":"p","choices":[],"kv_transfer_params":`+params+`}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newEPDGateway(t, []*pdFake{e}, []*pdFake{p}, []*pdFake{d}, map[string]string{worker.LabelKVConnector: "NixlConnector"})
	body := strings.Replace(epdImageChat, `"stream":false`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
	resp := g.do("POST", "/v1/chat/completions", strings.Replace(body, `"stream":true`, `"stream":false`, 1))
	if resp.StatusCode() != 200 {
		t.Fatalf("got %d %s", resp.StatusCode(), resp.Body())
	}
	eb := e.received()
	if len(eb) != 1 || eb[0]["stream"] != false || eb[0]["max_tokens"] != float64(1) || eb[0]["max_completion_tokens"] != float64(1) || eb[0]["bootstrap_room"] != nil {
		t.Fatalf("encode body %v", eb)
	}
	if _, ok := eb[0]["stream_options"]; ok {
		t.Fatalf("encode body keeps stream_options: %v", eb[0])
	}
	if db := d.received(); len(db) != 1 || db[0]["kv_transfer_params"] == nil || db[0]["max_tokens"] != float64(8) {
		t.Fatalf("decode body %v", db)
	}
	if resp := g.do("POST", "/generate", `{"text":"x","image_data":"a.png"}`); resp.StatusCode() != 400 || len(e.received()) != 1 {
		t.Fatalf("/generate to vLLM: %d %s; the encode leg must not run", resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestEPDEncodeFailures: a retryable encode failure (503, or a worker nobody listens for)
// moves the request to another encode worker before any PD leg runs; a client error (400)
// from the encode worker is the answer, not retried, and no PD leg runs.
func TestEPDEncodeFailures(t *testing.T) {
	down := newPDFake(t, func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(503)
		ctx.SetBodyString(`{"error":{"message":"encoder overloaded"}}`)
	})
	bad := newPDFake(t, func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(400)
		ctx.SetBodyString(`{"error":{"message":"image too large"}}`)
	})
	ok := newPDFake(t, answerJSON(`{"encoded":true}`))
	p := newPDFake(t, answerJSON(`{"prefill":1}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newEPDGateway(t, []*pdFake{down, nil, ok}, []*pdFake{p}, []*pdFake{d}, nil)
	for i := range 3 {
		resp := g.do("POST", "/v1/chat/completions", epdImageChat)
		if resp.StatusCode() != 200 || string(resp.Header.Peek(headerEncodeWorker)) != "http://10.0.3.3:8000" {
			t.Fatalf("request %d: %d via %q: %s", i, resp.StatusCode(), resp.Header.Peek(headerEncodeWorker), resp.Body())
		}
	}
	if len(p.received()) != 3 || len(d.received()) != 3 {
		t.Fatalf("prefill %d decode %d, want 3 each", len(p.received()), len(d.received()))
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })

	g2 := newEPDGateway(t, []*pdFake{bad}, []*pdFake{p}, []*pdFake{d}, nil)
	resp := g2.do("POST", "/v1/chat/completions", epdImageChat)
	if resp.StatusCode() != 400 || !strings.Contains(string(resp.Body()), "image too large") || len(bad.received()) != 1 {
		t.Fatalf("encode 400: %d %s after %d encode requests", resp.StatusCode(), resp.Body(), len(bad.received()))
	}
	if len(resp.Header.Peek(headerPrefillWorker)) != 0 || len(p.received()) != 3 {
		t.Fatalf("a PD leg ran after the encode leg failed: prefill header %q", resp.Header.Peek(headerPrefillWorker))
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g2.inFlight() == 0 })
}

// TestEPDReadinessNeedsAnEncodeWorker: EPD readiness needs all three roles.
func TestEPDReadinessNeedsAnEncodeWorker(t *testing.T) {
	p, d := newPDFake(t, nil), newPDFake(t, nil)
	g := newEPDGateway(t, nil, []*pdFake{p}, []*pdFake{d}, nil)
	resp := g.do("GET", "/readiness", "")
	if resp.StatusCode() != 503 || !strings.Contains(string(resp.Body()), "no healthy encode workers") || !strings.Contains(string(resp.Body()), `"healthy_encode_workers":0`) {
		t.Fatalf("readiness without an encode worker: %d %s", resp.StatusCode(), resp.Body())
	}
	// A multimodal request has nowhere to be encoded; a text-only one runs as PD.
	if resp := g.do("POST", "/v1/chat/completions", epdImageChat); resp.StatusCode() != 503 || !strings.Contains(string(resp.Body()), "encode worker") {
		t.Fatalf("multimodal request without encode workers: %d %s", resp.StatusCode(), resp.Body())
	}
	if resp := g.do("POST", "/v1/chat/completions", epdTextChat); resp.StatusCode() != 200 {
		t.Fatalf("text-only request without encode workers: %d %s", resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestEPDPrefillFailureRetriesTheWholeTriple: a PD leg that fails after the encode leg
// succeeded sends the request to a new triple, whose encode leg runs again (the embeddings
// were published under the failed attempt's room).
func TestEPDPrefillFailureRetriesTheWholeTriple(t *testing.T) {
	e := newPDFake(t, answerJSON(`{"encoded":true}`))
	busy := newPDFake(t, func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(503)
		ctx.SetBodyString(`{"error":{"message":"prefill busy"}}`)
	})
	p := newPDFake(t, answerJSON(`{"prefill":1}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newEPDGateway(t, []*pdFake{e}, []*pdFake{busy, p}, []*pdFake{d}, nil)
	resp := g.do("POST", "/v1/chat/completions", epdImageChat)
	if resp.StatusCode() != 200 || string(resp.Header.Peek(headerPrefillWorker)) != "http://10.0.1.2:8000" || string(resp.Header.Peek(headerEncodeWorker)) != "http://10.0.3.1:8000" {
		t.Fatalf("got %d via prefill %q encode %q: %s", resp.StatusCode(), resp.Header.Peek(headerPrefillWorker), resp.Header.Peek(headerEncodeWorker), resp.Body())
	}
	eb := e.received()
	if len(eb) != 2 || len(busy.received()) != 1 || len(p.received()) != 1 {
		t.Fatalf("encode %d, failing prefill %d, prefill %d requests; want 2, 1, 1", len(eb), len(busy.received()), len(p.received()))
	}
	if eb[0]["bootstrap_room"] == eb[1]["bootstrap_room"] {
		t.Fatalf("the retry's encode leg reused room %v", eb[0]["bootstrap_room"])
	}
	if got := p.received()[0]["encode_bootstrap_room"]; got != eb[1]["bootstrap_room"] {
		t.Fatalf("the prefill that answered claims room %v, the last encode published %v", got, eb[1]["bootstrap_room"])
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestEPDClientHangUpCancelsEveryLeg: a client that leaves while the encode leg runs
// cancels it (the encode engine sees its request cancelled) and no PD leg starts; one that
// leaves while the prefill and decode legs run cancels both. Every in-flight hold is freed
// and no worker's breaker counts the hang-up.
func TestEPDClientHangUpCancelsEveryLeg(t *testing.T) {
	started, cancelled := make(chan string, 3), make(chan string, 3)
	var encodeHangs atomic.Bool
	encodeHangs.Store(true)
	e := netHTTPPDFake(t, func(w http.ResponseWriter, r *http.Request) {
		if encodeHangs.Load() {
			hangingLeg(started, cancelled, "encode")(w, r)
			return
		}
		_, _ = io.ReadAll(r.Body)
		fmt.Fprint(w, `{"encoded":true}`)
	})
	p, d := netHTTPPDFake(t, hangingLeg(started, cancelled, "prefill")), netHTTPPDFake(t, hangingLeg(started, cancelled, "decode"))
	g := newEPDGateway(t, []*pdFake{e}, []*pdFake{p}, []*pdFake{d}, nil)
	for _, c := range []struct {
		name string
		legs []string
	}{{"during the encode leg", []string{"encode"}}, {"during the PD legs", []string{"prefill", "decode"}}} {
		encodeHangs.Store(len(c.legs) == 1)
		conn, err := g.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\n\r\n%s", len(epdImageChat), epdImageChat)
		for range c.legs {
			<-started
		}
		if n := g.inFlight(); n != int64(len(c.legs)) {
			t.Fatalf("%s: %d in flight, want %d", c.name, n, len(c.legs))
		}
		_ = conn.Close()
		got := map[string]bool{}
		for range c.legs {
			select {
			case leg := <-cancelled:
				got[leg] = true
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: cancelled legs %v, want %v", c.name, got, c.legs)
			}
		}
		for _, leg := range c.legs {
			if !got[leg] {
				t.Fatalf("%s: cancelled legs %v, want %v", c.name, got, c.legs)
			}
		}
		testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
		select {
		case leg := <-started:
			t.Fatalf("%s: the %s leg started after the client left", c.name, leg)
		default:
		}
	}
	for _, w := range g.reg.Current().Workers {
		if st := w.Breaker.Stats(clock.Nanos()); st.State != breaker.Closed || st.Faults != 0 || st.Probes != 0 {
			t.Errorf("worker %s's breaker after clients left it: %+v", w.URL, st)
		}
	}
}
