//go:build !race

package fastpath

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// TestEPDRoundTripDoesNotAllocate is TestPDRoundTripDoesNotAllocate for a multimodal SGLang
// EPD round trip: the encode leg, the handshake and bootstrap rewrites, the prefill and the
// decode, held on either data plane (the event loops' encode leg is an evloop.Call,
// epd_loop.go) and relayed ("stream":true) on the event loops.
func TestEPDRoundTripDoesNotAllocate(t *testing.T) {
	g := newEPDGateway(t, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	t.Run("held", func(t *testing.T) { assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", epdImageChat) })
	t.Run("stream", func(t *testing.T) {
		if testPlane == DataPlaneFastHTTP {
			t.Skip("the fasthttp plane's streamed PD legs allocate (TestPDRoundTripDoesNotAllocate/stream); only the evloop plane promises 0 (SMG_TEST_DATA_PLANE=evloop)")
		}
		assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", strings.Replace(epdImageChat, `"stream":false`, `"stream":true`, 1))
	})
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// BenchmarkEPDRoundTrip measures one non-streamed multimodal SGLang EPD round trip through
// the gateway over in-memory connections, beside BenchmarkPDRoundTrip.
func BenchmarkEPDRoundTrip(b *testing.B) {
	g := newEPDGateway(b, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	benchRouteRoundTrip(b, g, "/v1/chat/completions", epdImageChat)
}
