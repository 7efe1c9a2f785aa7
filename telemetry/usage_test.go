package telemetry

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	cases := []struct {
		name                      string
		in                        string
		prompt, completion, cache int32
		ok                        bool
	}{
		{"whole answer", `{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`, 12, 7, -1, true},
		{"cached tokens", `{"usage":{"prompt_tokens":100,"total_tokens":130,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":64}}}`, 100, 30, 64, true},
		{"details null", `{"usage":{"prompt_tokens":5,"completion_tokens":16,"prompt_tokens_details":null}}`, 5, 16, -1, true},
		{"stream tail", "usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n", 3, 9, -1, true},
		{"null after counts", "data: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\ndata: {\"usage\":null}\n\n", 4, 2, -1, true},
		{"whitespace", `{"usage" : { "prompt_tokens" : 8 , "completion_tokens" : 1 } }`, 8, 1, -1, true},
		{"no usage", `{"choices":[]}`, -1, -1, -1, false},
		{"only null", `{"usage":null}`, -1, -1, -1, false},
		{"cut object", `{"usage":{"prompt_tokens":8,"completion_tok`, -1, -1, -1, false},
		{"escaped in content", `{"content":"say \"usage\":{\"prompt_tokens\":1}"}`, -1, -1, -1, false},
		{"fraction ignored", `{"usage":{"prompt_tokens":1.5,"completion_tokens":2}}`, -1, 2, -1, true},
		{"clamped", `{"usage":{"prompt_tokens":99999999999,"completion_tokens":0}}`, 2147483647, 0, -1, true},
		{"empty object", `{"usage":{}}`, -1, -1, -1, false},
		{"generate meta_info", `{"text":"the mock","output_ids":[1,2],"meta_info":{"id":"x","prompt_tokens":6,"completion_tokens":2,"cached_tokens":3,"finish_reason":{"type":"length","length":2}}}`, 6, 2, 3, true},
		{"usage before meta_info", `{"usage":{"prompt_tokens":1,"completion_tokens":2},"meta_info":{"prompt_tokens":9,"completion_tokens":9}}`, 1, 2, -1, true},
		{"nested unknown", `{"usage":{"x":{"y":[1,{"z":2}]},"completion_tokens":3}}`, -1, 3, -1, true},
	}
	for _, c := range cases {
		p, comp, cached, ok := Usage([]byte(c.in))
		if p != c.prompt || comp != c.completion || cached != c.cache || ok != c.ok {
			t.Errorf("%s: Usage = %d, %d, %d, %v; want %d, %d, %d, %v", c.name, p, comp, cached, ok, c.prompt, c.completion, c.cache, c.ok)
		}
	}
}

func TestUsageDoesNotAllocate(t *testing.T) {
	b := []byte(`{"choices":[{"x":[1,2,{"a":null}]}],"usage":{"prompt_tokens":100,"completion_tokens":30,"extra":{"k":[1]},"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0}}}`)
	if n := testing.AllocsPerRun(100, func() { Usage(b) }); n != 0 {
		t.Fatalf("Usage allocates %v times per call", n)
	}
}

// FuzzUsage checks that Usage never panics and, on a well-formed answer with one usage
// object of plain counts, agrees with encoding/json.
func FuzzUsage(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"prompt_tokens":12,"completion_tokens":7}}`,
		`{"usage":{"prompt_tokens":100,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":64}}}`,
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n",
		`{"usage":null}`, `"usage":`, `"usage":{`, `\"usage\":{"prompt_tokens":1}`, `{"usage":{"completion_tokens":-1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, c, k, ok := Usage(b)
		if !ok && (p != -1 || c != -1 || k != -1) {
			t.Fatalf("not ok but counts %d %d %d", p, c, k)
		}
		if ok && p < 0 && c < 0 {
			t.Fatalf("ok without a count")
		}
		if bytes.Count(b, usageKey) != 1 || bytes.Contains(b, metaInfoKey) {
			return
		}
		if bytes.IndexByte(b, '\\') >= 0 { // escaped names: Usage reads plain ones only
			return
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var doc map[string]any
		if d.Decode(&doc) != nil || d.More() {
			return
		}
		u, _ := doc["usage"].(map[string]any)
		want := [2]int32{}
		for i, name := range [2]string{"prompt_tokens", "completion_tokens"} {
			n, _ := u[name].(json.Number)
			v, err := strconv.ParseInt(string(n), 10, 32)
			if err != nil || v < 0 || strings.ContainsAny(string(n), ".eE-") {
				return
			}
			want[i] = int32(v)
		}
		if !ok || p != want[0] || c != want[1] {
			t.Fatalf("Usage(%q) = %d, %d, %v; encoding/json reads %d, %d", b, p, c, ok, want[0], want[1])
		}
	})
}
