package fastpath

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// PD and EPD bodies and --max-buffered-request-bytes. Disaggregation rewrites every body (the
// bootstrap fields, the encode handshake, vLLM's kv_transfer_params) and may send it again to
// another pair, so a PD or EPD body is always read whole and parsed, however large, bounded by
// --max-payload-size (and the --max-request-body-memory budget) like any buffered body: SGLang's
// PD router does the same (it parses each body into a JSON value to inject the bootstrap
// fields). --max-buffered-request-bytes streams bodies on the regular path only.

// sendBody sends body to g's path, chunked when chunked is set, else with a Content-Length.
func (g *gateway) sendBody(path, body string, chunked bool) *fasthttp.Response {
	if !chunked {
		return g.do("POST", path, body)
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gateway" + path)
	req.SetBodyStream(strings.NewReader(body), -1)
	resp := fasthttp.AcquireResponse()
	if err := g.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		g.t.Fatalf("POST %s (chunked): %v", path, err)
	}
	return resp
}

// contentOf returns the first message's text content of a recorded chat body.
func contentOf(t *testing.T, body map[string]any) string {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("a leg got a body without messages: %.200v", body)
	}
	m, _ := msgs[0].(map[string]any)
	switch c := m["content"].(type) {
	case string:
		return c
	case []any: // EPD: text and image parts
		p, _ := c[0].(map[string]any)
		s, _ := p["text"].(string)
		return s
	}
	return ""
}

// TestPDBodyPastTheBufferLimitIsReadWhole: in PD mode a body far past
// --max-buffered-request-bytes, sent with a Content-Length or chunked, is read whole: both legs
// get all of it with the bootstrap fields the gateway added (a streamed body could not be
// rewritten), and a decode leg that answers 503 is retried on another pair with the whole body
// again (a streamed body is sent once).
func TestPDBodyPastTheBufferLimitIsReadWhole(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(map[bool]string{false: "content-length", true: "chunked"}[chunked], func(t *testing.T) {
			p := newPDFake(t, answerJSON(`{}`))
			busy, ok := newPDFake(t, status503), newPDFake(t, answerJSON(decodeAnswer))
			cfg := Config{Retry: fastRetries(), MaxBufferedBody: 4096, MaxPayloadSize: 1 << 20}
			g := newPDGatewayConfig(t, cfg, []*pdFake{p}, []*pdFake{busy, ok}, map[string]string{worker.LabelBootstrapPort: "9001"})
			text := strings.Repeat("0123456789", 30_000) // 300 KB, 73 times the buffer limit
			body := `{"model":"m1","messages":[{"role":"user","content":"` + text + `"}]}`
			for i := range 2 { // round robin: one of the two meets the busy decode worker first
				if resp := g.sendBody("/v1/chat/completions", body, chunked); resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
					t.Fatalf("request %d: %d %.300s", i, resp.StatusCode(), resp.Body())
				}
			}
			if nb, nok := len(busy.received()), len(ok.received()); nb == 0 || nok != 2 || len(p.received()) != nb+nok {
				t.Fatalf("prefill %d, busy decode %d, ok decode %d requests; want the 503s retried on another pair, each with its prefill",
					len(p.received()), len(busy.received()), len(ok.received()))
			}
			for _, leg := range [][]map[string]any{p.received(), busy.received(), ok.received()} {
				for _, b := range leg {
					if got := contentOf(t, b); got != text {
						t.Fatalf("a leg got %d bytes of the prompt, want all %d", len(got), len(text))
					}
					if _, ok := b["bootstrap_room"].(float64); !ok || b["bootstrap_port"] != float64(9001) {
						t.Fatalf("a leg got the body without the bootstrap fields: room %v port %v", b["bootstrap_room"], b["bootstrap_port"])
					}
				}
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
		})
	}
}

// TestEPDBodyPastTheBufferLimitIsReadWhole: the same in EPD mode: the encode, prefill and
// decode legs all get the whole prompt of a body past --max-buffered-request-bytes.
func TestEPDBodyPastTheBufferLimitIsReadWhole(t *testing.T) {
	e := newPDFake(t, answerJSON(`{"encoded":true}`))
	p := newPDFake(t, answerJSON(`{"prefill":1}`))
	d := newPDFake(t, answerJSON(decodeAnswer))
	rc := policy.RouterConfig{DefaultPolicy: "round_robin", PD: &policy.PDPolicies{Prefill: "round_robin", Decode: "round_robin", Encode: "round_robin"}}
	cfg := Config{Retry: DefaultRetryConfig(), MaxBufferedBody: 4096, MaxPayloadSize: 1 << 20}
	g := newLegsGateway(t, cfg, rc, legFakes{"10.0.3", worker.TypeEncode, map[string]string{worker.LabelBootstrapPort: "9100"}, []*pdFake{e}},
		legFakes{"10.0.1", worker.TypePrefill, map[string]string{worker.LabelBootstrapPort: "9001"}, []*pdFake{p}},
		legFakes{"10.0.2", worker.TypeDecode, nil, []*pdFake{d}})
	text := strings.Repeat("what is it? ", 25_000) // 300 KB
	body := `{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"` + text + `"},{"type":"image_url","image_url":{"url":"http://x/a.png"}}]}],"stream":false}`
	for _, chunked := range []bool{false, true} {
		if resp := g.sendBody("/v1/chat/completions", body, chunked); resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
			t.Fatalf("chunked %v: %d %.300s", chunked, resp.StatusCode(), resp.Body())
		}
	}
	for leg, bodies := range map[string][]map[string]any{"encode": e.received(), "prefill": p.received(), "decode": d.received()} {
		if len(bodies) != 2 {
			t.Fatalf("the %s leg got %d requests, want 2", leg, len(bodies))
		}
		for _, b := range bodies {
			if got := contentOf(t, b); got != text {
				t.Fatalf("the %s leg got %d bytes of the prompt, want all %d", leg, len(got), len(text))
			}
		}
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// countingListener counts the connections accepted on it.
type countingListener struct {
	dialListener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (c net.Conn, err error) {
	c, err = l.dialListener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestPDBodyPastThePayloadLimitReachesNoWorker: in PD mode a body past --max-payload-size is
// refused with 413 before any leg is picked, whether it declares its length or comes chunked
// (its chunks then run past the limit while the gateway reads them): no worker is even
// connected to, so none can get part of it; nothing is in flight.
func TestPDBodyPastThePayloadLimitReachesNoWorker(t *testing.T) {
	pl, dl := &countingListener{dialListener: newTestListener(t)}, &countingListener{dialListener: newTestListener(t)}
	p, d := newPDFakeOn(t, pl, answerJSON(`{}`)), newPDFakeOn(t, dl, answerJSON(decodeAnswer))
	const limit = 100_000
	g := newPDGatewayConfig(t, Config{Retry: DefaultRetryConfig(), MaxBufferedBody: 4096, MaxPayloadSize: limit}, []*pdFake{p}, []*pdFake{d}, nil)
	body := bigChat(2 * limit)
	for _, chunked := range []bool{false, true} {
		c, err := g.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		go func() { // the gateway may answer and close before the client has sent it all
			if !chunked {
				fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				return
			}
			fmt.Fprint(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n")
			for i := 0; i < len(body); i += 16 << 10 {
				part := body[i:min(i+16<<10, len(body))]
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(part), part); err != nil {
					return
				}
			}
			fmt.Fprint(c, "0\r\n\r\n")
		}()
		resp := fasthttp.AcquireResponse()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := resp.Read(bufio.NewReader(c)); err != nil || resp.StatusCode() != 413 {
			t.Fatalf("chunked %v: %v %d %.300s, want 413", chunked, err, resp.StatusCode(), resp.Body())
		}
		fasthttp.ReleaseResponse(resp)
		_ = c.Close()
	}
	if n := pl.accepted.Load() + dl.accepted.Load(); n != 0 {
		t.Fatalf("the workers accepted %d connections for bodies past --max-payload-size, want none", n)
	}
	if resp := g.do("POST", "/v1/chat/completions", bigChat(limit/2)); resp.StatusCode() != 200 {
		t.Fatalf("a body under the limit: %d %.300s", resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}
