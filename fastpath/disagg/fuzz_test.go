package disagg

import (
	"bytes"
	"encoding/json"
	"testing"
)

// fuzzSeeds add to bodies and invalid the shapes near the scanner's edges: every escape,
// invalid UTF-8, short strings around the 16-byte fast path, numbers in every form.
var fuzzSeeds = []string{
	`{"a":"0123456789abcde","b":"0123456789abcdef","c":"0123456789abcdefg"}`,
	`{"0123456789abcdef\"":1,"stream":"0123456789\\abcdef"}`,
	"{\"model\":\"bad \xff utf8 \xc3\x28 \xed\xa0\x80 ok \xe2\x82\xac\",\"stream\xff\":1}",
	`{"a":[0,-0,1.5,-1.5e10,1E+2,2e-3,true,false,null,"s",{},[],[[]],{"x":{}}]}`,
	`{"stream":true,"stream":true,"stream":true}`,
	`{"s\u0074ream":1,"\ud83d\ude00":2,"\ud83d":3}`,
	`{"kv_transfer_params":{"remote_block_ids":[1,2],"remote_host":"h","remote_port":1}}`,
	`{"a":1}` + "\n",
	`{"a":"` + "\t" + `"}`,
}

func addBodySeeds(f *testing.F, add func(body []byte)) {
	for _, c := range bodies {
		add([]byte(c.body))
	}
	for _, s := range invalid {
		add([]byte(s))
	}
	for _, s := range fuzzSeeds {
		add([]byte(s))
	}
	add(chat4k(f))
	add([]byte(prefillResponse))
}

// FuzzRewriteBootstrap: no panic; a valid object comes out valid with exactly its members
// minus the bootstrap ones plus the new ones; anything else is ErrInvalidBody with dst
// unchanged.
func FuzzRewriteBootstrap(f *testing.F) {
	addBodySeeds(f, func(b []byte) { f.Add(b, "10.0.0.7", 8998, uint64(42)) })
	f.Add([]byte(`{"bootstrap_host":"x"}`), "[fe80::1%eth0]", 0, uint64(1<<63-1))
	f.Add([]byte(`{}`), "a\"\\\x00\xff\u2028", -5, uint64(0))
	f.Fuzz(func(t *testing.T, body []byte, host string, port int, room uint64) {
		port %= 65536
		room &= 1<<63 - 1
		orig := string(body)
		prefix := []byte("p")
		out, err := AppendBootstrap(prefix, body, host, port, room)
		if string(body) != orig {
			t.Fatal("body modified")
		}
		checkRewrite(t, prefix, body, out, err, bootstrapSet(host, port, room))
	})
}

// FuzzRewriteVLLM: the prefill rewrite of both kinds, and the decode rewrite with the
// params found in the same input read as a response.
func FuzzRewriteVLLM(f *testing.F) {
	addBodySeeds(f, func(b []byte) {
		f.Add(b, true, []byte(`{"remote_block_ids":[1]}`))
		f.Add(b, false, []byte(`null`))
	})
	f.Fuzz(func(t *testing.T, body []byte, chat bool, params []byte) {
		orig := string(body)
		prefix := []byte("p")
		set := prefillCompletion
		if chat {
			set = prefillChat
		}
		out, err := AppendVLLMPrefill(prefix, body, chat)
		checkRewrite(t, prefix, body, out, err, set)

		paramsOK := isObjectRef(params)
		out, err = AppendVLLMDecode(prefix, body, params)
		if !paramsOK {
			if err == nil || string(out) != "p" {
				t.Fatalf("params %q accepted: %q, %v", params, out, err)
			}
		} else {
			checkRewrite(t, prefix, body, out, err, decodeSet(params))
		}
		if string(body) != orig {
			t.Fatal("body modified")
		}
	})
}

// FuzzKVTransferParams: KVTransferParams agrees with encoding/json on acceptance and value.
func FuzzKVTransferParams(f *testing.F) {
	addBodySeeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, resp []byte) {
		raw, ok := KVTransferParams(resp)
		var ref map[string]json.RawMessage
		refOK := isObjectRef(resp) && json.Unmarshal(resp, &ref) == nil
		var want json.RawMessage
		if refOK {
			want = bytes.TrimSpace(ref["kv_transfer_params"])
			refOK = len(want) > 0 && want[0] == '{'
		}
		if ok != refOK {
			t.Fatalf("KVTransferParams(%q) ok = %v, encoding/json says %v (%q)", resp, ok, refOK, want)
		}
		if !ok {
			if raw != nil {
				t.Fatalf("raw %q when not ok", raw)
			}
			return
		}
		// RawMessage values are copied as sent, so the bytes must be equal.
		if !bytes.Equal(raw, want) {
			t.Fatalf("KVTransferParams(%q) = %q, want %q", resp, raw, want)
		}
		if !isView(raw, resp) {
			t.Fatal("raw is not a view into resp")
		}
	})
}

// isView reports whether sub is a subslice of b (shares its memory).
func isView(sub, b []byte) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if &b[i] == &sub[0] {
			return true
		}
	}
	return false
}
