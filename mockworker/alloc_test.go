//go:build !race

package mockworker

import "testing"

// TestHandleAllocs: the null path (a non-streamed generation, a health probe) allocates
// nothing once the pools are warm.
func TestHandleAllocs(t *testing.T) {
	cfg := DefaultConfig()
	w := newWorker(0, "127.0.0.1:1", &cfg, 0)
	cases := map[string]exchange{
		"chat":     {method: []byte("POST"), path: []byte("/v1/chat/completions"), body: []byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":8}`)},
		"generate": {method: []byte("POST"), path: []byte("/generate"), body: []byte(`{"text":"hello","sampling_params":{"max_new_tokens":4}}`)},
		"health":   {method: []byte("GET"), path: []byte("/health")},
	}
	for name, ex := range cases {
		buf := make([]byte, 0, 4096)
		w.handle(&ex, buf) // warm the pools
		if n := testing.AllocsPerRun(200, func() { w.handle(&ex, buf[:0]) }); n != 0 {
			t.Errorf("%s: %v allocations per request, want 0", name, n)
		}
	}
}
