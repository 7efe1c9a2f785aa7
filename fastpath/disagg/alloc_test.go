//go:build !race

package disagg

import "testing"

// TestAllocs is the zero-allocation promise of the hot path: given a dst with capacity
// (the gateway's pooled buffer), no function allocates, on success or on error.
func TestAllocs(t *testing.T) {
	body := chat4k(t)
	resp := []byte(prefillResponse)
	params, ok := KVTransferParams(resp)
	if !ok {
		t.Fatal("no kv_transfer_params in the response")
	}
	dst := make([]byte, 0, len(body)+1024)
	bad := []byte(`{"a":[1,2}`)
	mm := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"http://x/a.png"}}]}]}`)
	var sink []byte
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"AppendBootstrap", func() { sink, _ = AppendBootstrap(dst[:0], body, "[fe80::1]", 8998, 1<<62) }},
		{"AppendBootstrap escaped host", func() { sink, _ = AppendBootstrap(dst[:0], body, "h\"\x01\xff", 0, 1) }},
		{"AppendVLLMPrefill chat", func() { sink, _ = AppendVLLMPrefill(dst[:0], body, true) }},
		{"AppendVLLMPrefill completion", func() { sink, _ = AppendVLLMPrefill(dst[:0], body, false) }},
		{"AppendVLLMDecode", func() { sink, _ = AppendVLLMDecode(dst[:0], body, params) }},
		{"Rewrite", func() { sink, _ = Rewrite(dst[:0], body, Member{Name: "model", Value: []byte(`"m"`)}) }},
		{"KVTransferParams", func() { sink, _ = KVTransferParams(resp) }},
		{"NewRoom", func() { sink = dst[:NewRoom()&1] }},
		{"error", func() { sink, _ = AppendVLLMPrefill(dst[:0], bad, true) }},
		{"AppendEncodeHandshake", func() { sink, _ = AppendEncodeHandshake(dst[:0], body, "10.0.0.3", 8999, 1<<40) }},
		{"AppendVLLMEncode", func() { sink, _ = AppendVLLMEncode(dst[:0], body, true) }},
		{"Multimodal", func() { sink = dst[:btoi(Multimodal(mm))] }},
		{"Multimodal text only", func() { sink = dst[:btoi(Multimodal(body))] }},
	} {
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
	_ = sink
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
