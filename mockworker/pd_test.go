package mockworker

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fastjson"

	"github.com/smg-go/smg/internal/testutil"
)

// pdRoutes are the generation routes with a body builder each: prompt and max tokens.
var pdRoutes = []struct {
	path string
	body func(prompt string, maxTokens int) map[string]any
}{
	{"/v1/chat/completions", func(p string, n int) map[string]any {
		return map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": p}}, "max_tokens": n}
	}},
	{"/v1/completions", func(p string, n int) map[string]any {
		return map[string]any{"model": "m", "prompt": p, "max_tokens": n}
	}},
	{"/generate", func(p string, n int) map[string]any {
		return map[string]any{"text": p, "sampling_params": map[string]any{"max_new_tokens": n}}
	}},
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pdFleets starts a prefill fleet on 127.0.0.11 and a decode fleet on 127.0.0.12 whose
// default bootstrap port is the prefill's.
func pdFleets(t *testing.T, base Config, prefillTimeout, decodeTimeout time.Duration) (prefill, decode *Fleet) {
	t.Helper()
	pc := base
	pc.Role, pc.Host, pc.KVTransferTimeout = RolePrefill, "127.0.0.11", prefillTimeout
	prefill = startFleet(t, pc)
	dc := base
	dc.Role, dc.Host, dc.KVTransferTimeout, dc.BootstrapPort = RoleDecode, "127.0.0.12", decodeTimeout, prefill.BootstrapPort()
	decode = startFleet(t, dc)
	return prefill, decode
}

var rooms atomic.Uint64

// tokensOf counts the output tokens of a 200 answer (non-streamed or SSE) on route.
func tokensOf(t *testing.T, route, body string, stream bool) (tokens, cached int) {
	t.Helper()
	if stream {
		ev := sseEvents(t, body)
		if ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("stream without [DONE]: %q", ev)
		}
		last := decode(t, ev[len(ev)-2])
		if route == "/generate" {
			return int(path(t, last, "meta_info", "completion_tokens").(float64)), int(path(t, last, "meta_info", "cached_tokens").(float64))
		}
		return len(ev) - 1, -1
	}
	m := decode(t, body)
	if route == "/generate" {
		return int(path(t, m, "meta_info", "completion_tokens").(float64)), int(path(t, m, "meta_info", "cached_tokens").(float64))
	}
	return int(path(t, m, "usage", "completion_tokens").(float64)), int(path(t, m, "usage", "prompt_tokens_details", "cached_tokens").(float64))
}

func TestPDSGLang(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		t.Run(string(mode), func(t *testing.T) {
			forEachServer(t, func(t *testing.T, kind ServerKind) {
				cfg := config(func(c *Config) { c.Server, c.Mode, c.TimeScale = kind, mode, 1000 })
				pf, df := pdFleets(t, cfg, 10*time.Second, 10*time.Second)
				n := 0
				for _, rt := range pdRoutes {
					for _, stream := range []bool{false, true} {
						prompt := strings.Repeat("a PD prompt of some length ", 5) + rt.path
						b := rt.body(prompt, 3)
						b["stream"] = stream
						room := rooms.Add(1) << 40
						b["bootstrap_host"], b["bootstrap_room"] = "127.0.0.11", room
						b["bootstrap_port"] = pf.BootstrapPort()
						if stream {
							b["bootstrap_port"] = nil // the decode's default port
						}
						body := mustJSON(t, b)
						// Decode first: it must wait for the prefill, sent a little later.
						var wg sync.WaitGroup
						var dstatus int
						var dbody string
						wg.Go(func() {
							resp, s := do(t, "POST", df.URLs()[0]+rt.path, body)
							dstatus, dbody = resp.StatusCode, s
						})
						time.Sleep(20 * time.Millisecond)
						resp, pbody := do(t, "POST", pf.URLs()[0]+rt.path, body)
						wg.Wait()
						n++
						if resp.StatusCode != 200 || dstatus != 200 {
							t.Fatalf("%s stream=%v: prefill %d %s; decode %d %s", rt.path, stream, resp.StatusCode, pbody, dstatus, dbody)
						}
						if got, _ := tokensOf(t, rt.path, pbody, stream); got != 1 {
							t.Errorf("%s stream=%v: prefill produced %d tokens, want 1: %s", rt.path, stream, got, pbody)
						}
						got, cached := tokensOf(t, rt.path, dbody, stream)
						if got != 3 {
							t.Errorf("%s stream=%v: decode produced %d tokens, want 3: %s", rt.path, stream, got, dbody)
						}
						if want := (len(prompt) + 3) / 4; mode == ModeEngine && cached >= 0 && cached != want {
							t.Errorf("%s stream=%v: decode cached %d tokens, want the whole prompt (%d)", rt.path, stream, cached, want)
						}
						tr := df.Workers()[0].PDTransfers()
						if last := tr[len(tr)-1]; last.Key != strconv.FormatUint(room, 10) || last.Result != "ok" ||
							last.Prefill != "127.0.0.11:"+strconv.Itoa(pf.BootstrapPort()) {
							t.Errorf("last transfer %+v", last)
						}
					}
				}
				if s := pf.Workers()[0].PDStats(); s != (PDStats{OK: uint64(n)}) {
					t.Errorf("prefill stats %+v, want %d ok", s, n)
				}
				if s := df.Workers()[0].PDStats(); s != (PDStats{OK: uint64(n)}) {
					t.Errorf("decode stats %+v, want %d ok", s, n)
				}
				_, m := do(t, "GET", df.URLs()[0]+"/metrics", "")
				if want := `mockworker_pd_requests_total{model_name="mock-model",role="decode",result="ok"} ` + strconv.Itoa(n); !strings.Contains(m, want) {
					t.Errorf("/metrics lacks %q:\n%s", want, m)
				}
				testutil.Eventually(t, "no active requests", func() bool {
					return pf.Workers()[0].Active() == 0 && df.Workers()[0].Active() == 0
				})
			})
		})
	}
}

// sglangPD is an SGLang body on route with the PD fields.
func sglangPD(t *testing.T, prompt string, room uint64, host string, port any) string {
	b := pdRoutes[1].body(prompt, 2)
	b["bootstrap_host"], b["bootstrap_port"], b["bootstrap_room"] = host, port, room
	return mustJSON(t, b)
}

func wantError(t *testing.T, what string, status int, body string, wantStatus int, wantText string) {
	t.Helper()
	if status != wantStatus || !strings.Contains(body, wantText) {
		t.Errorf("%s: %d %s, want %d with %q", what, status, body, wantStatus, wantText)
	}
}

func TestPDSGLangErrors(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		pf, df := pdFleets(t, config(func(c *Config) { c.Server = kind }), 10*time.Second, 200*time.Millisecond)
		pu, du := pf.URLs()[0]+"/v1/completions", df.URLs()[0]+"/v1/completions"
		port := pf.BootstrapPort()
		post := func(u, body string) (int, string) {
			resp, b := do(t, "POST", u, body)
			return resp.StatusCode, b
		}

		room := rooms.Add(1)
		s, b := post(du, sglangPD(t, "never prefilled", room, "127.0.0.11", port))
		wantError(t, "no prefill", s, b, 500, "KV transfer for bootstrap_room "+strconv.FormatUint(room, 10)+" timed out after 200ms: no prefill arrived")
		if n := pf.KVEntries(); n != 0 {
			t.Errorf("a decode that gave up left %d rendezvous entries", n)
		}

		s, b = post(pu, sglangPD(t, "x", rooms.Add(1), "127.0.0.99", port))
		wantError(t, "wrong host", s, b, 400, `bootstrap_host \"127.0.0.99\" is not this prefill worker`)
		s, b = post(pu, sglangPD(t, "x", rooms.Add(1), "127.0.0.11", port+1))
		wantError(t, "wrong port", s, b, 400, "is not this prefill worker's bootstrap port")
		s, b = post(du, `{"prompt":"x"}`)
		wantError(t, "decode without fields", s, b, 400, "decode worker got a request without bootstrap_room")
		s, b = post(pu, `{"prompt":"x","bootstrap_room":1,"bootstrap_port":null}`)
		wantError(t, "prefill without host", s, b, 400, "without bootstrap_host")
		s, b = post(pu, `{"prompt":"x","bootstrap_room":1,"bootstrap_host":"127.0.0.11"}`)
		wantError(t, "prefill without port", s, b, 400, "without bootstrap_port")
		s, b = post(pu, `{"prompt":"x","bootstrap_room":-1,"bootstrap_host":"127.0.0.11","bootstrap_port":null}`)
		wantError(t, "negative room", s, b, 400, "bootstrap_room must be an integer")
		s, b = post(pu, `{"prompt":"x","kv_transfer_params":{"do_remote_decode":true}}`)
		wantError(t, "vLLM protocol at sglang", s, b, 400, "kv_transfer_params is vLLM's protocol")

		// The prefill saw another prompt than the decode.
		room = rooms.Add(1)
		if s, b := post(pu, sglangPD(t, "prompt A", room, "127.0.0.11", nil)); s != 200 {
			t.Fatalf("prefill: %d %s", s, b)
		}
		s, b = post(du, sglangPD(t, "prompt B", room, "127.0.0.11", nil))
		wantError(t, "mismatch", s, b, 500, "KV transfer mismatch for bootstrap_room "+strconv.FormatUint(room, 10)+": the prefill worker")
		// The room was claimed (by the mismatching decode): a second claim fails too.
		s, b = post(du, sglangPD(t, "prompt A", room, "127.0.0.11", nil))
		wantError(t, "second claim", s, b, 500, "already claimed")
		// A room published twice is a gateway bug.
		s, b = post(pu, sglangPD(t, "prompt A", room, "127.0.0.11", nil))
		wantError(t, "room reused", s, b, 400, "already published")

		// Unreachable: a closed port, and a port that is not a rendezvous (the worker's own).
		ln, err := net.Listen("tcp", "127.0.0.11:0")
		if err != nil {
			t.Fatal(err)
		}
		closedPort := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		s, b = post(du, sglangPD(t, "x", rooms.Add(1), "127.0.0.11", closedPort))
		wantError(t, "closed port", s, b, 500, "cannot reach the prefill's bootstrap server at 127.0.0.11:"+strconv.Itoa(closedPort))
		_, workerPort, _ := net.SplitHostPort(pf.Addrs()[0])
		s, b = post(du, sglangPD(t, "x", rooms.Add(1), "127.0.0.11", workerPort))
		wantError(t, "worker port", s, b, 400, "bootstrap_port must be null or an integer") // a string
		wp, _ := strconv.Atoi(workerPort)
		s, b = post(du, sglangPD(t, "x", rooms.Add(1), "127.0.0.11", wp))
		wantError(t, "worker port", s, b, 500, "is not a mockworker KV rendezvous")

		if got, want := pf.Workers()[0].PDStats(), (PDStats{OK: 1, Rejected: 7}); got != want {
			t.Errorf("prefill stats %+v, want %+v", got, want)
		}
		if got, want := df.Workers()[0].PDStats(), (PDStats{Timeout: 1, Rejected: 2, Mismatch: 2, Unreachable: 2}); got != want {
			t.Errorf("decode stats %+v, want %+v", got, want)
		}
		_, m := do(t, "GET", pf.URLs()[0]+"/metrics", "")
		if want := `mockworker_pd_requests_total{model_name="mock-model",role="prefill",result="rejected"} 7`; !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
		if f := df.Workers()[0].Served(); f != 0 {
			t.Errorf("decode served %d generations, want 0 (every one failed)", f)
		}
	})
}

func TestPDVLLM(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		t.Run(string(mode), func(t *testing.T) {
			forEachServer(t, func(t *testing.T, kind ServerKind) {
				pf, df := pdFleets(t, config(func(c *Config) {
					c.Server, c.Mode, c.TimeScale, c.Dialect, c.KVEngineID = kind, mode, 1000, DialectVLLM, "engine-p"
				}), 10*time.Second, 300*time.Millisecond)
				post := func(u string, body map[string]any) (int, string) {
					resp, b := do(t, "POST", u, mustJSON(t, body))
					return resp.StatusCode, b
				}
				prefillReq := func(rt int, prompt string) map[string]any {
					b := pdRoutes[rt].body(prompt, 1)
					if rt == 0 {
						b["max_completion_tokens"] = 1
					}
					b["stream"] = false
					b["kv_transfer_params"] = map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
						"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil}
					return b
				}
				// prefill runs the first leg and returns its kv_transfer_params.
				prefill := func(rt int, prompt string) map[string]any {
					t.Helper()
					s, b := post(pf.URLs()[0]+pdRoutes[rt].path, prefillReq(rt, prompt))
					if s != 200 {
						t.Fatalf("prefill: %d %s", s, b)
					}
					if n, _ := tokensOf(t, pdRoutes[rt].path, b, false); n != 1 {
						t.Fatalf("prefill produced %d tokens: %s", n, b)
					}
					kv := path(t, decode(t, b), "kv_transfer_params").(map[string]any)
					if kv["do_remote_prefill"] != true || kv["do_remote_decode"] != false || kv["remote_engine_id"] != "engine-p" ||
						kv["remote_host"] != "127.0.0.11" || kv["remote_port"] != float64(pf.BootstrapPort()) || kv["remote_request_id"] == "" ||
						len(kv["remote_block_ids"].([]any)) != (len(prompt)+3)/4/DefaultBlockSize+1 {
						t.Fatalf("kv_transfer_params %v", kv)
					}
					return kv
				}
				prompt := strings.Repeat("vllm prompt ", 10)
				n := 0
				for rt := range 2 {
					for _, stream := range []bool{false, true} {
						kv := prefill(rt, prompt)
						b := pdRoutes[rt].body(prompt, 4)
						b["stream"], b["kv_transfer_params"] = stream, kv
						s, body := post(df.URLs()[0]+pdRoutes[rt].path, b)
						n++
						if s != 200 {
							t.Fatalf("%s stream=%v: decode %d %s", pdRoutes[rt].path, stream, s, body)
						}
						if got, _ := tokensOf(t, pdRoutes[rt].path, body, stream); got != 4 {
							t.Errorf("%s stream=%v: decode produced %d tokens, want 4", pdRoutes[rt].path, stream, got)
						}
						if strings.Contains(body, "kv_transfer_params") {
							t.Errorf("decode answer carries kv_transfer_params: %s", body)
						}
					}
				}

				// Protocol errors at the prefill.
				b := pdRoutes[1].body(prompt, 1)
				s, body := post(pf.URLs()[0]+"/v1/completions", b)
				wantError(t, "prefill without params", s, body, 400, "prefill worker got a request without kv_transfer_params")
				b = prefillReq(1, prompt)
				b["stream"] = true
				s, body = post(pf.URLs()[0]+"/v1/completions", b)
				wantError(t, "streamed prefill", s, body, 400, "is not streamed")
				b = prefillReq(0, prompt)
				b["max_completion_tokens"] = 5
				s, body = post(pf.URLs()[0]+"/v1/chat/completions", b)
				wantError(t, "prefill max tokens", s, body, 400, "max_tokens 1")
				b = prefillReq(0, prompt)
				b["stream_options"] = map[string]any{"include_usage": true}
				s, body = post(pf.URLs()[0]+"/v1/chat/completions", b)
				wantError(t, "prefill stream_options", s, body, 400, "drop stream_options")
				b = pdRoutes[1].body(prompt, 1)
				b["bootstrap_room"], b["bootstrap_host"], b["bootstrap_port"] = 1, "127.0.0.11", nil
				s, body = post(pf.URLs()[0]+"/v1/completions", b)
				wantError(t, "sglang protocol at vllm", s, body, 400, "bootstrap_room is SGLang's protocol")

				// Errors at the decode.
				b = pdRoutes[1].body(prompt, 4)
				s, body = post(df.URLs()[0]+"/v1/completions", b)
				wantError(t, "decode without params", s, body, 400, "decode worker got a request without kv_transfer_params")
				b["kv_transfer_params"] = map[string]any{"do_remote_decode": true}
				s, body = post(df.URLs()[0]+"/v1/completions", b)
				wantError(t, "prefill params at decode", s, body, 400, "belongs on a prefill worker")
				tamper := func(key string, v any) map[string]any {
					kv := prefill(1, prompt)
					kv[key] = v
					b := pdRoutes[1].body(prompt, 4)
					b["kv_transfer_params"] = kv
					return b
				}
				s, body = post(df.URLs()[0]+"/v1/completions", tamper("remote_request_id", "mock-xfer-forged"))
				wantError(t, "tampered request id", s, body, 500, "KV transfer for remote_request_id mock-xfer-forged timed out after 300ms")
				s, body = post(df.URLs()[0]+"/v1/completions", tamper("remote_engine_id", "other"))
				wantError(t, "tampered engine id", s, body, 500, `remote_engine_id \"other\", but the prefill's engine is \"engine-p\"`)
				s, body = post(df.URLs()[0]+"/v1/completions", tamper("remote_block_ids", []int{1}))
				wantError(t, "tampered block ids", s, body, 500, "remote_block_ids differ")
				s, body = post(df.URLs()[0]+"/v1/completions", tamper("remote_port", nil))
				wantError(t, "null remote_port", s, body, 400, "remote_port must be an integer")
				kv := prefill(1, prompt)
				b = pdRoutes[1].body("another prompt", 4)
				b["kv_transfer_params"] = kv
				s, body = post(df.URLs()[0]+"/v1/completions", b)
				wantError(t, "prompt mismatch", s, body, 500, "saw a different prompt")

				if got, want := pf.Workers()[0].PDStats(), (PDStats{OK: uint64(n + 5), Rejected: 5}); got != want {
					t.Errorf("prefill stats %+v, want %+v", got, want)
				}
				if got, want := df.Workers()[0].PDStats(), (PDStats{OK: uint64(n), Rejected: 3, Timeout: 1, Mismatch: 3}); got != want {
					t.Errorf("decode stats %+v, want %+v", got, want)
				}
				testutil.Eventually(t, "no active requests", func() bool {
					return pf.Workers()[0].Active() == 0 && df.Workers()[0].Active() == 0
				})
			})
		})
	}
}

// TestPDEntriesExpire: unclaimed records go after the timeout; claimed ones too.
func TestPDEntriesExpire(t *testing.T) {
	pf := startFleet(t, config(func(c *Config) { c.Role, c.KVTransferTimeout = RolePrefill, 100*time.Millisecond }))
	for range 3 {
		resp, b := do(t, "POST", pf.URLs()[0]+"/v1/completions", sglangPD(t, "x", rooms.Add(1), "127.0.0.1", nil))
		if resp.StatusCode != 200 {
			t.Fatalf("prefill: %d %s", resp.StatusCode, b)
		}
	}
	if n := pf.KVEntries(); n != 3 {
		t.Errorf("%d entries after 3 prefills", n)
	}
	testutil.Eventually(t, "the rendezvous to empty", func() bool { return pf.KVEntries() == 0 })
}

// TestPDCloseWhileWaiting: closing the fleets under a decode waiting for its KV (and the
// rendezvous handler waiting with it) leaves no goroutine behind; a prefill fleet closing
// first makes the decode answer 500 at once.
func TestPDCloseWhileWaiting(t *testing.T) {
	for _, prefillFirst := range []bool{false, true} {
		t.Run("prefill-first="+strconv.FormatBool(prefillFirst), func(t *testing.T) {
			forEachServer(t, func(t *testing.T, kind ServerKind) { closeWhileWaiting(t, kind, prefillFirst) })
		})
	}
}

func closeWhileWaiting(t *testing.T, kind ServerKind, prefillFirst bool) {
	pc := config(func(c *Config) {
		c.Server, c.Role, c.Host, c.KVTransferTimeout = kind, RolePrefill, "127.0.0.11", time.Hour
	})
	pf, err := Start(pc)
	if err != nil {
		t.Fatal(err)
	}
	df, err := Start(config(func(c *Config) {
		c.Server, c.Role, c.Host, c.KVTransferTimeout, c.BootstrapPort = kind, RoleDecode, "127.0.0.12", time.Hour, pf.BootstrapPort()
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", df.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := sglangPD(t, "x", rooms.Add(1), "127.0.0.11", nil)
	if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: mock\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the decode to wait at the rendezvous", func() bool { return pf.KVEntries() == 1 })
	if prefillFirst {
		if err := pf.Close(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantError(t, "prefill closed", resp.StatusCode, string(b), 500, "the prefill fleet is closing")
	}
	if err := df.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pf.Close(); err != nil {
		t.Fatal(err)
	}
	if got := df.Workers()[0].Active(); got != 0 {
		t.Errorf("%d answers still active after Close", got)
	}
	for deadline := time.Now().Add(10 * time.Second); len(ownGoroutines()) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close:\n%s", strings.Join(ownGoroutines(), "\n\n"))
		}
	}
}

func TestPDConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{config(func(c *Config) { c.Role = "both" }), "--role"},
		{config(func(c *Config) { c.Role, c.BootstrapPort = RolePrefill, 70000 }), "--bootstrap-port"},
		{config(func(c *Config) { c.Role, c.KVTransferTimeout = RoleDecode, -1 }), "--kv-transfer-timeout-ms"},
		{config(func(c *Config) { c.KVEngineID = "a\"b" }), "--kv-engine-id"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	// A unified fleet ignores PD fields.
	f := startFleet(t, DefaultConfig())
	resp, b := do(t, "POST", f.URLs()[0]+"/v1/completions", `{"prompt":"x","max_tokens":2,"bootstrap_room":"junk","kv_transfer_params":7}`)
	if resp.StatusCode != 200 || f.BootstrapPort() != 0 || f.KVEntries() != 0 {
		t.Errorf("unified with PD fields: %d %s", resp.StatusCode, b)
	}
	_, m := do(t, "GET", f.URLs()[0]+"/metrics", "")
	if strings.Contains(m, "mockworker_pd") {
		t.Errorf("unified worker exposes PD metrics:\n%s", m)
	}
}

// TestPDConcurrent: many pairs at once, over two prefill and two decode workers, each
// request sent to one of each in either order.
func TestPDConcurrent(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		t.Run(string(mode), func(t *testing.T) {
			pf, df := pdFleets(t, config(func(c *Config) { c.Count, c.Mode, c.TimeScale = 2, mode, 1000 }), 10*time.Second, 10*time.Second)
			const pairs = 64
			var wg sync.WaitGroup
			for i := range pairs {
				body := mustJSON(t, map[string]any{"prompt": "concurrent " + strconv.Itoa(i), "max_tokens": 2, "stream": i%2 == 0,
					"bootstrap_host": "127.0.0.11", "bootstrap_port": nil, "bootstrap_room": rooms.Add(1)})
				for j, u := range []string{pf.URLs()[i%2], df.URLs()[(i/2)%2]} {
					wg.Go(func() {
						resp, b := do(t, "POST", u+"/v1/completions", body)
						if resp.StatusCode != 200 {
							t.Errorf("pair %d leg %d: %d %s", i, j, resp.StatusCode, b)
						}
					})
				}
			}
			wg.Wait()
			var ok uint64
			for _, w := range append(pf.Workers(), df.Workers()...) {
				ok += w.PDStats().OK
			}
			if ok != 2*pairs {
				t.Errorf("%d ok PD requests, want %d", ok, 2*pairs)
			}
			if n := pf.KVEntries(); n != pairs {
				t.Errorf("%d rendezvous entries, want %d claimed records until they expire", n, pairs)
			}
		})
	}
}

// TestPDClientLeavesWhileWaiting: a decode whose client hangs up withdraws its claim (gnet
// notices the hang-up), so the rendezvous forgets the key and a prefill can still publish it.
func TestPDClientLeavesWhileWaiting(t *testing.T) {
	pf, df := pdFleets(t, config(func(c *Config) { c.Server = ServerGnet }), 10*time.Second, time.Hour)
	c, err := net.Dial("tcp", df.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	room := rooms.Add(1)
	body := sglangPD(t, "x", room, "127.0.0.11", nil)
	if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: mock\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the decode to wait at the rendezvous", func() bool { return pf.KVEntries() == 1 })
	_ = c.Close()
	testutil.Eventually(t, "the claim to be withdrawn", func() bool { return pf.KVEntries() == 0 })
	if resp, b := do(t, "POST", pf.URLs()[0]+"/v1/completions", body); resp.StatusCode != 200 {
		t.Fatalf("prefill after the decode left: %d %s", resp.StatusCode, b)
	}
	if s := df.Workers()[0].PDStats(); s != (PDStats{}) {
		t.Errorf("decode stats %+v: an abandoned fetch counts nothing", s)
	}
}

// TestRendezvousProtocol speaks the rendezvous's line protocol directly: pipelined claims
// answered out of order, a claim that waits for its publish, cancel, and bad lines.
func TestRendezvousProtocol(t *testing.T) {
	done := make(chan struct{})
	rv, err := startRendezvous("127.0.0.1:0", time.Minute, done)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(done); _ = rv.close() }()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(rv.port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := kvRecord{Fingerprint: "ab", PromptTokens: 3, EngineID: `e"1`, BlockIDs: []int{4, 5}, Worker: "w"}
	if err := rv.publish("ready key", rec); err != nil {
		t.Fatal(err)
	}
	_, err = io.WriteString(c, "GET /kv HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: mockworker-kv/1\r\n\r\n"+
		"claim 1 60000 \"later\"\nclaim 2 0 \"ready key\"\nclaim 3 0 \"ready key\"\nclaim 4 0 \"absent\"\n"+
		"claim 5 60000 \"cancelled\"\ncancel 5\nclaim 6 x \"k\"\nping 7\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "mockworker-kv/1" {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	want := []string{
		`2 ok {"fingerprint":"ab","prompt_tokens":3,"engine_id":"e\"1","block_ids":[4,5],"worker":"w"}`,
		"3 claimed", "4 timeout", `6 error want: claim ID WAIT_MS "KEY"`, `7 error unknown verb "ping"`,
	}
	for _, w := range want {
		if line, err := br.ReadString('\n'); err != nil || line != w+"\n" {
			t.Fatalf("got %q (%v), want %q", line, err, w)
		}
	}
	testutil.Eventually(t, "the cancelled claim's key to go", func() bool { return rv.size() == 2 }) // "ready key", "later"
	if err := rv.publish("later", kvRecord{Fingerprint: "cd", Worker: "w"}); err != nil {
		t.Fatal(err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != `1 ok {"fingerprint":"cd","prompt_tokens":0,"engine_id":"","block_ids":[],"worker":"w"}`+"\n" {
		t.Fatalf("got %q (%v) for the waiting claim", line, err)
	}
	got, err := parseKVRecord(new(fastjson.Parser), []byte(want[0][5:]))
	if err != nil || got.Fingerprint != rec.Fingerprint || got.EngineID != rec.EngineID || !slices.Equal(got.BlockIDs, rec.BlockIDs) || got.PromptTokens != 3 {
		t.Errorf("record round trip: %+v %v", got, err)
	}
}
