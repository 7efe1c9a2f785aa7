package loadgen

import (
	"bytes"
	"testing"
	"time"
)

// FuzzConsumeSSE feeds arbitrary bytes, in arbitrary read sizes, to the client's stream
// consumer for each endpoint: it must not panic, and what it reports must be consistent.
func FuzzConsumeSSE(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"), []byte{5})
	f.Add([]byte("data: {\"text\":\"a \",\"meta_info\":{\"completion_tokens\":1}}\n\ndata: {\"text\":\"a b \"}\n\ndata: {\"text\":\"a b \"}\n\ndata: [DONE]\n\n"), []byte{1, 9})
	f.Add([]byte("data: {\"choices\":[{\"text\":\"x\"}]}\r\n\r\ndata: {\"error\":{\"message\":\"boom\"}}\r\n\r\n"), []byte{})
	f.Add([]byte("data: not json\n\n"), []byte{2})
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"), []byte{3})
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		for _, ep := range []Endpoint{EndpointChat, EndpointCompletions, EndpointGenerate} {
			cl := &client{endpoint: ep, stream: true}
			st := &clientState{}
			start := time.Now()
			s := cl.consumeSSE(st, &chunkReader{data: bytes.Clone(body), sizes: sizes}, start, true, sample{status: 200})
			if s.fail == failNone && s.finished.IsZero() {
				t.Fatalf("%s: success without [DONE]", ep)
			}
			if s.fail == failNone && !bytes.Contains(body, []byte("[DONE]")) {
				t.Fatalf("%s: success on a body without [DONE]", ep)
			}
			if s.contentEvents > 0 && len(st.itl) != s.contentEvents-1 {
				t.Fatalf("%s: %d content events but %d gaps", ep, s.contentEvents, len(st.itl))
			}
			if s.contentEvents == 0 && (len(st.itl) != 0 || len(st.answer) != 0) {
				t.Fatalf("%s: no content events, yet %d gaps and answer %q", ep, len(st.itl), st.answer)
			}
			if s.fail != failNone && s.fail != failTruncated && s.fail != failBadResponse && s.fail != failStreamError {
				t.Fatalf("%s: failure kind %d from an in-memory stream", ep, s.fail)
			}
		}
	})
}
