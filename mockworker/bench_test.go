package mockworker

import "testing"

// BenchmarkHandle measures the handler alone (no I/O): parse, render, for the null path.
func BenchmarkHandle(b *testing.B) {
	cfg := Config{}.withDefaults()
	w := newWorker(0, "127.0.0.1:1", &cfg, 0)
	for _, bc := range []struct {
		name string
		ex   exchange
	}{
		{"chat", exchange{method: []byte("POST"), path: []byte("/v1/chat/completions"),
			body: []byte(`{"model":"mock-model","messages":[{"role":"user","content":"Hello, how are you today? Tell me a story."}],"max_tokens":16}`)}},
		{"generate", exchange{method: []byte("POST"), path: []byte("/generate"),
			body: []byte(`{"text":"Hello, how are you today? Tell me a story.","sampling_params":{"max_new_tokens":16}}`)}},
		{"health", exchange{method: []byte("GET"), path: []byte("/health")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				buf = w.handle(&bc.ex, buf[:0]).body
			}
		})
	}
}

// BenchmarkStreamEvents measures rendering one 16-token chat stream as HTTP chunks.
func BenchmarkStreamEvents(b *testing.B) {
	a := answer{kind: kindChat, model: "mock-model", id: []byte("chatcmpl-mock-0-1"), created: 1, promptTokens: 11, outputTokens: 16, includeUsage: true}
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range a.outputTokens {
			buf = appendChunk(buf, &a, i)
		}
	}
}
