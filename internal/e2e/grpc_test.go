package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
)

var grpcListening = regexp.MustCompile(`worker \d+ listening on (grpc://\S+)`)

// qwen3Dir is the Qwen3 tokenizer of the test data (bash hack/tokenizer/fetch.sh).
func qwen3Dir(t testing.TB) string { return tokenizerDir(t, "qwen3") }

// tokenizerDir is the directory of a tokenizer make tools fetched (qwen3, llama3, ...).
func tokenizerDir(t testing.TB, name string) string {
	d := os.Getenv("SMG_TOKENIZER_DATA")
	if d == "" {
		home, _ := os.UserHomeDir()
		d = filepath.Join(home, ".cache/smg-tokenizers/v1")
	}
	d = filepath.Join(d, name)
	if _, err := os.Stat(filepath.Join(d, "tokenizer.json")); err != nil {
		t.Fatalf("the %s tokenizer is missing (run bash hack/tokenizer/fetch.sh): %v", name, err)
	}
	return d
}

// startGRPCMocks runs a mock gRPC engine fleet of n workers with the Qwen3 tokenizer.
func startGRPCMocks(t *testing.T, n int, dialect string, args ...string) []string {
	t.Helper()
	b := Build(t)
	all := append([]string{"--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(n), "--protocol", "grpc",
		"--dialect", dialect, "--tokenizer-path", qwen3Dir(t), "--model", "qwen3"}, args...)
	p := Start(t, b.MockWorker, all...)
	var urls []string
	testutil.Eventually(t, "mock gRPC workers listening", func() bool {
		urls = urls[:0]
		for _, m := range grpcListening.FindAllStringSubmatch(p.Output(), -1) {
			urls = append(urls, m[1])
		}
		return len(urls) == n
	})
	return urls
}

// grpcLoads is a mock gRPC worker's running requests, from the HTTP routes its port also
// answers (the numbers its GetLoads gives).
func grpcRunning(t *testing.T, url string) int {
	r := MustDo(t, "GET", "http://"+strings.TrimPrefix(url, "grpc://")+"/v1/loads", "", nil)
	var l struct {
		Loads []struct {
			Running int `json:"num_running_reqs"`
		} `json:"loads"`
	}
	if err := json.Unmarshal([]byte(r.Body), &l); err != nil || len(l.Loads) == 0 {
		t.Fatalf("loads of %s: %v %s", url, err, r.Body)
	}
	return l.Loads[0].Running
}

func inFlight(t *testing.T, g *Gateway, urls []string) (sum float64) {
	for _, u := range urls {
		v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, u))
		sum += v
	}
	return sum
}

const grpcChat = `{"model":"qwen3","messages":[{"role":"user","content":"Say something."}]%s}`

// TestGRPCFleetServesTheOpenAIRoutes: a real smg over mock gRPC engines (both dialects)
// gives the mock's known answer on chat and completions, streamed and not, with n, stop
// strings (hidden unless no_stop_trim), stop_token_ids, max_tokens and usage.
func TestGRPCFleetServesTheOpenAIRoutes(t *testing.T) {
	for _, d := range []string{"sglang", "vllm"} {
		t.Run(d, func(t *testing.T) {
			urls := startGRPCMocks(t, 2, d)
			g := StartGateway(t, append([]string{"--model-path", qwen3Dir(t), "--policy", "round_robin", "--worker-urls"}, urls...)...)
			type choice struct {
				Index   int `json:"index"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
				MatchedStop  any    `json:"matched_stop"`
			}
			var resp struct {
				Object  string   `json:"object"`
				Choices []choice `json:"choices"`
				Usage   struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			post := func(path, body string) {
				t.Helper()
				r := MustDo(t, "POST", g.URL+path, body, nil)
				resp.Choices = nil
				if err := json.Unmarshal([]byte(r.Body), &resp); r.Status != 200 || err != nil {
					t.Fatalf("%s %s: %d %s", path, body, r.Status, r.Body)
				}
			}
			post("/v1/chat/completions", fmt.Sprintf(grpcChat, `,"n":2`))
			for _, c := range resp.Choices {
				if c.Message.Content != mockworker.AnswerText || c.FinishReason != "stop" {
					t.Fatalf("chat n=2: %+v", resp)
				}
			}
			if len(resp.Choices) != 2 || resp.Object != "chat.completion" || resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
				t.Fatalf("chat n=2: %+v", resp)
			}
			post("/v1/chat/completions", fmt.Sprintf(grpcChat, `,"stop":["sat on"]`))
			if c := resp.Choices[0]; c.Message.Content != "the mock cat " || c.MatchedStop != "sat on" {
				t.Fatalf("stop string: %+v", c)
			}
			post("/v1/completions", `{"model":"qwen3","prompt":"Say","stop":"sat on","no_stop_trim":true,"max_tokens":100}`)
			if c := resp.Choices[0]; c.Text != "the mock cat sat on" || c.FinishReason != "stop" {
				t.Fatalf("no_stop_trim: %+v", c)
			}
			post("/v1/completions", `{"model":"qwen3","prompt":"Say","max_tokens":2}`)
			if c := resp.Choices[0]; c.FinishReason != "length" || resp.Usage.CompletionTokens != 2 {
				t.Fatalf("max_tokens: %+v %+v", c, resp.Usage)
			}

			// Streamed with usage: role chunk, deltas making the answer, finish, usage, [DONE].
			hr, br := Stream(t, g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, `,"stream":true,"stream_options":{"include_usage":true}`))
			defer hr.Body.Close()
			var text strings.Builder
			var finish string
			var events, usage int
			for {
				ev, err := ReadEvent(br)
				if err != nil {
					t.Fatalf("after %d events: %v", events, err)
				}
				if ev == "[DONE]" {
					break
				}
				events++
				var ck struct {
					Choices []struct {
						Delta struct {
							Role    *string `json:"role"`
							Content *string `json:"content"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
					Usage *struct {
						TotalTokens int `json:"total_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(ev), &ck); err != nil {
					t.Fatalf("%s: %v", ev, err)
				}
				switch {
				case events == 1 && (len(ck.Choices) == 0 || ck.Choices[0].Delta.Role == nil):
					t.Fatalf("the first event is not the role chunk: %s", ev)
				case len(ck.Choices) == 0:
					if ck.Usage == nil || ck.Usage.TotalTokens == 0 {
						t.Fatalf("usage chunk %s", ev)
					}
					usage++
				case ck.Choices[0].FinishReason != nil:
					finish = *ck.Choices[0].FinishReason
				case ck.Choices[0].Delta.Content != nil:
					text.WriteString(*ck.Choices[0].Delta.Content)
				}
			}
			if text.String() != mockworker.AnswerText || finish != "stop" || usage != 1 {
				t.Fatalf("streamed %q, finish %q, %d usage chunks", text.String(), finish, usage)
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return inFlight(t, g, urls) == 0 })
		})
	}
}

// TestGRPCClientGoneAbortsTheEngine: a client that leaves a real smg mid-stream: the mock
// engine's running sequence is gone (the gateway sent Abort) and the in-flight count is 0.
func TestGRPCClientGoneAbortsTheEngine(t *testing.T) {
	urls := startGRPCMocks(t, 1, "sglang", "--time-scale", "1")
	g := StartGateway(t, "--model-path", qwen3Dir(t), "--worker-urls", urls[0])
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(grpcChat, `,"stream":true,"ignore_eos":true,"max_tokens":100000`)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"the`) {
			break
		}
	}
	if n := grpcRunning(t, urls[0]); n != 1 {
		t.Fatalf("mid-stream the engine runs %d requests, want 1", n)
	}
	conn.Close()
	testutil.Eventually(t, "the engine's sequence aborted", func() bool { return grpcRunning(t, urls[0]) == 0 })
	testutil.Eventually(t, "in-flight back to 0", func() bool { return inFlight(t, g, urls) == 0 })
}

// TestGRPCCacheAwareRoutesOnTokens: with cache_aware, requests sharing a long prefix go to
// one engine of four.
func TestGRPCCacheAwareRoutesOnTokens(t *testing.T) {
	urls := startGRPCMocks(t, 4, "sglang")
	g := StartGateway(t, append([]string{"--model-path", qwen3Dir(t), "--policy", "cache_aware", "--worker-urls"}, urls...)...)
	shared := strings.Repeat("The shared system prompt describes a long task in detail. ", 40)
	seen := map[string]int{}
	for i := range 8 {
		body := fmt.Sprintf(`{"model":"qwen3","max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d"}]}`, shared, i)
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, nil)
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		seen[r.Header.Get("X-Smg-Routed-Worker-Id")]++
	}
	if len(seen) != 1 {
		t.Fatalf("same-prefix requests spread over %v", seen)
	}
}

// TestGRPCFaults: an engine answering UNAVAILABLE (its admin status 503) is retried on
// another engine before the client sees a byte; an engine that does not answer ends in 504 at
// --request-timeout-secs; nothing stays in flight.
func TestGRPCFaults(t *testing.T) {
	urls := startGRPCMocks(t, 2, "sglang")
	admin := func(i int, cfg string) {
		t.Helper()
		if r := MustDo(t, "POST", "http://"+strings.TrimPrefix(urls[i], "grpc://")+"/admin/config", cfg, nil); r.Status != 200 {
			t.Fatalf("admin/config: %d %s", r.Status, r.Body)
		}
	}
	g := StartGateway(t, append([]string{"--model-path", qwen3Dir(t), "--policy", "round_robin", "--request-timeout-secs", "2", "--worker-urls"}, urls...)...)
	admin(0, `{"status":503}`)
	for range 6 {
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, ""), nil)
		if r.Status != 200 || !strings.Contains(r.Body, "the mock cat") || r.Header.Get("X-Smg-Routed-Worker-Id") != urls[1] {
			t.Fatalf("with worker 0 unavailable: %d %s %v", r.Status, r.Body, r.Header)
		}
	}
	admin(0, `{"status":0}`)
	admin(1, `{"delay_ms":60000}`)
	admin(0, `{"delay_ms":60000}`)
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, ""), nil); r.Status != 504 {
		t.Fatalf("hanging engines: %d %s, want 504", r.Status, r.Body)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return inFlight(t, g, urls) == 0 })
}

// TestGRPCPromptLongerThanTheEngineTakesIsRefusedAtTheGateway: the engine's GetModelInfo
// (max_req_input_len) is learned before its worker turns ready, so a prompt longer than it
// gets a 400 from the gateway naming the limit, and the engine never sees it; a short prompt
// is still served.
func TestGRPCPromptLongerThanTheEngineTakesIsRefusedAtTheGateway(t *testing.T) {
	urls := startGRPCMocks(t, 1, "vllm", "--mode", "engine", "--kv-tokens", "64", "--block-size", "16")
	g := StartGateway(t, "--model-path", qwen3Dir(t), "--policy", "round_robin", "--worker-urls", urls[0])
	long := fmt.Sprintf(grpcChat, "")
	long = strings.Replace(long, "Say something.", strings.Repeat("Say something else. ", 40), 1)
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", long, nil)
	if r.Status != 400 || !strings.Contains(r.Body, "takes at most 63") {
		t.Fatalf("a prompt over the engine's 63 tokens: %d %s, want a 400 naming the limit", r.Status, r.Body)
	}
	mockMetrics := "http://" + strings.TrimPrefix(urls[0], "grpc://") + "/metrics"
	if q, ok := Metric(t, mockMetrics, `vllm:prefix_cache_queries_total{model_name="qwen3"}`); !ok || q != 0 {
		t.Fatalf("the engine was asked about %v prompt tokens (series found: %v), want none", q, ok)
	}
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, ""), nil); r.Status != 200 {
		t.Fatalf("a short prompt: %d %s", r.Status, r.Body)
	}
	if q, _ := Metric(t, mockMetrics, `vllm:prefix_cache_queries_total{model_name="qwen3"}`); q == 0 {
		t.Fatal("the engine's prompt counter did not move for a served prompt: the check above proves nothing")
	}
}

// TestGRPCCacheAwareRoutesOnTheEnginesKVEvents: cache_aware over gRPC engines that publish
// KV-cache events follows each engine's SubscribeKvEvents stream and routes on what the
// engines report. Same-prefix requests stay on one engine, decided in event mode; once that
// engine flushes its cache (AllBlocksCleared), the next request with the prefix is foretold
// no hit (the approximate tree would still call it one) and goes back to its home engine.
func TestGRPCCacheAwareRoutesOnTheEnginesKVEvents(t *testing.T) {
	urls := startGRPCMocks(t, 3, "sglang", "--mode", "engine", "--kv-events-port", "0", "--block-size", "16")
	g := StartGateway(t, append([]string{"--model-path", qwen3Dir(t), "--policy", "cache_aware", "--worker-urls"}, urls...)...)
	metric := func(series string) float64 {
		v, _ := Metric(t, g.MetricsURL, series)
		return v
	}
	shared := strings.Repeat("The shared system prompt describes a long task in detail. ", 40)
	ask := func(i int) string {
		t.Helper()
		body := fmt.Sprintf(`{"model":"qwen3","max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d"}]}`, shared, i)
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, nil)
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		return r.Header.Get("X-Smg-Routed-Worker-Id")
	}
	first := ask(0)
	testutil.Eventually(t, "the first answer's blocks in the gateway's index", func() bool {
		return metric(`smg_kv_index_blocks{model="qwen3"}`) > 0
	})
	predicted0, picked0 := metric(`smg_cache_aware_event_mode_predicted_cached_tokens_total`), metric(`smg_cache_aware_event_mode_prompt_tokens_total`)
	cached0, prompt0 := metric(`smg_grpc_cached_prompt_tokens_total`), metric(`smg_grpc_prompt_tokens_total`)
	for i := 1; i < 6; i++ {
		if w := ask(i); w != first {
			t.Fatalf("request %d with the shared prefix went to %s, the engine holding it is %s", i, w, first)
		}
	}
	// The hit the events foretold against the one the engine reported, over the same picks.
	predicted := (metric(`smg_cache_aware_event_mode_predicted_cached_tokens_total`) - predicted0) / (metric(`smg_cache_aware_event_mode_prompt_tokens_total`) - picked0)
	real := (metric(`smg_grpc_cached_prompt_tokens_total`) - cached0) / (metric(`smg_grpc_prompt_tokens_total`) - prompt0)
	if !(real > 0.5) || math.Abs(predicted-real) > 0.05 {
		t.Fatalf("predicted hit %.3f, the engine's %.3f: want them within 5 points, on a prefix the engine holds", predicted, real)
	}
	t.Logf("predicted hit %.3f, the engine's %.3f", predicted, real)
	if n := metric(`smg_cache_aware_event_mode_picks_total`); n < 5 {
		t.Fatalf("%v picks in event mode, want the 5 after the engine reported its blocks", n)
	}
	if r := MustDo(t, "POST", "http://"+strings.TrimPrefix(first, "grpc://")+"/flush_cache", "", nil); r.Status != 200 {
		t.Fatalf("flush %s: %d %s", first, r.Status, r.Body)
	}
	testutil.Eventually(t, "the flushed engine's blocks leaving the index", func() bool {
		return metric(`smg_kv_events_cleared_total{worker="`+first+`"}`) > 0 || metric(`smg_kv_index_blocks{model="qwen3"}`) == 0
	})
	// No engine holds the prefix now: the request goes back to its home, the engine it was
	// last sent to, foretold no cached token.
	homes, predicted1 := metric(`smg_cache_aware_event_mode_home_picks_total`), metric(`smg_cache_aware_event_mode_predicted_cached_tokens_total`)
	if w := ask(6); w != first {
		t.Fatalf("after the flush the prefix went to %s, not back home to %s", w, first)
	}
	if h, p := metric(`smg_cache_aware_event_mode_home_picks_total`), metric(`smg_cache_aware_event_mode_predicted_cached_tokens_total`); h != homes+1 || p != predicted1 {
		t.Fatalf("after the flush: home picks %v -> %v, predicted cached tokens %v -> %v; want one more home pick foretelling nothing cached", homes, h, predicted1, p)
	}
}

// TestGRPCAdminRoutesAskTheEnginesGRPCService: the gateway's admin routes that ask engines
// (GET /get_loads, POST /flush_cache, GET /get_model_info, /get_server_info,
// /health_generate) ask gRPC workers through their engine's gRPC service, answering in the
// HTTP routes' shapes; vLLM's service has no FlushCache, which the flush reports per worker.
func TestGRPCAdminRoutesAskTheEnginesGRPCService(t *testing.T) {
	for _, d := range []struct{ dialect, serverType string }{{"sglang", "grpc"}, {"vllm", "vllm-grpc"}} {
		t.Run(d.dialect, func(t *testing.T) {
			urls := startGRPCMocks(t, 2, d.dialect, "--mode", "engine")
			g := StartGateway(t, append([]string{"--model-path", qwen3Dir(t), "--policy", "round_robin", "--worker-urls"}, urls...)...)
			getJSON := func(path string, v any) {
				t.Helper()
				r := MustDo(t, "GET", g.URL+path, "", nil)
				if err := json.Unmarshal([]byte(r.Body), v); r.Status != 200 || err != nil {
					t.Fatalf("GET %s: %d %s (%v)", path, r.Status, r.Body, err)
				}
			}
			var server map[string]any
			getJSON("/get_server_info", &server)
			if server["server_type"] != d.serverType { // only the gRPC answer names it
				t.Fatalf("/get_server_info %v: want the engine's gRPC GetServerInfo (server_type %q)", server, d.serverType)
			}
			var model map[string]any
			getJSON("/get_model_info", &model)
			if model["served_model_name"] != "qwen3" || model["is_generation"] != true {
				t.Fatalf("/get_model_info %v: want GetModelInfo's qwen3", model)
			}
			var loads struct {
				Workers []struct {
					Worker  string `json:"worker"`
					Load    int64  `json:"load"`
					Details struct {
						Loads []struct {
							MaxTotal int64 `json:"max_total_num_tokens"`
						} `json:"loads"`
					} `json:"details"`
					Error string `json:"error"`
				} `json:"workers"`
			}
			getJSON("/get_loads", &loads)
			if len(loads.Workers) != 2 {
				t.Fatalf("/get_loads: %+v, want both workers", loads)
			}
			for _, w := range loads.Workers {
				if w.Error != "" || w.Load < 0 || len(w.Details.Loads) != 1 || w.Details.Loads[0].MaxTotal <= 0 {
					t.Fatalf("/get_loads of %s: %+v, want GetLoads' report", w.Worker, w)
				}
			}
			if r := MustDo(t, "GET", g.URL+"/health_generate", "", nil); r.Status != 200 {
				t.Fatalf("/health_generate: %d %s", r.Status, r.Body)
			}
			r := MustDo(t, "POST", g.URL+"/flush_cache", "", nil)
			switch d.dialect {
			case "sglang":
				if r.Status != 200 {
					t.Fatalf("/flush_cache: %d %s", r.Status, r.Body)
				}
			default:
				if r.Status == 200 || !strings.Contains(r.Body, "no FlushCache") {
					t.Fatalf("/flush_cache on vLLM engines: %d %s, want each worker's failure naming the missing RPC", r.Status, r.Body)
				}
			}
		})
	}
}

// TestGRPCTokenizerFromTheEngine: without a local tokenizer (no --model-path, or the spec's
// hub id, which SMG-Go does not download) the gateway fetches each engine's tokenizer with
// GetTokenizer before the worker turns ready, and serves the model's chat with it.
// A gRPC worker's labels tokenizer_path / model_path name its model's tokenizer: a second
// model (Llama 3) served beside the --model-path one (Qwen3) decodes with its own vocabulary,
// and a label naming no directory keeps the worker out of rotation with the reason logged.
func TestGRPCWorkerLabelsNameTheModelsTokenizer(t *testing.T) {
	qwen := startGRPCMocks(t, 1, "sglang")
	g := StartGateway(t, "--model-path", qwen3Dir(t), "--policy", "round_robin", "--worker-urls", qwen[0])
	for _, label := range []string{"tokenizer_path", "model_path"} {
		t.Run(label, func(t *testing.T) {
			llama := startGRPCMocks(t, 1, "vllm", "--tokenizer-path", tokenizerDir(t, "llama3"), "--model", "llama3")
			body := `{"url":"` + llama[0] + `","model_id":"llama3","labels":{"` + label + `":"` + tokenizerDir(t, "llama3") + `"}}`
			if r := MustDo(t, "POST", g.URL+"/workers", body, nil); r.Status/100 != 2 {
				t.Fatalf("POST /workers: %d %s", r.Status, r.Body)
			}
			for model, url := range map[string]string{"llama3": llama[0], "qwen3": qwen[0]} {
				var r *Response
				testutil.Eventually(t, model+" answers", func() bool {
					r = MustDo(t, "POST", g.URL+"/v1/completions", `{"model":"`+model+`","prompt":"Say something."}`, nil)
					return r.Status == 200
				})
				var resp struct {
					Choices []struct {
						Text string `json:"text"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(r.Body), &resp); err != nil || len(resp.Choices) != 1 || resp.Choices[0].Text != mockworker.AnswerText {
					t.Fatalf("%s through %s: %d %s", model, url, r.Status, r.Body)
				}
			}
			if !strings.Contains(g.Output(), "Tokenizer loaded from a worker label") {
				t.Fatalf("the gateway did not say where the llama3 tokenizer came from:\n%s", g.Output())
			}
			if r := MustDo(t, "DELETE", g.URL+"/workers/"+workerOf(t, g, llama[0]).ID, "", nil); r.Status/100 != 2 {
				t.Fatalf("DELETE: %d %s", r.Status, r.Body)
			}
		})
	}
	t.Run("no such directory", func(t *testing.T) {
		llama := startGRPCMocks(t, 1, "vllm", "--tokenizer-path", tokenizerDir(t, "llama3"), "--model", "llama3")
		body := `{"url":"` + llama[0] + `","model_id":"llama3","labels":{"tokenizer_path":"/nonexistent/llama3"}}`
		if r := MustDo(t, "POST", g.URL+"/workers", body, nil); r.Status/100 != 2 {
			t.Fatalf("POST /workers: %d %s", r.Status, r.Body)
		}
		testutil.Eventually(t, "the reason logged", func() bool {
			return strings.Contains(g.Output(), `label tokenizer_path=\"/nonexistent/llama3\" is not a local directory`)
		})
		if w := workerOf(t, g, llama[0]); w.Status == "ready" || w.IsHealthy {
			t.Fatalf("the worker with a bad label is in rotation: %+v", w)
		}
		if r := MustDo(t, "POST", g.URL+"/v1/completions", `{"model":"llama3","prompt":"Say something."}`, nil); r.Status == 200 {
			t.Fatalf("a request for the badly labelled worker's model was served: %s", r.Body)
		}
	})
}

// registeredWorker is a worker as GET /workers shows it.
type registeredWorker struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	Status    string `json:"status"`
	IsHealthy bool   `json:"is_healthy"`
	Load      int64  `json:"load"` // requests in flight at the gateway
}

// workerOf is the registered worker at url.
func workerOf(t *testing.T, g *Gateway, url string) registeredWorker {
	t.Helper()
	var view struct {
		Workers []registeredWorker `json:"workers"`
	}
	r := MustDo(t, "GET", g.URL+"/workers", "", nil)
	if err := json.Unmarshal([]byte(r.Body), &view); err != nil {
		t.Fatalf("GET /workers: %v %s", err, r.Body)
	}
	for _, w := range view.Workers {
		if w.URL == url {
			return w
		}
	}
	t.Fatalf("no worker %s in %s", url, r.Body)
	return registeredWorker{}
}

func TestGRPCTokenizerFromTheEngine(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"no --model-path", nil},
		{"a hub id", []string{"--model-path", "Qwen/Qwen3-8B"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			urls := startGRPCMocks(t, 2, "sglang")
			g := StartGateway(t, append(append(c.args, "--policy", "round_robin", "--worker-urls"), urls...)...)
			for range 2 {
				r := MustDo(t, "POST", g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, ""), nil)
				var resp struct {
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(r.Body), &resp); r.Status != 200 || err != nil || len(resp.Choices) != 1 || resp.Choices[0].Message.Content != mockworker.AnswerText {
					t.Fatalf("chat: %d %s", r.Status, r.Body)
				}
			}
			if !strings.Contains(g.Output(), "Tokenizer loaded from the engine for gRPC workers") {
				t.Fatalf("the gateway did not say where its tokenizer came from:\n%s", g.Output())
			}
		})
	}
}
