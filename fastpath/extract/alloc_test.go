//go:build !race

package extract

import (
	"strings"
	"testing"
)

// TestExtractAllocs is the zero-allocation promise: after one warm-up call has grown the
// Fields' buffers, extracting the same shape of body allocates nothing.
func TestExtractAllocs(t *testing.T) {
	bodies := realistic(t)
	long := strings.Repeat("k", 100)
	bodies = append(bodies,
		realisticBody{"chat with escapes, parts and long unknown names", RouteChat, []byte(
			`{"model":"m\u0031","rid":"r\u0032","` + long + `":{"` + long + `":[1,2.5e3,"x"]},` +
				`"messages":[{"role":"system","content":"line\none \ud83d\ude00"},` +
				`{"role":"user","content":[{"type":"text","text":"a\tb","` + long + `":null},{"type":"image_url","image_url":{"url":"data:,x"}}]},` +
				`{"role":"assistant","content":"c","reasoning_content":"r\u00e9"}]}`)},
		realisticBody{"completions token batch", RouteCompletions, []byte(`{"prompt":[[1,2,3],[4,5]],"rid":["a","b"]}`)},
		realisticBody{"generate text array", RouteGenerate, []byte(`{"text":["caf\u00e9","x"],"input_ids":null}`)},
	)
	var f Fields
	for _, b := range bodies {
		if err := Extract(b.body, b.route, &f); err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := Extract(b.body, b.route, &f); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Extract, want 0", b.name, allocs)
		}
	}
}
