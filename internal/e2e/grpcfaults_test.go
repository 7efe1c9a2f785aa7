package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestGRPCMidStreamAbortLeavesNothingInFlight: an engine that cuts its Generate stream after
// a few tokens (the mock's abort_after knob) ends the client's stream with an error event and no finish_reason, and the
// gateway's in-flight gauge returns to 0, streamed and not, in both dialects.
func TestGRPCMidStreamAbortLeavesNothingInFlight(t *testing.T) {
	for _, d := range []string{"sglang", "vllm"} {
		t.Run(d, func(t *testing.T) {
			urls := startGRPCMocks(t, 1, d)
			if r := MustDo(t, "POST", "http://"+strings.TrimPrefix(urls[0], "grpc://")+"/admin/config", `{"abort_after":3}`, nil); r.Status != 200 {
				t.Fatalf("admin/config: %d %s", r.Status, r.Body)
			}
			g := StartGateway(t, "--model-path", qwen3Dir(t), "--policy", "round_robin", "--worker-urls", urls[0])
			for range 5 {
				s := MustDo(t, "POST", g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, `,"stream":true,"max_tokens":16`), nil)
				if !strings.Contains(s.Body, `"error":`) || strings.Contains(s.Body, `"finish_reason":"`) {
					t.Fatalf("a stream cut by the engine did not end in an error event: %d %s", s.Status, s.Body)
				}
				u := MustDo(t, "POST", g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, `,"max_tokens":16`), nil)
				if u.Status == 200 {
					t.Fatalf("an unary answer cut by the engine was served as complete: %s", u.Body)
				}
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return inFlight(t, g, urls) == 0 })
		})
	}
}
