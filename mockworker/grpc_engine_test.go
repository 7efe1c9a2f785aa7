package mockworker

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
)

// TestGenerateRequestReadsBothDialects: both dialects' sampling parameters reach the run the
// same way, a nil SamplingParams means the defaults, and a request without token ids or with a
// token limit of 0 is refused with the dialect's field name.
func TestGenerateRequestReadsBothDialects(t *testing.T) {
	seven := uint32(7)
	sgl := &sglangpb.SamplingParams{MaxNewTokens: &seven, IgnoreEos: true, StopTokenIds: []uint32{5}, Stop: []string{"x"}, N: 2}
	vl := &vllmpb.SamplingParams{MaxTokens: &seven, IgnoreEos: true, StopTokenIds: []uint32{5}, Stop: []string{"x"}, N: 2}
	for name, sp := range map[string]samplingParams{"sglang": sgl, "vllm": vl} {
		r, err := generateRequest("id", true, []uint32{1, 2}, true, sp, &seven, "max")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.id != "id" || !slices.Equal(r.ids, []uint32{1, 2}) || !r.stream || r.maxTokens != 7 || !r.ignoreEOS ||
			!slices.Equal(r.stopIDs, []uint32{5}) || !slices.Equal(r.stops, []string{"x"}) || r.n != 2 {
			t.Fatalf("%s: read %+v", name, r)
		}
	}
	r, err := generateRequest("id", true, []uint32{1}, false, (*vllmpb.SamplingParams)(nil), nil, "max_tokens")
	if err != nil || r.maxTokens != 0 || r.ignoreEOS || r.n != 0 {
		t.Fatalf("nil sampling params: %+v, %v; want the defaults", r, err)
	}
	zero := uint32(0)
	if _, err := generateRequest("id", true, []uint32{1}, false, sgl, &zero, "max_new_tokens"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "max_new_tokens 0") {
		t.Fatalf("a limit of 0: %v, want InvalidArgument naming max_new_tokens", err)
	}
	if _, err := generateRequest("id", false, nil, false, vl, nil, "max_tokens"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "tokenized") {
		t.Fatalf("no token ids: %v, want InvalidArgument", err)
	}
}
