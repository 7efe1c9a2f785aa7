package mockworker

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// fastEngine is an engine-mode fleet config that runs the model 1000× faster than real time.
func fastEngine(kind ServerKind, d Dialect) Config {
	return config(func(c *Config) {
		c.Server, c.Dialect, c.Mode, c.TimeScale, c.OutputTokens = kind, d, ModeEngine, 1000, 4
	})
}

func TestEngineModeAnswersAndPrefixCache(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, fastEngine(kind, DialectSGLang))
		u := f.URLs()[0]
		long := strings.Repeat("You are a helpful assistant. ", 40) // 1160 bytes: 290 tokens, 18 full blocks
		chat := `{"messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"hi"}],"max_tokens":3}`

		resp, body := do(t, "POST", u+"/v1/chat/completions", chat)
		m := decode(t, body)
		if resp.StatusCode != 200 || path(t, m, "usage", "completion_tokens") != 3.0 ||
			path(t, m, "usage", "prompt_tokens") != 291.0 || path(t, m, "usage", "prompt_tokens_details", "cached_tokens") != 0.0 ||
			path(t, m, "choices", 0, "message", "content") != "the mock cat " {
			t.Fatalf("first: %d %s", resp.StatusCode, body)
		}
		_, body = do(t, "POST", u+"/v1/chat/completions", chat)
		if got := path(t, decode(t, body), "usage", "prompt_tokens_details", "cached_tokens"); got != 18.0*16 {
			t.Fatalf("repeat: cached_tokens %v, want 288 (18 full blocks)", got)
		}

		// Streams report the cached tokens in the usage chunk; /generate in meta_info.
		stream := strings.Replace(chat, `"max_tokens":3`, `"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}`, 1)
		_, body = do(t, "POST", u+"/v1/chat/completions", stream)
		ev := sseEvents(t, body)
		if len(ev) != 4 || path(t, decode(t, ev[2]), "usage", "prompt_tokens_details", "cached_tokens") != 288.0 {
			t.Fatalf("stream: %q", ev)
		}
		_, body = do(t, "POST", u+"/generate", `{"text":"`+long+`hi","stream":true,"sampling_params":{"max_new_tokens":2}}`)
		ev = sseEvents(t, body)
		if len(ev) != 3 || path(t, decode(t, ev[1]), "meta_info", "cached_tokens") != 288.0 {
			t.Fatalf("generate stream: %q", ev)
		}

		_, body = do(t, "GET", u+"/v1/loads", "")
		hit := path(t, decode(t, body), "loads", 0, "cache_hit_rate").(float64)
		if want := 3 * 288.0 / (4 * 291.0); hit < want-1e-9 || hit > want+1e-9 {
			t.Errorf("cache_hit_rate %v, want %v: %s", hit, want, body)
		}
		_, body = do(t, "GET", u+"/metrics", "")
		for _, want := range []string{
			`sglang:cache_hit_rate{model_name="mock-model"} 0.74`,
			`sglang:num_running_reqs{model_name="mock-model"} 0`,
			`sglang:num_queue_reqs{model_name="mock-model"} 0`,
			`sglang:token_usage{model_name="mock-model"} 0`,
			`sglang:gen_throughput{model_name="mock-model"} `,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "vllm:") {
			t.Errorf("sglang dialect serves vllm metrics:\n%s", body)
		}

		long2 := strings.Repeat("x", 4*DefaultKVTokens)
		resp, body = do(t, "POST", u+"/v1/completions", `{"prompt":"`+long2+`"}`)
		if resp.StatusCode != 400 || !strings.Contains(body, "KV cache") {
			t.Errorf("prompt larger than the KV cache: %d %.200s", resp.StatusCode, body)
		}
		testutil.Eventually(t, "no active requests", func() bool { return f.Workers()[0].Active() == 0 })
	})
}

func TestVLLMDialect(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		cfg := fastEngine(kind, DialectVLLM)
		cfg.Model = "org/llm"
		u := startFleet(t, cfg).URLs()[0]
		if resp, _ := do(t, "GET", u+"/v1/loads", ""); resp.StatusCode != 404 {
			t.Errorf("vllm /v1/loads: %d, want 404", resp.StatusCode)
		}
		prompt := `{"prompt":"` + strings.Repeat("abcd", 40) + `","max_tokens":3}`
		for range 2 {
			if resp, body := do(t, "POST", u+"/v1/completions", prompt); resp.StatusCode != 200 {
				t.Fatalf("completion: %d %s", resp.StatusCode, body)
			}
		}
		_, body := do(t, "GET", u+"/metrics", "")
		for _, want := range []string{
			`vllm:num_requests_running{model_name="org/llm"} 0`,
			`vllm:num_requests_waiting{model_name="org/llm"} 0`,
			`vllm:kv_cache_usage_perc{model_name="org/llm"} 0`,
			`vllm:prefix_cache_hits_total{model_name="org/llm"} 32`, // the second's 2 full blocks
			`vllm:prefix_cache_queries_total{model_name="org/llm"} 80`,
			`vllm:time_to_first_token_seconds_count{model_name="org/llm"} 2`,
			`vllm:time_to_first_token_seconds_bucket{model_name="org/llm",le="+Inf"} 2`,
			`vllm:inter_token_latency_seconds_count{model_name="org/llm"} 4`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "sglang:") {
			t.Errorf("vllm dialect serves sglang metrics")
		}
		_, body = do(t, "GET", u+"/model_info", "")
		if m := decode(t, body); path(t, m, "model_path") != "org/llm" || path(t, m, "is_generation") != true {
			t.Errorf("/model_info: %s", body)
		}
	})
}

func TestEngineQueueVisibleInLoads(t *testing.T) {
	f := startFleet(t, config(func(c *Config) { c.Mode, c.MaxRunning, c.DecodeBase = ModeEngine, 1, time.Hour }))
	u := f.URLs()[0]
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", f.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		body := `{"text":"hello","stream":true}`
		if _, err := io.WriteString(c, "POST /generate HTTP/1.1\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "1 running and 2 waiting", func() bool {
		_, body := do(t, "GET", u+"/v1/loads", "")
		m := decode(t, body)
		return path(t, m, "loads", 0, "num_running_reqs") == 1.0 && path(t, m, "loads", 0, "num_waiting_reqs") == 2.0 &&
			path(t, m, "loads", 0, "num_waiting_uncached_tokens") == 4.0 && path(t, m, "aggregate", "total_reqs") == 3.0
	})
	// Hanging up withdraws the sequences from the engine.
	for _, c := range conns {
		_ = c.Close()
	}
	testutil.Eventually(t, "the engine to empty", func() bool {
		l := f.Workers()[0].load()
		return l.running == 0 && l.waiting == 0 && f.Workers()[0].Active() == 0
	})
}

func TestTransportFaults(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		forEachServer(t, func(t *testing.T, kind ServerKind) {
			cfg := fastEngine(kind, DialectSGLang)
			cfg.Mode = mode
			f := startFleet(t, cfg)
			u := f.URLs()[0]
			post := func(body, fault string) (*http.Response, error) {
				req, _ := http.NewRequest("POST", u+"/v1/completions", strings.NewReader(body))
				req.Header.Set(faultHeader, fault)
				// A fresh connection each time: a cut connection must not poison the next test.
				return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			}

			if _, err := post(`{"prompt":"x"}`, "reset"); err == nil {
				t.Errorf("%s: reset answered", mode)
			}
			if _, err := post(`{"prompt":"x"}`, "abort-after=2"); err == nil {
				t.Errorf("%s: non-streamed abort-after answered", mode)
			}
			resp, err := post(`{"prompt":"x","stream":true,"max_tokens":5}`, "abort-after=2")
			if err != nil {
				t.Fatalf("%s: stream abort-after: %v", mode, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Count(string(b), "data: ") != 2 || strings.Contains(string(b), "[DONE]") {
				t.Errorf("%s: stream cut after 2 tokens: err %v, body %q", mode, err, b)
			}
			resp, err = post(`{"prompt":"x","stream":true,"max_tokens":2}`, "abort-after=2")
			if err == nil {
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				t.Errorf("%s: abort-after past the end must complete: %v %q", mode, err, b)
			}
			resp, err = post(`{"prompt":"x","stream":true,"max_tokens":2}`, "slow-ttft=5")
			if err == nil {
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err != nil || strings.Count(string(b), "data: ") != 3 {
				t.Errorf("%s: slow-ttft: %v %q", mode, err, b)
			}
			testutil.Eventually(t, "no active requests", func() bool { return f.Workers()[0].Active() == 0 })
			if l := f.Workers()[0].load(); l.running != 0 || l.waiting != 0 {
				t.Errorf("%s: engine holds %+v after cut answers", mode, l)
			}
		})
	}
}

func TestStreamHeadersBeforeFirstToken(t *testing.T) {
	// gnet sends a stream's headers at once; the first token waits for slow-ttft (an hour).
	f := startFleet(t, DefaultConfig())
	c, err := net.Dial("tcp", f.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"prompt":"x","stream":true}`
	if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nX-Mock-Fault: slow-ttft=3600000\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "POST"})
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != contentSSE {
		t.Fatalf("headers: %v %v", resp, err)
	}
}

func TestFailureRateIsSeeded(t *testing.T) {
	failures := func(seed uint64) []bool {
		f := startFleet(t, config(func(c *Config) { c.Seed = seed }))
		if err := f.Workers()[0].Configure(AdminConfig{FailureRate: 0.5, FailureStatus: 429}); err != nil {
			t.Fatal(err)
		}
		var out []bool
		for range 40 {
			resp, _ := do(t, "POST", f.URLs()[0]+"/generate", `{"text":"x"}`)
			if resp.StatusCode != 200 && resp.StatusCode != 429 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			out = append(out, resp.StatusCode == 429)
		}
		return out
	}
	a, b, c := failures(1), failures(1), failures(2)
	count := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different failures: %v vs %v", a, b)
		}
		if a[i] {
			count++
		}
	}
	if count < 10 || count > 30 {
		t.Errorf("%d of 40 failed at rate 0.5", count)
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Error("another seed gave the same failures")
	}
}

func TestAdminRuntimeKnobs(t *testing.T) {
	f := startFleet(t, DefaultConfig())
	u := f.URLs()[0]
	resp, body := do(t, "POST", u+"/admin/config", `{"failure_rate":1,"failure_status":502,"prefill_multiplier":2,"decode_multiplier":3,"health_flap_ms":3600000}`)
	m := decode(t, body)
	if resp.StatusCode != 200 || path(t, m, "failure_rate") != 1.0 || path(t, m, "prefill_multiplier") != 2.0 ||
		path(t, m, "decode_multiplier") != 3.0 || path(t, m, "health_flap_ms") != 3600000.0 {
		t.Fatalf("admin: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "POST", u+"/v1/completions", `{"prompt":"x"}`); resp.StatusCode != 502 {
		t.Errorf("failure_rate 1: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", u+"/health", ""); resp.StatusCode != 200 {
		t.Errorf("first half of an hour-long flap must be healthy: %d", resp.StatusCode)
	}
	for _, bad := range []string{`{"failure_rate":1.5}`, `{"decode_multiplier":-1}`, `{"failure_status":302}`, `{"health_flap_ms":-5}`} {
		if resp, _ := do(t, "POST", u+"/admin/config", bad); resp.StatusCode != 400 {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestHealthFlapPhases(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := adminState{AdminConfig: AdminConfig{HealthFlap: 10 * time.Second}, since: t0}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {9 * time.Second, true}, {10 * time.Second, false}, {19 * time.Second, false}, {20 * time.Second, true}} {
		if got := s.healthy(t0.Add(c.at)); got != c.want {
			t.Errorf("at +%v: healthy %v, want %v", c.at, got, c.want)
		}
	}
	s.Unhealthy = true
	if s.healthy(t0) {
		t.Error("Unhealthy overrides the flap")
	}
}

func TestPacedSourceDeadlines(t *testing.T) {
	start := time.Now().Add(-time.Hour) // every deadline has passed: no sleeping
	p := &pacedSource{start: start, first: 30 * ms, gap: 10 * ms, total: 3}
	have := 0
	for have < 3 {
		n, ok := p.await(have, nil, nil)
		if !ok || n != have+1 {
			t.Fatalf("await(%d) = %d, %v", have, n, ok)
		}
		have = n
	}
	if n, ok := (&pacedSource{total: 7}).await(0, nil, nil); n != 7 || !ok {
		t.Fatalf("unpaced: %d %v, want all 7 at once", n, ok)
	}
	done := make(chan struct{})
	close(done)
	if _, ok := (&pacedSource{start: time.Now(), first: time.Hour, total: 2}).await(0, done, nil); ok {
		t.Fatal("await must give up when done closes")
	}
}

// TestSlowTTFTHoldsNonStreamedAnswers: a non-streamed answer with slow-ttft is held too.
// (An hour: the check is that nothing arrives while the request is held, never a duration.)
func TestSlowTTFTHoldsNonStreamedAnswers(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		forEachServer(t, func(t *testing.T, kind ServerKind) {
			cfg := fastEngine(kind, DialectSGLang)
			cfg.Mode = mode
			f := startFleet(t, cfg)
			c, err := net.Dial("tcp", f.Addrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			body := `{"prompt":"x"}`
			if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: m\r\nX-Mock-Fault: slow-ttft=3600000\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, "the request to be held", func() bool { return f.Workers()[0].Active() == 1 })
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("%s: answered before the first token was due", mode)
			}
		})
	}
}

// Each engine of a started fleet gets its own worker's decode factor.
func TestFleetAppliesDecodeFactors(t *testing.T) {
	f := startFleet(t, config(func(c *Config) { c.Mode, c.Count, c.DecodeFactors = ModeEngine, 3, map[int]float64{2: 2} }))
	for i, w := range f.Workers() {
		want := DefaultDecodeBase
		if i == 2 {
			want = 2 * DefaultDecodeBase
		}
		if got := w.engine.eng.p.decodeBase; got != want {
			t.Errorf("worker %d: decode base %v, want %v", i, got, want)
		}
	}
}
