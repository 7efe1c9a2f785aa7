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
		realisticBody{"embeddings batch", RouteEmbeddings, []byte(`{"model":"e","input":["first doc","second doc"]}`)},
		realisticBody{"rerank", RouteRerank, []byte(`{"query":"what is \u0078","documents":["a","b"]}`)},
		realisticBody{"classify tokens", RouteClassify, []byte(`{"input":[[1,2],[3]]}`)},
		realisticBody{"tokenize", RouteTokenize, []byte(`{"prompt":"hello world"}`)},
		realisticBody{"detokenize", RouteDetokenize, []byte(`{"tokens":[101,102,103]}`)},
		realisticBody{"responses items", RouteResponses, []byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"role":"assistant","content":"b"}],"stream":true}`)},
		realisticBody{"anthropic messages, system after", RouteMessages, []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"q\n"}]}],"system":[{"type":"text","text":"s1"},{"type":"text","text":"s2"}]}`)},
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
