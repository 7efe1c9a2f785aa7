package mockworker

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// epdBody is a chat body with an image part and the given extra top-level members.
func epdBody(t *testing.T, prompt string, extra map[string]any) string {
	b := map[string]any{"model": "m", "max_tokens": 2, "messages": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": prompt},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "http://x/a.png"}},
	}}}}
	for k, v := range extra {
		b[k] = v
	}
	return mustJSON(t, b)
}

// startEPDFleets starts an encode worker at 127.0.0.13 and a prefill worker that requires
// its embeddings at 127.0.0.11, waiting for them up to prefillWait, both configured as base.
func startEPDFleets(t *testing.T, base Config, prefillWait time.Duration) (encode, prefill *Fleet) {
	ec := base
	ec.Role, ec.Host, ec.KVTransferTimeout = RoleEncode, "127.0.0.13", 10*time.Second
	pc := base
	pc.Role, pc.Host, pc.KVTransferTimeout, pc.RequireEncode = RolePrefill, "127.0.0.11", prefillWait, true
	return startFleet(t, ec), startFleet(t, pc)
}

// TestEPDSGLang: the encode worker publishes the embedding record under its room; an EPD
// prefill claims it before it publishes its own KV, which the decode then claims; every
// mistake a gateway can make is a 400 or a 500 that says what went wrong. In both modes and
// on both servers.
func TestEPDSGLang(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		t.Run(string(mode), func(t *testing.T) {
			forEachServer(t, func(t *testing.T, kind ServerKind) {
				base := config(func(c *Config) { c.Server, c.Mode, c.TimeScale = kind, mode, 50 })
				ef, pf := startEPDFleets(t, base, 300*time.Millisecond)
				dc := base
				dc.Role, dc.Host, dc.KVTransferTimeout, dc.BootstrapPort = RoleDecode, "127.0.0.12", 2*time.Second, pf.BootstrapPort()
				df := startFleet(t, dc)
				eu, pu, du := ef.URLs()[0]+"/v1/chat/completions", pf.URLs()[0]+"/v1/chat/completions", df.URLs()[0]+"/v1/chat/completions"
				post := func(u, body string) (int, string) {
					resp, b := do(t, "POST", u, body)
					return resp.StatusCode, b
				}
				encodeRoom, pdRoom := rooms.Add(1), rooms.Add(1)
				handshake := map[string]any{"encode_bootstrap_host": "127.0.0.13", "encode_bootstrap_port": ef.BootstrapPort(), "encode_bootstrap_room": encodeRoom,
					"bootstrap_host": "127.0.0.11", "bootstrap_port": pf.BootstrapPort(), "bootstrap_room": pdRoom}

				if s, b := post(eu, epdBody(t, "a cat", map[string]any{"bootstrap_host": "127.0.0.13", "bootstrap_port": ef.BootstrapPort(), "bootstrap_room": encodeRoom})); s != 200 {
					t.Fatalf("encode: %d %s", s, b)
				}
				// The decode waits for the prefill, which waits for the embeddings.
				decoded := make(chan string, 1)
				go func() { _, b := post(du, epdBody(t, "a cat", handshake)); decoded <- b }()
				if s, b := post(pu, epdBody(t, "a cat", handshake)); s != 200 {
					t.Fatalf("prefill: %d %s", s, b)
				}
				if b := <-decoded; strings.Contains(b, "error") {
					t.Fatalf("decode: %s", b)
				}

				s, b := post(eu, mustJSON(t, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "text only"}}, "max_tokens": 1,
					"bootstrap_host": "127.0.0.13", "bootstrap_port": nil, "bootstrap_room": rooms.Add(1)}))
				wantError(t, "encode without media", s, b, 400, "without images, audio or video")
				s, b = post(eu, epdBody(t, "x", map[string]any{"bootstrap_host": "127.0.0.99", "bootstrap_port": nil, "bootstrap_room": rooms.Add(1)}))
				wantError(t, "encode wrong host", s, b, 400, "is not this encode worker")
				s, b = post(pu, epdBody(t, "x", map[string]any{"bootstrap_host": "127.0.0.11", "bootstrap_port": nil, "bootstrap_room": rooms.Add(1)}))
				wantError(t, "prefill without the handshake", s, b, 400, "without encode_bootstrap_room")
				hs := map[string]any{"bootstrap_host": "127.0.0.11", "bootstrap_port": nil, "bootstrap_room": rooms.Add(1),
					"encode_bootstrap_host": "127.0.0.13", "encode_bootstrap_port": ef.BootstrapPort(), "encode_bootstrap_room": rooms.Add(1)}
				s, b = post(pu, epdBody(t, "never encoded", hs))
				wantError(t, "no embeddings", s, b, 500, "embedding transfer for encode_bootstrap_room "+strconv.FormatUint(hs["encode_bootstrap_room"].(uint64), 10)+" timed out")
				// Embeddings of another prompt.
				room := rooms.Add(1)
				if s, b := post(eu, epdBody(t, "prompt A", map[string]any{"bootstrap_host": "127.0.0.13", "bootstrap_port": nil, "bootstrap_room": room})); s != 200 {
					t.Fatalf("encode: %d %s", s, b)
				}
				hs["encode_bootstrap_room"], hs["bootstrap_room"] = room, rooms.Add(1)
				s, b = post(pu, epdBody(t, "prompt B", hs))
				wantError(t, "mismatch", s, b, 500, "embedding transfer mismatch")
				// A text-only request needs no encoder.
				if s, b := post(pu, mustJSON(t, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "text"}}, "max_tokens": 1,
					"bootstrap_host": "127.0.0.11", "bootstrap_port": nil, "bootstrap_room": rooms.Add(1)})); s != 200 {
					t.Fatalf("text-only prefill: %d %s", s, b)
				}

				if got, want := ef.Workers()[0].PDStats(), (PDStats{OK: 2, Rejected: 2}); got != want {
					t.Errorf("encode stats %+v, want %+v", got, want)
				}
				if got, want := pf.Workers()[0].PDStats(), (PDStats{OK: 2, Rejected: 1, Timeout: 1, Mismatch: 1}); got != want {
					t.Errorf("prefill stats %+v, want %+v", got, want)
				}
			})
		})
	}
}

// TestEPDPrefillReusingARoomIsRefused: an instant-mode EPD prefill whose embeddings arrived
// but whose bootstrap_room was already published answers 500 saying so (the error was lost to
// a shadowed variable, and the answer dereferenced a nil error).
func TestEPDPrefillReusingARoomIsRefused(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		ef, pf := startEPDFleets(t, config(func(c *Config) { c.Server, c.Mode, c.TimeScale = kind, ModeInstant, 50 }), 2*time.Second)
		eu, pu := ef.URLs()[0]+"/v1/chat/completions", pf.URLs()[0]+"/v1/chat/completions"
		pdRoom := rooms.Add(1)
		for i := range 2 {
			encodeRoom := rooms.Add(1)
			if resp, b := do(t, "POST", eu, epdBody(t, "a cat", map[string]any{"bootstrap_host": "127.0.0.13", "bootstrap_port": ef.BootstrapPort(), "bootstrap_room": encodeRoom})); resp.StatusCode != 200 {
				t.Fatalf("encode %d: %d %s", i, resp.StatusCode, b)
			}
			hs := map[string]any{"encode_bootstrap_host": "127.0.0.13", "encode_bootstrap_port": ef.BootstrapPort(), "encode_bootstrap_room": encodeRoom,
				"bootstrap_host": "127.0.0.11", "bootstrap_port": pf.BootstrapPort(), "bootstrap_room": pdRoom}
			resp, b := do(t, "POST", pu, epdBody(t, "a cat", hs))
			if i == 0 && resp.StatusCode != 200 {
				t.Fatalf("first prefill: %d %s", resp.StatusCode, b)
			}
			if i == 1 {
				wantError(t, "a prefill reusing its room", resp.StatusCode, b, 500, "every request needs its own bootstrap_room")
			}
		}
	})
}

// TestEPDVLLMEncode: vLLM's encode request must be unstreamed with one output token and
// carry media.
func TestEPDVLLMEncode(t *testing.T) {
	ef := startFleet(t, config(func(c *Config) { c.Role, c.Dialect, c.Host = RoleEncode, DialectVLLM, "127.0.0.13" }))
	u := ef.URLs()[0] + "/v1/chat/completions"
	post := func(body string) (int, string) {
		resp, b := do(t, "POST", u, body)
		return resp.StatusCode, b
	}
	if s, b := post(epdBody(t, "x", map[string]any{"max_tokens": 1, "stream": false})); s != 200 {
		t.Fatalf("encode: %d %s", s, b)
	}
	s, b := post(epdBody(t, "x", map[string]any{"max_tokens": 1, "stream": true}))
	wantError(t, "streamed", s, b, 400, "vLLM's encode request is not streamed")
	s, b = post(epdBody(t, "x", map[string]any{"max_tokens": 5}))
	wantError(t, "max_tokens", s, b, 400, "needs max_tokens 1")
	s, b = post(epdBody(t, "x", map[string]any{"max_tokens": 1, "kv_transfer_params": map[string]any{}}))
	wantError(t, "kv params", s, b, 400, "carries no KV transfer")
	if got, want := ef.Workers()[0].PDStats(), (PDStats{OK: 1, Rejected: 3}); got != want {
		t.Errorf("encode stats %+v, want %+v", got, want)
	}
	if err := config(func(c *Config) { c.Role, c.RequireEncode = RoleDecode, true }).Validate(); err == nil || !strings.Contains(err.Error(), "prefill worker's setting") {
		t.Errorf("RequireEncode on a decode: %v", err)
	}
}
