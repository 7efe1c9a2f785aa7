package disagg

import (
	"encoding/json"
	"slices"
	"testing"
)

// multimodalCases are bodies whose media the encode leg must see, and bodies it must not.
var multimodalCases = []struct {
	name string
	body string
	want bool
}{
	{"text only chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
	{"text parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, false},
	{"image part", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"http://x/a.png"}}]}]}`, true},
	{"audio part in a later message", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, true},
	{"video part", `{"messages":[{"content":[{"type":"video_url","video_url":{"url":"v"}}]}]}`, true},
	{"escaped type name and value", `{"messages":[{"content":[{"typ\u0065":"image\u005furl"}]}]}`, true},
	{"last type wins", `{"messages":[{"content":[{"type":"image_url","type":"text","text":"x"}]}]}`, false},
	{"last content wins", `{"messages":[{"content":[{"type":"image_url"}],"content":"plain"}]}`, false},
	{"last messages wins", `{"messages":[{"content":[{"type":"image_url"}]}],"messages":[]}`, false},
	{"refusal part is not media", `{"messages":[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`, false},
	{"media type nested deeper is not a part", `{"messages":[{"content":"x","tool_calls":[{"type":"image_url"}]}]}`, false},
	{"generate image_data", `{"text":"describe","image_data":"http://x/a.png"}`, true},
	{"generate image_data list", `{"text":"describe","image_data":["a","b"]}`, true},
	{"generate null image_data", `{"text":"describe","image_data":null}`, false},
	{"generate audio_data", `{"input_ids":[1,2],"audio_data":"a.wav"}`, true},
	{"generate video_data", `{"text":"t","video_data":"v.mp4"}`, true},
	{"image_data nested is not top-level", `{"sampling_params":{"image_data":"x"}}`, false},
	{"invalid body", `{"messages":[{"content":[{"type":"image_url"}]}]`, false},
	{"not an object", `[{"type":"image_url"}]`, false},
	{"trailing garbage", `{"image_data":"x"} x`, false},
}

func TestMultimodal(t *testing.T) {
	for _, c := range multimodalCases {
		if got := Multimodal([]byte(c.body)); got != c.want {
			t.Errorf("%s: Multimodal = %v, want %v", c.name, got, c.want)
		}
		if ref := multimodalRef([]byte(c.body)); ref != c.want {
			t.Errorf("%s: the reference says %v, want %v", c.name, ref, c.want)
		}
	}
}

// multimodalRef is Multimodal by encoding/json, the fuzz target's oracle.
func multimodalRef(body []byte) bool {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	for _, k := range []string{"image_data", "audio_data", "video_data"} {
		if d, ok := v[k]; ok && d != nil {
			return true
		}
	}
	msgs, _ := v["messages"].([]any)
	for _, m := range msgs {
		msg, _ := m.(map[string]any)
		parts, _ := msg["content"].([]any)
		for _, p := range parts {
			part, _ := p.(map[string]any)
			if t, ok := part["type"].(string); ok && slices.Contains(MediaPartTypes, t) {
				return true
			}
		}
	}
	return false
}

// FuzzMultimodal: Multimodal agrees with encoding/json on every input and never panics.
func FuzzMultimodal(f *testing.F) {
	addBodySeeds(f, func(b []byte) { f.Add(b) })
	for _, c := range multimodalCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := Multimodal(body), multimodalRef(body); got != want {
			t.Fatalf("Multimodal(%q) = %v, encoding/json says %v", body, got, want)
		}
	})
}

// FuzzRewriteEPD: the encode handshake and the vLLM encode body keep every other member and
// set exactly theirs; anything but an object is ErrInvalidBody with dst unchanged.
func FuzzRewriteEPD(f *testing.F) {
	addBodySeeds(f, func(b []byte) { f.Add(b, "10.0.0.9", 8999, uint64(7), true) })
	f.Add([]byte(`{"encode_bootstrap_host":"x","encode_bootstrap_room":1}`), "[::1]", 0, uint64(1<<63-1), false)
	f.Fuzz(func(t *testing.T, body []byte, host string, port int, room uint64, chat bool) {
		port %= 65536
		room &= 1<<63 - 1
		prefix := []byte("p")
		out, err := AppendEncodeHandshake(prefix, body, host, port, room)
		checkRewrite(t, prefix, body, out, err, encodeHandshakeSet(host, port, room))
		set := encodeCompletion
		if chat {
			set = encodeChat
		}
		out, err = AppendVLLMEncode(prefix, body, chat)
		checkRewrite(t, prefix, body, out, err, set)
	})
}

// encodeHandshakeSet is what AppendEncodeHandshake sets, as Members.
func encodeHandshakeSet(host string, port int, room uint64) []Member {
	set := bootstrapSet(host, port, room)
	for i := range set {
		set[i].Name = "encode_" + set[i].Name
	}
	return set
}

func TestEncodeRewrites(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"encode_bootstrap_room":5,"messages":[{"content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`)
	out, err := AppendEncodeHandshake(nil, body, "[fe80::2]", 0, 9)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"messages":[{"content":[{"type":"image_url","image_url":{"url":"u"}}]}],"encode_bootstrap_host":"fe80::2","encode_bootstrap_port":null,"encode_bootstrap_room":9}`
	if string(out) != want {
		t.Errorf("AppendEncodeHandshake:\n got %s\nwant %s", out, want)
	}
	out, err = AppendVLLMEncode(nil, body, true)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"model":"m","encode_bootstrap_room":5,"messages":[{"content":[{"type":"image_url","image_url":{"url":"u"}}]}],"stream":false,"max_tokens":1,"max_completion_tokens":1}`
	if string(out) != want {
		t.Errorf("AppendVLLMEncode:\n got %s\nwant %s", out, want)
	}
	if _, err := AppendEncodeHandshake(nil, body, "h", 70000, 1); err != ErrPort {
		t.Errorf("port 70000: %v, want ErrPort", err)
	}
	if _, err := AppendEncodeHandshake(nil, body, "h", 1, 1<<63); err != ErrRoom {
		t.Errorf("room 2^63: %v, want ErrRoom", err)
	}
}
