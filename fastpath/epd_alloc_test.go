//go:build !race

package fastpath

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// TestEPDRoundTripDoesNotAllocate is TestPDRoundTripDoesNotAllocate for a multimodal SGLang
// EPD round trip: the encode leg, the handshake and bootstrap rewrites, the prefill and the
// decode, held and relayed ("stream":true); the encode leg is an evloop.Call (epd_loop.go).
func TestEPDRoundTripDoesNotAllocate(t *testing.T) {
	g := newEPDGateway(t, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	t.Run("held", func(t *testing.T) { assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", epdImageChat) })
	t.Run("stream", func(t *testing.T) {
		assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", strings.Replace(epdImageChat, `"stream":false`, `"stream":true`, 1))
	})
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestVLLMEPDRoundTripDoesNotAllocate is the same for vLLM's dialect: the encode leg
// unstreamed with one token, then the sequential prefill (its kv_transfer_params read from
// the answer) and the decode.
func TestVLLMEPDRoundTripDoesNotAllocate(t *testing.T) {
	prefill := newFixedPDFake(t, []byte(`{"id":"p","choices":[],"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"e1","remote_block_ids":[1],"remote_host":"10.0.1.1","remote_port":5600}}`))
	g := newEPDGateway(t, []*pdFake{newPDFake(t, nil)}, []*pdFake{prefill}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelKVConnector: "NixlConnector"})
	assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", epdImageChat)
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// newFixedPDFake is an engine that answers body to every request and records nothing, so
// that it allocates nothing (newPDFake's fixed answer is the decode's).
func newFixedPDFake(t testing.TB, body []byte) *pdFake {
	f := &pdFake{ln: newTestListener(t)}
	f.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(body)
	}}
	go func() { _ = f.srv.Serve(f.ln) }()
	t.Cleanup(func() { _ = f.srv.Shutdown(); _ = f.ln.Close() })
	return f
}

// BenchmarkEPDRoundTrip measures one non-streamed multimodal SGLang EPD round trip through
// the gateway over in-memory connections, beside BenchmarkPDRoundTrip.
func BenchmarkEPDRoundTrip(b *testing.B) {
	g := newEPDGateway(b, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	benchRouteRoundTrip(b, g, "/v1/chat/completions", epdImageChat)
}
