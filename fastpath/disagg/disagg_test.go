package disagg

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// bodies exercise the rewrite: empty objects, whitespace everywhere, the replaced members
// first, in the middle and last, the same names nested (never touched), strings with
// braces, quotes and escapes, unicode, escaped names and duplicates.
var bodies = []struct{ name, body string }{
	{"empty", `{}`},
	{"empty with whitespace", " \t\r\n{ \n\t } \n"},
	{"one member", `{"model":"m"}`},
	{"whitespace everywhere", " {\n  \"model\" :\t\"m\" ,\r\n  \"stream\"  :  true ,\n \"max_tokens\" : 12 \n} "},
	{"replaced first", `{"stream":true,"model":"m","messages":[]}`},
	{"replaced middle", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
	{"replaced last", `{"model":"m","messages":[],"max_tokens":100,"max_completion_tokens":50}`},
	{"replaced only", `{"kv_transfer_params":{"x":1}}`},
	{"all replaced", `{"bootstrap_host":"old","bootstrap_port":1,"bootstrap_room":2,"kv_transfer_params":null,"stream":true,"stream_options":null,"max_tokens":5,"max_completion_tokens":5}`},
	{"duplicates of a replaced name", `{"stream":true,"a":1,"stream":false,"bootstrap_room":1,"bootstrap_room":2}`},
	{"escaped names", `{"stre\u0061m":true,"bootstrap\u005fhost":"x","max_tokens\u0000":1,"\u006b\u0076_transfer_params":{}}`},
	{"near names", `{"Stream":1,"streams":2,"stream ":3,"max_token":4,"bootstrap":5}`},
	{"nested same names", `{"model":"m","messages":[{"role":"user","content":"hi","stream":true,"bootstrap_host":"x"}],"tools":[{"function":{"parameters":{"max_tokens":{"type":"integer"},"kv_transfer_params":{}}}}],"meta":{"stream":false,"stream_options":{}}}`},
	{"strings with structure", `{"a":"{\"stream\":true}","b":"}]{[,:","c":"\\","d":"\"","e":"\\\"stream\\\":1","stream":"\"}"}`},
	{"escapes", `{"s":"\b\f\n\r\t\/\\\"\u0000\u001f\uD83D\uDE00\ud800x","stream":true}`},
	{"unicode", `{"model":"模型","messages":[{"role":"user","content":"héllo 😀 مرحبا"}],"ключ":"значение"}`},
	{"numbers and literals", `{"a":0,"b":-1.5e+10,"c":1E-2,"d":123456789012345678901234567890,"e":true,"f":false,"g":null,"max_tokens":-0}`},
	{"deep", `{"a":` + strings.Repeat(`[{"stream":`, 50) + `1` + strings.Repeat(`}]`, 50) + `}`},
}

// invalid are not one well-formed JSON object: each must be ErrInvalidBody, never a panic.
var invalid = []string{
	``, ` `, `[]`, `"s"`, `1`, `null`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`,
	`{"a":1 "b":2}`, `{"a":1}}`, `{"a":1} {}`, `{"a":1} x`, `{a:1}`, `{'a':1}`, `{"a":[1,]}`,
	`{"a":[}`, `{"a":{]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`,
	`{"a":tru}`, `{"a":nulll}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}",
	"{\"a\x1f\":1}", `{"a":"unterminated}`, `{"a":"\"}`, `{"a\":1}`, "{\"a\":1}\x00",
	`{"a":NaN}`, `{"a":Infinity}`, `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

func TestRewriteBodies(t *testing.T) {
	prefix := []byte("prefix:")
	for _, c := range bodies {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			dst := append([]byte(nil), prefix...)
			out, err := AppendBootstrap(dst, body, "10.0.0.7", 8998, 42)
			checkRewrite(t, prefix, body, out, err, bootstrapSet("10.0.0.7", 8998, 42))
			out, err = AppendVLLMPrefill(dst, body, false)
			checkRewrite(t, prefix, body, out, err, prefillCompletion)
			out, err = AppendVLLMPrefill(dst, body, true)
			checkRewrite(t, prefix, body, out, err, prefillChat)
			params := []byte(`{"remote_engine_id":"e1","remote_block_ids":[1,2,3],"remote_host":"10.0.0.7","remote_port":5600,"do_remote_prefill":true}`)
			out, err = AppendVLLMDecode(dst, body, params)
			checkRewrite(t, prefix, body, out, err, decodeSet(params))
			set := []Member{{Name: "model", Value: []byte(`"rewritten"`)}, {Name: "messages"}}
			out, err = Rewrite(dst, body, set...)
			checkRewrite(t, prefix, body, out, err, set)
		})
	}
}

func TestRewriteInvalid(t *testing.T) {
	prefix := []byte("keep")
	for _, s := range invalid {
		body := []byte(s)
		dst := append(make([]byte, 0, 64), prefix...)
		out, err := AppendBootstrap(dst, body, "h", 1, 1)
		checkRewrite(t, prefix, body, out, err, bootstrapSet("h", 1, 1))
		out, err = AppendVLLMPrefill(dst, body, true)
		checkRewrite(t, prefix, body, out, err, prefillChat)
		out, err = AppendVLLMDecode(dst, body, []byte(`{}`))
		checkRewrite(t, prefix, body, out, err, decodeSet([]byte(`{}`)))
		if raw, ok := KVTransferParams(body); ok || raw != nil {
			t.Errorf("KVTransferParams(%q) = %q, %v; want nil, false", s, raw, ok)
		}
	}
}

// TestDepthLimit: the same nesting limit as encoding/json, counted from the body.
func TestDepthLimit(t *testing.T) {
	for _, depth := range []int{MaxDepth, MaxDepth + 1} {
		body := []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		_, err := AppendVLLMPrefill(nil, body, false)
		if (err == nil) != json.Valid(body) || (err == nil) != (depth <= MaxDepth) {
			t.Errorf("depth %d: err %v, json.Valid %v", depth, err, json.Valid(body))
		}
	}
}

// TestExactOutput pins the output format: members compact, set members last.
func TestExactOutput(t *testing.T) {
	const kv = `{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`
	for _, c := range []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"bootstrap empty", func() ([]byte, error) { return AppendBootstrap(nil, []byte(" { } "), "h", 8998, 7) },
			`{"bootstrap_host":"h","bootstrap_port":8998,"bootstrap_room":7}`},
		{"bootstrap replaces", func() ([]byte, error) {
			return AppendBootstrap(nil, []byte(`{ "bootstrap_room" : 1 , "text" : "x" }`), "[fe80::1]", 0, math.MaxInt64)
		}, `{"text":"x","bootstrap_host":"fe80::1","bootstrap_port":null,"bootstrap_room":9223372036854775807}`},
		{"bootstrap escapes host", func() ([]byte, error) { return AppendBootstrap(nil, []byte(`{}`), "a\"b\\c\n\x01\xff", -1, 0) },
			`{"bootstrap_host":"a\"b\\c\n\u0001\ufffd","bootstrap_port":null,"bootstrap_room":0}`},
		{"prefill completion", func() ([]byte, error) {
			return AppendVLLMPrefill(nil, []byte(`{"prompt":"p","stream":true,"stream_options":{"include_usage":true},"max_tokens":64}`), false)
		}, `{"prompt":"p","kv_transfer_params":` + kv + `,"stream":false,"max_tokens":1}`},
		{"prefill chat", func() ([]byte, error) {
			return AppendVLLMPrefill(nil, []byte(`{"messages":[{"role":"user","content":"c","stream":true}],"max_completion_tokens":9}`), true)
		}, `{"messages":[{"role":"user","content":"c","stream":true}],"kv_transfer_params":` + kv + `,"stream":false,"max_tokens":1,"max_completion_tokens":1}`},
		{"decode", func() ([]byte, error) {
			return AppendVLLMDecode(nil, []byte(`{"kv_transfer_params":{"client":1},"stream":true}`), []byte(` {"remote_block_ids":[1]} `))
		}, `{"stream":true,"kv_transfer_params": {"remote_block_ids":[1]} }`},
	} {
		got, err := c.got()
		if err != nil || string(got) != c.want {
			t.Errorf("%s:\n got %s, %v\nwant %s", c.name, got, err, c.want)
		}
		// And the map view a last-wins parser has agrees with the token walk.
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if ms, _ := topMembers(got); len(ms) != len(m) {
			t.Errorf("%s: duplicate names in %s", c.name, got)
		}
	}
}

func TestBootstrapArguments(t *testing.T) {
	dst := []byte("x")
	if out, err := AppendBootstrap(dst, []byte(`{}`), "h", 65536, 1); !errors.Is(err, ErrPort) || string(out) != "x" {
		t.Errorf("port 65536: %q, %v", out, err)
	}
	if out, err := AppendBootstrap(dst, []byte(`{}`), "h", 1, 1<<63); !errors.Is(err, ErrRoom) || string(out) != "x" {
		t.Errorf("room 2^63: %q, %v", out, err)
	}
	if out, err := AppendBootstrap(nil, []byte(`{}`), "h", 65535, 1<<63-1); err != nil {
		t.Errorf("port 65535, room 2^63-1: %q, %v", out, err)
	}
	// Only a pair of surrounding brackets is an IPv6 literal's; anything else is kept.
	for host, want := range map[string]string{"[::1]": "::1", "::1": "::1", "[": "[", "[]": "", "[a": "[a", "a]": "a]", "[[x]]": "[x]"} {
		out, err := AppendBootstrap(nil, []byte(`{}`), host, 1, 1)
		var v struct {
			BootstrapHost string `json:"bootstrap_host"`
		}
		if err != nil || json.Unmarshal(out, &v) != nil || v.BootstrapHost != want {
			t.Errorf("host %q: %s, %v; want %q", host, out, err, want)
		}
	}
}

func TestDecodeParamsMustBeObject(t *testing.T) {
	for _, p := range []string{``, `null`, `[]`, `"x"`, `{`, `{"a":1}x`, `{"a":1}{}`, `1`} {
		if out, err := AppendVLLMDecode([]byte("d"), []byte(`{}`), []byte(p)); !errors.Is(err, ErrInvalidBody) || string(out) != "d" {
			t.Errorf("params %q: %q, %v", p, out, err)
		}
	}
}

func TestKVTransferParams(t *testing.T) {
	for _, c := range []struct {
		resp string
		want string // "" means not ok
	}{
		{`{"id":"cmpl-1","choices":[{"text":"x"}],"kv_transfer_params":{"remote_block_ids":[1,2],"remote_host":"h"}}`, `{"remote_block_ids":[1,2],"remote_host":"h"}`},
		{` { "kv_transfer_params" :  {}  } `, `{}`},
		{`{"kv_transfer_params":{"a":{"kv_transfer_params":null}},"usage":{}}`, `{"a":{"kv_transfer_params":null}}`},
		{`{"kv_transfer_params":null}`, ``},
		{`{"kv_transfer_params":"{}"}`, ``},
		{`{"kv_transfer_params":[{}]}`, ``},
		{`{"choices":[{"kv_transfer_params":{}}],"x":{"kv_transfer_params":{}}}`, ``},
		{`{}`, ``},
		{`{"kv_transfer_params":{"a":1},"kv_transfer_params":{"b":2}}`, `{"b":2}`},
		{`{"kv_transfer_params":{"a":1},"kv_transfer_params":null}`, ``},
		{`{"kv\u005ftransfer_params":{"esc":1}}`, `{"esc":1}`},
		{`{"kv_transfer_params":{"a":1}`, ``},
		{`{"kv_transfer_params":{"a":1}} trailing`, ``},
		{`[{"kv_transfer_params":{}}]`, ``},
	} {
		raw, ok := KVTransferParams([]byte(c.resp))
		if ok != (c.want != "") || string(raw) != c.want {
			t.Errorf("KVTransferParams(%s) = %s, %v; want %s", c.resp, raw, ok, c.want)
		}
		// The reference: encoding/json's view of the same member.
		var ref struct {
			KV json.RawMessage `json:"kv_transfer_params"`
		}
		refOK := isObjectRef([]byte(c.resp)) && json.Unmarshal([]byte(c.resp), &ref) == nil && len(ref.KV) > 0 && ref.KV[0] == '{'
		if refOK != ok {
			t.Errorf("KVTransferParams(%s): ok %v, encoding/json says %v", c.resp, ok, refOK)
		}
	}
}

func TestNewRoom(t *testing.T) {
	seen := map[uint64]bool{}
	var or uint64
	for range 1000 {
		r := NewRoom()
		if r >= 1<<63 {
			t.Fatalf("room %d not below 2^63", r)
		}
		if seen[r] {
			t.Fatalf("room %d repeated in 1000 draws", r)
		}
		seen[r] = true
		or |= r
	}
	// Every one of the 63 bits was set at least once (fails with probability 63·2^-1000).
	if or != 1<<63-1 {
		t.Errorf("bits never set: %x", ^or&(1<<63-1))
	}
}
