package disagg

import (
	"encoding/json"
	"os"
	"testing"
)

// chat4k is a realistic 3.9 KB chat completions body (the one fastpath/extract measures).
func chat4k(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/chat_4k.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// prefillResponse is what a vLLM prefill engine answers with the NixlConnector.
const prefillResponse = `{"id":"cmpl-8f1c","object":"text_completion","created":1760000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":"The","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_logprobs":null}],"usage":{"prompt_tokens":912,"total_tokens":913,"completion_tokens":1,"prompt_tokens_details":null},"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57],"remote_engine_id":"a1b2c3d4-e5f6-7890-abcd-ef1234567890","remote_host":"10.0.0.7","remote_port":5600,"tp_size":1}}`

func BenchmarkRewrite(b *testing.B) {
	body := chat4k(b)
	params, _ := KVTransferParams([]byte(prefillResponse))
	dst := make([]byte, 0, len(body)+1024)
	for _, c := range []struct {
		name string
		f    func() ([]byte, error)
	}{
		{"AppendBootstrap", func() ([]byte, error) { return AppendBootstrap(dst[:0], body, "10.0.0.7", 8998, 1<<62) }},
		{"AppendVLLMPrefill", func() ([]byte, error) { return AppendVLLMPrefill(dst[:0], body, true) }},
		{"AppendVLLMDecode", func() ([]byte, error) { return AppendVLLMDecode(dst[:0], body, params) }},
		{"EncodingJSONBootstrap", func() ([]byte, error) { return encodingJSONBootstrap(dst[:0], body, "10.0.0.7", 8998, 1<<62) }},
	} {
		b.Run(c.name+"/chat_4k", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkKVTransferParams(b *testing.B) {
	resp := []byte(prefillResponse)
	b.SetBytes(int64(len(resp)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := KVTransferParams(resp); !ok {
			b.Fatal("not found")
		}
	}
}

func BenchmarkNewRoom(b *testing.B) {
	b.ReportAllocs()
	var x uint64
	for b.Loop() {
		x ^= NewRoom()
	}
	_ = x
}

// encodingJSONBootstrap is the obvious alternative, for scale: decode into a map of raw
// members, set three, encode (which also sorts the names).
func encodingJSONBootstrap(dst, body []byte, host string, port int, room uint64) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return dst, err
	}
	m["bootstrap_host"], _ = json.Marshal(host)
	m["bootstrap_port"], _ = json.Marshal(port)
	m["bootstrap_room"], _ = json.Marshal(room)
	out, err := json.Marshal(m)
	return append(dst, out...), err
}
