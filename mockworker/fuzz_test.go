package mockworker

import (
	"bytes"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/valyala/fastjson"

	"github.com/smg-go/smg/internal/jsonx"
)

// FuzzParseGenRequest: any body either fails with an error or yields sane counts, and the
// response rendered from it is valid JSON.
func FuzzParseGenRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hello"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_completion_tokens":2}`,
		`{"prompt":["a","b"],"max_tokens":null}`,
		`{"prompt":[1,2,3]}`,
		`{"text":"x","rid":"r\u0000\"","sampling_params":{"max_new_tokens":2}}`,
		`{"input_ids":[[1],[2,3]],"stream":false}`,
		`{"messages":`, `[]`, `null`, `{"stream":"x"}`,
	} {
		for k := range 3 {
			f.Add(uint8(k), []byte(s))
		}
	}
	var p fastjson.Parser
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := genKind(k % 3)
		r, err := parseGenRequest(&p, kind, body, nil, nil)
		if err != nil {
			return
		}
		if r.promptTokens < 0 || r.maxTokens < 0 || r.maxTokens > maxTokensLimit || r.inputIDs < 0 {
			t.Fatalf("insane request %+v", r)
		}
		a := answer{kind: kind, model: "m", id: jsonx.AppendEscaped(nil, r.rid), promptTokens: r.promptTokens, outputTokens: min(r.maxTokens, 4) + 1, includeUsage: r.includeUsage}
		if !json.Valid(a.appendBody(nil)) {
			t.Fatalf("invalid body for %q", body)
		}
		for i := range a.outputTokens {
			for _, ev := range bytes.Split(bytes.TrimSuffix(a.appendEvent(nil, i), []byte("\n\n")), []byte("\n\n")) {
				data := bytes.TrimPrefix(ev, []byte("data: "))
				if string(data) != "[DONE]" && !json.Valid(data) {
					t.Fatalf("invalid event %q", ev)
				}
			}
		}
	})
}

// FuzzParseFault: any header value either fails or yields an in-range fault.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"", "hang", "reset", "status=503", " status=429 ,hang", "abort-after=3, slow-ttft=20", "abort-after=-1", "slow-ttft=x", "status=99", "x=1", ",,"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ft, err := parseFault(in)
		if err != nil {
			return
		}
		if ft.status != 0 && (ft.status < 400 || ft.status > 599) {
			t.Fatalf("status %d out of range from %q", ft.status, in)
		}
		if ft.abortAfter < 0 || ft.abortAfter > maxTokensLimit || ft.slowTTFT < 0 || ft.slowTTFT > time.Hour {
			t.Fatalf("insane fault %+v from %q", ft, in)
		}
	})
}

// FuzzParseAdminConfig: an accepted update always validates and round-trips.
func FuzzParseAdminConfig(f *testing.F) {
	for _, s := range []string{`{"status":503}`, `{"delay_ms":10,"healthy":false}`, `{"status":0}`, `{}`, `{"x":1}`, `[`,
		`{"failure_rate":0.25,"failure_status":429,"prefill_multiplier":2.5,"decode_multiplier":0,"health_flap_ms":100}`} {
		f.Add([]byte(s))
	}
	var p fastjson.Parser
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := parseAdminConfig(&p, in, AdminConfig{})
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted invalid %+v from %q: %v", c, in, err)
		}
		back, err := parseAdminConfig(&p, appendAdminConfig(nil, c), AdminConfig{})
		if err != nil || back != c {
			t.Fatalf("round trip %+v -> %+v, %v", c, back, err)
		}
	})
}

// FuzzParsePD: the PD parser of every dialect and role never panics; what it accepts is in
// range, and a vLLM prefill's kv_transfer_params render as valid JSON.
func FuzzParsePD(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"x","bootstrap_host":"127.0.0.1","bootstrap_port":null,"bootstrap_room":9223372036854775807}`,
		`{"text":"x","bootstrap_host":"127.0.0.1","bootstrap_port":8998,"bootstrap_room":0}`,
		`{"prompt":"x","bootstrap_host":"h","bootstrap_port":70000,"bootstrap_room":9223372036854775808}`,
		`{"prompt":"x","bootstrap_host":"","bootstrap_port":"1","bootstrap_room":1.5}`,
		`{"prompt":"x","max_tokens":1,"stream":false,"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null}}`,
		`{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":1,"kv_transfer_params":{"do_remote_decode":true}}`,
		`{"prompt":"x","kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"e","remote_block_ids":[0,1],"remote_host":"127.0.0.1","remote_port":8998,"remote_request_id":"r\""}}`,
		`{"prompt":"x","kv_transfer_params":{"do_remote_prefill":true,"remote_block_ids":[-1,"a"],"remote_port":0}}`,
		`{"prompt":"x","kv_transfer_params":[]}`, `{"prompt":"x"}`,
	} {
		for k := range 12 {
			f.Add(uint8(k), []byte(s))
		}
	}
	var p fastjson.Parser
	workers := map[[2]uint8]*Worker{}
	for d, dialect := range []Dialect{DialectSGLang, DialectVLLM} {
		for r, role := range []Role{RolePrefill, RoleDecode} {
			cfg := config(func(c *Config) { c.Dialect, c.Role, c.KVEngineID = dialect, role, "e" })
			w := newWorker(0, "127.0.0.1:1", &cfg, 0)
			w.pdf = &pdShared{bootstrapPort: 8998}
			workers[[2]uint8{uint8(d), uint8(r)}] = w
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		w := workers[[2]uint8{k % 2, k / 2 % 2}]
		req, pd, err := w.parsePD(&p, genKind(k/4%3), body, nil, nil)
		if err != nil {
			return
		}
		if req.promptTokens < 0 || pd.key == "" || pd.rec.Fingerprint == "" {
			t.Fatalf("insane PD request %+v %+v", req, pd)
		}
		if pd.decode {
			if host, port, err := net.SplitHostPort(pd.addr); err != nil || host == "" || port == "0" {
				t.Fatalf("decode address %q from %q", pd.addr, body)
			}
			for _, id := range pd.rec.BlockIDs {
				if id < 0 {
					t.Fatalf("negative block id from %q", body)
				}
			}
			return
		}
		if w.cfg.Dialect == DialectVLLM && !json.Valid(w.appendKVParams(nil, pd)) {
			t.Fatalf("invalid kv_transfer_params for %q", body)
		}
	})
}
