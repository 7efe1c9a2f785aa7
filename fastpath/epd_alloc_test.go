//go:build !race

package fastpath

import (
	"testing"

	"github.com/smg-go/smg/worker"
)

// TestEPDRoundTripDoesNotAllocate is TestPDRoundTripDoesNotAllocate for a multimodal SGLang
// EPD round trip: the encode leg, the handshake and bootstrap rewrites, the prefill and the
// decode, with every worker's in-flight count back to 0 after each.
func TestEPDRoundTripDoesNotAllocate(t *testing.T) {
	if testPlane == DataPlaneEvloop {
		// 59 allocations per round trip there (2026-12-03): the fasthttp handler on a
		// goroutine, its answer streamed back through the loop.
		t.Skip("SMG_TEST_DATA_PLANE=evloop: the event loops serve EPD requests with media through their bridge, which allocates; this test measures the fasthttp plane")
	}
	g := newEPDGateway(t, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, []*pdFake{newPDFake(t, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", epdImageChat)
	if n := g.inFlight(); n != 0 {
		t.Fatalf("%d requests still in flight", n)
	}
}

// BenchmarkEPDRoundTrip measures one non-streamed multimodal SGLang EPD round trip through
// the gateway over in-memory connections, beside BenchmarkPDRoundTrip.
func BenchmarkEPDRoundTrip(b *testing.B) {
	g := newEPDGateway(b, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, []*pdFake{newPDFake(b, nil)}, map[string]string{worker.LabelBootstrapPort: "9001"})
	benchRouteRoundTrip(b, g, "/v1/chat/completions", epdImageChat)
}
