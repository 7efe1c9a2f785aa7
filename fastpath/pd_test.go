package fastpath

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/smg-go/smg/internal/clock"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// pdFake is an in-memory PD engine that records the bodies it receives and answers with
// whatever answer returns.
type pdFake struct {
	ln     dialListener
	srv    *fasthttp.Server
	mu     sync.Mutex
	bodies []map[string]any
	answer func(body map[string]any, ctx *fasthttp.RequestCtx)
}

func newPDFake(t testing.TB, answer func(map[string]any, *fasthttp.RequestCtx)) *pdFake {
	return newPDFakeOn(t, newTestListener(t), answer)
}

// newPDFakeOn is newPDFake serving on ln (tlsworker_test.go serves over TLS).
func newPDFakeOn(t testing.TB, ln dialListener, answer func(map[string]any, *fasthttp.RequestCtx)) *pdFake {
	f := &pdFake{ln: ln, answer: answer}
	f.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if answer == nil { // allocation-free: a fixed answer, nothing recorded
			ctx.SetContentType("application/json")
			ctx.Response.SetBodyRaw(decodeAnswerBytes)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(ctx.PostBody(), &body); err != nil {
			ctx.Error("bad json: "+err.Error(), 400)
			return
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.mu.Unlock()
		f.answer(body, ctx)
	}}
	go func() { _ = f.srv.Serve(f.ln) }()
	t.Cleanup(func() { _ = f.srv.Shutdown(); _ = f.ln.Close() })
	return f
}

func (f *pdFake) received() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

func answerJSON(s string) func(map[string]any, *fasthttp.RequestCtx) {
	return func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(s)
	}
}

// newPDGateway starts a PD gateway over fakes: prefill workers at 10.0.1.x, decode workers at
// 10.0.2.x, with the given labels on every prefill worker.
func newPDGateway(t testing.TB, prefill, decode []*pdFake, prefillLabels map[string]string) *gateway {
	return newPDGatewayConfig(t, Config{Retry: DefaultRetryConfig()}, prefill, decode, prefillLabels)
}

// newPDGatewayConfig is newPDGateway with the gateway configured by cfg.
func newPDGatewayConfig(t testing.TB, cfg Config, prefill, decode []*pdFake, prefillLabels map[string]string) *gateway {
	rc := policy.RouterConfig{DefaultPolicy: "round_robin", PD: &policy.PDPolicies{Prefill: "round_robin", Decode: "round_robin"}}
	return newLegsGateway(t, cfg, rc,
		legFakes{"10.0.1", worker.TypePrefill, prefillLabels, prefill}, legFakes{"10.0.2", worker.TypeDecode, nil, decode})
}

// legFakes are the fake workers of one disaggregation leg: at <subnet>.1, .2, ... port 8000,
// of worker type typ, with labels.
type legFakes struct {
	subnet, typ string
	labels      map[string]string
	fakes       []*pdFake
}

// newLegsGateway starts a gateway routing by rc over the legs' fakes.
func newLegsGateway(t testing.TB, cfg Config, rc policy.RouterConfig, legs ...legFakes) *gateway {
	g := &gateway{t: t, others: map[string]dialListener{}}
	for _, l := range legs {
		for _, f := range l.fakes {
			if f != nil {
				if tl, ok := f.ln.(tlsListener); ok { // workers behind TLS (tlsworker_test.go)
					g.tls = tl.client
				}
			}
		}
	}
	byAddr := map[string]*pdFake{}
	dial := func(addr string) (net.Conn, error) {
		f := byAddr[addr]
		if f == nil {
			return nil, fmt.Errorf("dial %s: connection refused", addr)
		}
		return f.ln.Dial()
	}
	add := func(addr, typ string, labels map[string]string, f *pdFake) {
		scheme := "http://"
		if f != nil { // a nil fake is a worker nobody listens for
			byAddr[addr] = f
			g.others[addr] = f.ln
			if _, ok := f.ln.(tlsListener); ok { // a worker behind TLS (tlsworker_test.go)
				scheme = "https://"
			}
		}
		spec := worker.Spec{URL: scheme + addr, ModelID: "m1", WorkerType: typ, Labels: labels}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := g.reg.Add(context.Background(), spec, worker.StatusReady); err != nil {
			t.Fatal(err)
		}
	}
	g.start(cfg, rc, dial, func() {
		n := 0
		for _, l := range legs {
			for i, f := range l.fakes {
				add(fmt.Sprintf("%s.%d:8000", l.subnet, i+1), l.typ, l.labels, f)
			}
			n += len(l.fakes)
		}
		g.waitTable(func(got int) bool { return got == n })
	})
	return g
}

var decodeAnswerBytes = []byte(decodeAnswer)

const decodeAnswer = `{"id":"d","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"from decode"},"finish_reason":"length"}]}`

func TestPDSGLangSendsBothLegsTheSameRoom(t *testing.T) {
	p1, p2 := newPDFake(t, answerJSON(`{"prefill":1}`)), newPDFake(t, answerJSON(`{"prefill":2}`))
	d1 := newPDFake(t, answerJSON(decodeAnswer))
	g := newPDGateway(t, []*pdFake{p1, p2}, []*pdFake{d1}, map[string]string{worker.LabelBootstrapPort: "9001"})

	const n = 6
	for i := range n {
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":false`
		}
		resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hello `+fmt.Sprint(i)+`"}],"bootstrap_room":1`+stream+`}`)
		if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode(), resp.Body())
		}
		if got := string(resp.Header.Peek(headerRoutedWorker)); got != "http://10.0.2.1:8000" {
			t.Fatalf("routed worker %q, want the decode worker", got)
		}
		if got := string(resp.Header.Peek(headerPrefillWorker)); !strings.HasPrefix(got, "http://10.0.1.") {
			t.Fatalf("prefill worker header %q", got)
		}
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })

	prefills := append(p1.received(), p2.received()...)
	decodes := d1.received()
	if len(p1.received()) != n/2 || len(p2.received()) != n/2 || len(decodes) != n {
		t.Fatalf("prefill %d/%d decode %d: round_robin must spread the prefill leg", len(p1.received()), len(p2.received()), len(decodes))
	}
	rooms := map[float64]map[string]any{}
	for _, b := range prefills {
		room, ok := b["bootstrap_room"].(float64)
		if !ok || room == 1 {
			t.Fatalf("prefill body without a fresh room: %v", b)
		}
		if b["bootstrap_port"] != float64(9001) || !strings.HasPrefix(b["bootstrap_host"].(string), "10.0.1.") {
			t.Fatalf("prefill bootstrap fields: %v", b)
		}
		rooms[room] = b
	}
	for _, b := range decodes {
		p, ok := rooms[b["bootstrap_room"].(float64)]
		if !ok {
			t.Fatalf("decode room %v was sent to no prefill worker", b["bootstrap_room"])
		}
		pj, _ := json.Marshal(p)
		dj, _ := json.Marshal(b)
		if string(pj) != string(dj) {
			t.Fatalf("the legs got different bodies:\nprefill %s\ndecode  %s", pj, dj)
		}
	}
}

func TestPDSGLangPrefillFailureIsTheAnswer(t *testing.T) {
	p := newPDFake(t, func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(400)
		ctx.SetBodyString(`{"error":{"message":"prompt too long for prefill"}}`)
	})
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newPDGateway(t, []*pdFake{p}, []*pdFake{d}, nil)
	resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode() != 400 || !strings.Contains(string(resp.Body()), "prompt too long") {
		t.Fatalf("got %d %s, want the prefill worker's 400", resp.StatusCode(), resp.Body())
	}
	if b := p.received(); len(b) != 1 || b[0]["bootstrap_port"] != nil {
		t.Fatalf("prefill without a bootstrap port must get bootstrap_port null: %v", b)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

func TestPDVLLMPassesKVTransferParams(t *testing.T) {
	const params = `{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e1","remote_block_ids":[1,2],"remote_host":"10.0.1.1","remote_port":5600}`
	p := newPDFake(t, answerJSON(`{"id":"p","choices":[{"message":{"content":"x"}}],"kv_transfer_params":`+params+`}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newPDGateway(t, []*pdFake{p}, []*pdFake{d}, map[string]string{worker.LabelKVConnector: "NixlConnector"})
	resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}],"stream":false,"stream_options":{"include_usage":true},"max_tokens":50}`)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
		t.Fatalf("got %d %s", resp.StatusCode(), resp.Body())
	}
	pb, db := p.received(), d.received()
	if len(pb) != 1 || len(db) != 1 {
		t.Fatalf("prefill %d decode %d requests", len(pb), len(db))
	}
	kv := pb[0]["kv_transfer_params"].(map[string]any)
	if kv["do_remote_decode"] != true || pb[0]["max_tokens"] != float64(1) || pb[0]["max_completion_tokens"] != float64(1) || pb[0]["stream"] != false {
		t.Fatalf("prefill body %v", pb[0])
	}
	if _, ok := pb[0]["stream_options"]; ok {
		t.Fatalf("prefill body keeps stream_options: %v", pb[0])
	}
	got, _ := json.Marshal(db[0]["kv_transfer_params"])
	var want map[string]any
	_ = json.Unmarshal([]byte(params), &want)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) || db[0]["max_tokens"] != float64(50) {
		t.Fatalf("decode body %v: want the prefill's kv_transfer_params and the client's max_tokens", db[0])
	}

	// /generate is not vLLM's API.
	resp = g.do("POST", "/generate", `{"text":"x"}`)
	if resp.StatusCode() != 400 || !strings.Contains(string(resp.Body()), "vLLM") {
		t.Fatalf("/generate to vLLM: %d %s", resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

func TestPDVLLMPrefillWithoutParamsFails(t *testing.T) {
	p := newPDFake(t, answerJSON(`{"id":"p","choices":[]}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newPDGateway(t, []*pdFake{p}, []*pdFake{d}, map[string]string{worker.LabelKVConnector: "NixlConnector"})
	resp := g.do("POST", "/v1/completions", `{"model":"m1","prompt":"x"}`)
	if resp.StatusCode() != 502 || !strings.Contains(string(resp.Body()), "kv_transfer_params") {
		t.Fatalf("got %d %s", resp.StatusCode(), resp.Body())
	}
	if len(d.received()) != 0 {
		t.Fatal("the decode worker was asked without the prefill's KV")
	}
}

func TestPDReadinessNeedsBothLegs(t *testing.T) {
	p := newPDFake(t, answerJSON(`{}`))
	g := newPDGateway(t, []*pdFake{p}, nil, nil)
	resp := g.do("GET", "/readiness", "")
	if resp.StatusCode() != 503 || !strings.Contains(string(resp.Body()), "no healthy decode workers") {
		t.Fatalf("readiness without decode workers: %d %s", resp.StatusCode(), resp.Body())
	}
	resp = g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode() != 503 || !strings.Contains(string(resp.Body()), "no decode worker serves model 'm1'") {
		t.Fatalf("request without decode workers: %d %s", resp.StatusCode(), resp.Body())
	}
	spec := worker.Spec{URL: "http://10.0.2.9:8000", ModelID: "m1", WorkerType: worker.TypeDecode}
	_ = spec.Normalize()
	if _, err := g.reg.Add(context.Background(), spec, worker.StatusReady); err != nil {
		t.Fatal(err)
	}
	resp = g.do("GET", "/readiness", "")
	if resp.StatusCode() != 200 {
		t.Fatalf("readiness with both legs: %d %s", resp.StatusCode(), resp.Body())
	}
	resp = g.do("GET", "/workers", "")
	var view struct{ Stats map[string]int }
	_ = json.Unmarshal(resp.Body(), &view)
	if view.Stats["prefill_workers"] != 1 || view.Stats["decode_workers"] != 1 || view.Stats["regular_workers"] != 0 {
		t.Fatalf("stats %v", view.Stats)
	}
}

func TestPDSGLangStreamsTheDecodeAnswer(t *testing.T) {
	release := make(chan struct{})
	p := newPDFake(t, func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		<-release // the prefill finishes after the decode stream has started
		ctx.SetBodyString(`{}`)
	})
	d := newPDFake(t, func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyString("data: {\"choices\":[{\"delta\":{\"content\":\"from decode\"}}]}\n\ndata: [DONE]\n\n")
	})
	g := newPDGateway(t, []*pdFake{p}, []*pdFake{d}, nil)
	resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}],"stream":true}`)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") || !strings.HasSuffix(string(resp.Body()), "data: [DONE]\n\n") {
		t.Fatalf("got %d %q", resp.StatusCode(), resp.Body())
	}
	pw := g.reg.Current().Workers[0]
	if pw.Type() != worker.TypePrefill || pw.InFlight.Load() != 1 {
		t.Fatalf("the unfinished prefill must still count on its worker: %s in flight %d", pw.Type(), pw.InFlight.Load())
	}
	close(release)
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

func status503(_ map[string]any, ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(503)
	ctx.SetBodyString(`{"error":{"message":"busy"}}`)
}

// TestPDRetriesAFailedLegOnAnotherPair: a decode worker that answers 503, one that is
// unreachable and a prefill worker that answers 503 each cost an attempt, never the request;
// every retry is a new pair with a new room.
func TestPDRetriesAFailedLegOnAnotherPair(t *testing.T) {
	for _, tc := range []struct {
		name            string
		prefill, decode []*pdFake
		labels          map[string]string
	}{
		{"decode 503", []*pdFake{newPDFake(t, answerJSON(`{}`))}, []*pdFake{newPDFake(t, status503), newPDFake(t, answerJSON(decodeAnswer))}, nil},
		{"decode unreachable", []*pdFake{newPDFake(t, answerJSON(`{}`))}, []*pdFake{nil, newPDFake(t, answerJSON(decodeAnswer))}, nil},
		{"prefill 503", []*pdFake{newPDFake(t, status503), newPDFake(t, answerJSON(`{}`))}, []*pdFake{newPDFake(t, answerJSON(decodeAnswer))}, nil},
		{"vllm prefill 503", []*pdFake{newPDFake(t, status503), newPDFake(t, answerJSON(`{"kv_transfer_params":{"remote_host":"h"}}`))},
			[]*pdFake{newPDFake(t, answerJSON(decodeAnswer))}, map[string]string{worker.LabelKVConnector: "NixlConnector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newPDGateway(t, tc.prefill, tc.decode, tc.labels)
			for i := range 4 {
				resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hello `+fmt.Sprint(i)+`"}]}`)
				if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode(), resp.Body())
				}
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
			if tc.labels != nil {
				return
			}
			// Every decode request that succeeded carries a room some prefill worker got, and
			// no room was sent twice.
			rooms := map[float64]int{}
			for _, p := range tc.prefill {
				for _, b := range p.received() {
					rooms[b["bootstrap_room"].(float64)]++
				}
			}
			for room, n := range rooms {
				if n != 1 {
					t.Fatalf("room %v sent to %d prefill requests", room, n)
				}
			}
			for _, d := range tc.decode {
				if d == nil {
					continue
				}
				for _, b := range d.received() {
					if rooms[b["bootstrap_room"].(float64)] != 1 {
						t.Fatalf("decode room %v unknown to the prefill workers", b["bootstrap_room"])
					}
				}
			}
			if len(rooms) <= 4 {
				t.Fatalf("%d prefill requests for 4 client requests: the failed leg was never retried", len(rooms))
			}
		})
	}
}

func TestPDClientErrorIsNotRetried(t *testing.T) {
	bad := func(_ map[string]any, ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(400)
		ctx.SetBodyString(`{"error":{"message":"bad request"}}`)
	}
	p1, p2 := newPDFake(t, bad), newPDFake(t, bad)
	d := newPDFake(t, answerJSON(decodeAnswer))
	g := newPDGateway(t, []*pdFake{p1, p2}, []*pdFake{d}, nil)
	resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode() != 400 || len(p1.received())+len(p2.received()) != 1 {
		t.Fatalf("got %d after %d prefill requests; a 400 is the client's and must not be retried", resp.StatusCode(), len(p1.received())+len(p2.received()))
	}
}

// netHTTPPDFake is a PD engine on net/http over loopback, whose handler sees its request
// cancelled (r.Context) when the gateway closes the connection.
func netHTTPPDFake(t *testing.T, h http.HandlerFunc) *pdFake {
	ln := newTestListener(t)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &pdFake{ln: ln}
}

// hangingLeg answers nothing; it reports on started when its request arrived and on
// cancelled when the gateway gave it up.
func hangingLeg(started, cancelled chan<- string, name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // net/http watches the connection once the body is read
		started <- name
		<-r.Context().Done()
		cancelled <- name
	}
}

// TestPDClientHangUpCancelsBothLegs: a client that leaves while both legs run closes both
// worker connections (the engines see the request cancelled) and frees both in-flight holds.
func TestPDClientHangUpCancelsBothLegs(t *testing.T) {
	started, cancelled := make(chan string, 2), make(chan string, 2)
	p, d := netHTTPPDFake(t, hangingLeg(started, cancelled, "prefill")), netHTTPPDFake(t, hangingLeg(started, cancelled, "decode"))
	g := newPDGateway(t, []*pdFake{p}, []*pdFake{d}, nil)
	for _, stream := range []string{"false", "true"} {
		c, err := g.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		body := `{"model":"m1","messages":[{"role":"user","content":"x"}],"stream":` + stream + `}`
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		for range 2 {
			<-started
		}
		if n := g.inFlight(); n != 2 {
			t.Fatalf("stream %s: %d in flight while both legs run, want 2", stream, n)
		}
		_ = c.Close()
		got := map[string]bool{}
		for range 2 {
			select {
			case leg := <-cancelled:
				got[leg] = true
			case <-time.After(5 * time.Second):
				t.Fatalf("stream %s: cancelled legs %v, want prefill and decode", stream, got)
			}
		}
		testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	}
}

// TestPDPrefillFailureCancelsTheWaitingDecode: a prefill that fails while its decode waits
// (for KV that will never come) does not wait the decode out: the decode request is
// cancelled and the request goes to another pair at once.
func TestPDPrefillFailureCancelsTheWaitingDecode(t *testing.T) {
	started, cancelled := make(chan string, 4), make(chan string, 4)
	var decodes atomic.Int64
	failing := netHTTPPDFake(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		http.Error(w, `{"error":{"message":"busy"}}`, 503)
	})
	ok := netHTTPPDFake(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		fmt.Fprint(w, `{}`)
	})
	d := netHTTPPDFake(t, func(w http.ResponseWriter, r *http.Request) {
		if decodes.Add(1) == 1 { // the first pair's decode: its prefill failed
			hangingLeg(started, cancelled, "decode")(w, r)
			return
		}
		_, _ = io.ReadAll(r.Body)
		fmt.Fprint(w, decodeAnswer)
	})
	g := newPDGateway(t, []*pdFake{failing, ok}, []*pdFake{d}, nil)
	resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") || string(resp.Header.Peek(headerPrefillWorker)) != "http://10.0.1.2:8000" {
		t.Fatalf("got %d %s (prefill %s), want the second pair's answer", resp.StatusCode(), resp.Body(), resp.Header.Peek(headerPrefillWorker))
	}
	select { // without the cancel, the first decode would hang until the test ends
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the first decode request was not cancelled")
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestPDLegOnAnUnresponsiveWorkerIsCut: a PD leg waiting on a worker that worker/stall found
// unresponsive is cut (its connection closed, a breaker fault), the other leg of the pair is
// given up, and the request is served by another pair; for either leg.
func TestPDLegOnAnUnresponsiveWorkerIsCut(t *testing.T) {
	for _, stuck := range []string{"prefill", "decode"} {
		t.Run(stuck, func(t *testing.T) {
			started, cancelled := make(chan string, 4), make(chan string, 4)
			answer := func(body string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.ReadAll(r.Body)
					fmt.Fprint(w, body)
				}
			}
			prefill := []*pdFake{netHTTPPDFake(t, answer(`{}`)), netHTTPPDFake(t, answer(`{}`))}
			decode := []*pdFake{netHTTPPDFake(t, answer(decodeAnswer)), netHTTPPDFake(t, answer(decodeAnswer))}
			legs := map[string][]*pdFake{"prefill": prefill, "decode": decode}
			subnet := map[string]string{"prefill": "10.0.1", "decode": "10.0.2"}[stuck]
			legs[stuck][0] = netHTTPPDFake(t, hangingLeg(started, cancelled, stuck))
			g := newPDGateway(t, prefill, decode, nil)
			done := make(chan *fasthttp.Response, 1)
			go func() {
				done <- g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"x"}]}`)
			}()
			<-started
			w := g.reg.Current().ByURL("http://" + subnet + ".1:8000")
			w.SetStallState(worker.StallUnresponsive) // as worker/stall does after an unanswered probe
			var resp *fasthttp.Response
			select {
			case resp = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the request waited on the unresponsive worker")
			}
			if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
				t.Fatalf("got %d %s, want another pair's answer", resp.StatusCode(), resp.Body())
			}
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("the leg on the unresponsive worker was not cut")
			}
			if st := w.Breaker.Stats(clock.Nanos()); st.Faults != 1 {
				t.Fatalf("breaker of the unresponsive worker: %+v, want the cut counted as a fault", st)
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
		})
	}
}
