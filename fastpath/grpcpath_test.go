package fastpath

import (
	"github.com/VictoriaMetrics/metrics"

	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
	"github.com/smg-go/smg/worker"
)

// grpcGateway is a gateway over a mock gRPC engine fleet with the real Qwen3 tokenizer. The
// workers are registered by their HTTP admin URL (the mock's port answers both), and the
// backend says they are gRPC workers.
type grpcGateway struct {
	*gateway
	fleet *mockworker.Fleet
	addrs []string // the engines' addresses
	// maxPrompt, when set, replaces the model's longest prompt.
	maxPrompt atomic.Int64
	tok       *tokenizer.Tokenizer
	mu        sync.Mutex
	conns     map[string]*grpcworker.Client
}

func qwen3Dir(t testing.TB) string {
	d := os.Getenv("SMG_TOKENIZER_DATA")
	if d == "" {
		home, _ := os.UserHomeDir()
		d = filepath.Join(home, ".cache/smg-tokenizers/v1")
	}
	d = filepath.Join(d, "qwen3")
	if _, err := os.Stat(filepath.Join(d, "tokenizer.json")); err != nil {
		t.Fatalf("the Qwen3 tokenizer is missing (run bash hack/tokenizer/fetch.sh): %v", err)
	}
	return d
}

// loadQwen3 loads Qwen3's tokenizer and chat template from its directory, as --model-path does.
func loadQwen3(t testing.TB) (dir string, tok *tokenizer.Tokenizer, tmpl *chat.Template) {
	dir = qwen3Dir(t)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tmpl, err = chat.FromTokenizerConfig(tc); err != nil {
		t.Fatal(err)
	}
	return dir, tok, tmpl
}

func newGRPCGateway(t *testing.T, dialect mockworker.Dialect, workers int, policyName string, cfg Config, mcfg func(*mockworker.Config)) *grpcGateway {
	return newGRPCGatewayTB(t, dialect, workers, policyName, cfg, mcfg)
}

func newGRPCGatewayTB(t testing.TB, dialect mockworker.Dialect, workers int, policyName string, cfg Config, mcfg func(*mockworker.Config)) *grpcGateway {
	// Runs last: every request's goroutines have ended once the gateway is gone.
	t.Cleanup(func() { noGRPCCalls(t) })
	dir, tok, tmpl := loadQwen3(t)
	mc := mockworker.DefaultConfig()
	mc.Protocol, mc.Dialect, mc.Mode, mc.TimeScale, mc.Count, mc.TokenizerPath = mockworker.ProtocolGRPC, dialect, mockworker.ModeEngine, 50, workers, dir
	mc.Model = "qwen3"
	if mcfg != nil {
		mcfg(&mc)
	}
	var gg *grpcGateway
	if mcfg == nil || workers > 0 {
		gg = &grpcGateway{fleet: mockworkertest.Start(t, mc), tok: tok, conns: map[string]*grpcworker.Client{}}
		gg.addrs = gg.fleet.Addrs()
	} else {
		gg = &grpcGateway{tok: tok, conns: map[string]*grpcworker.Client{}}
		mcfg(&mc) // workers 0: mcfg starts the engines and sets mc.Host to their address
		gg.addrs = []string{mc.Host}
	}
	d := grpcworker.SGLang
	if dialect == mockworker.DialectVLLM {
		d = grpcworker.VLLM
	}
	model := GRPCModel{ID: "qwen3", Tokenizer: tok, Template: tmpl, EOSTokenIDs: tok.EOSTokenIDs(), MaxPromptTokens: 32768}
	cfg.GRPC = &GRPCBackend{
		IsGRPC: func(*worker.Worker) bool { return true },
		Client: func(w *worker.Worker) (*grpcworker.Client, error) {
			gg.mu.Lock()
			defer gg.mu.Unlock()
			addr := strings.TrimPrefix(w.URL, "http://")
			if c := gg.conns[addr]; c != nil {
				return c, nil
			}
			c, err := grpcworker.Dial(context.Background(), addr, d, grpcworker.DefaultConfig())
			if err != nil {
				return nil, err
			}
			gg.conns[addr] = c
			return c, nil
		},
		Model: func(name string) (GRPCModel, bool) {
			if name == "qwen3" || name == "" {
				m := model
				if n := gg.maxPrompt.Load(); n > 0 {
					m.MaxPromptTokens = int(n)
				}
				return m, true
			}
			return GRPCModel{}, false
		},
		Tokenizers: 2,
	}
	gg.gateway = &gateway{t: t, fakes: map[string]*fakeWorker{}}
	gg.start(cfg, policy.RouterConfig{DefaultPolicy: policyName}, func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }, func() {
		for _, a := range gg.addrs {
			gg.addWorker("http://"+a, "qwen3")
		}
	})
	t.Cleanup(func() {
		for _, c := range gg.conns {
			c.Close()
		}
	})
	return gg
}

// post sends body to path and returns the status and the whole answer body.
func (g *grpcGateway) post(path, body string) (int, string) {
	g.t.Helper()
	resp := g.do("POST", path, body)
	return resp.StatusCode(), string(resp.Body())
}

// events splits an SSE answer into its data payloads.
func events(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		if ev = strings.TrimSpace(ev); ev == "" {
			continue
		}
		if !strings.HasPrefix(ev, "data: ") {
			t.Fatalf("not an SSE data event: %q", ev)
		}
		out = append(out, strings.TrimPrefix(ev, "data: "))
	}
	return out
}

type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		MatchedStop  any     `json:"matched_stop"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

type completionJSON struct {
	Object  string `json:"object"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		MatchedStop  any    `json:"matched_stop"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

const grpcChatBody = `{"model":"qwen3","messages":[{"role":"user","content":"Say something."}]%s}`

func TestGRPCChatCompletions(t *testing.T) {
	for _, d := range []mockworker.Dialect{mockworker.DialectSGLang, mockworker.DialectVLLM} {
		t.Run(string(d), func(t *testing.T) {
			g := newGRPCGateway(t, d, 2, "round_robin", Config{}, nil)
			eos := float64(g.tok.EOSTokenIDs()[0])

			st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, ""))
			var c completionJSON
			if err := json.Unmarshal([]byte(body), &c); st != 200 || err != nil {
				t.Fatalf("%d %s %v", st, body, err)
			}
			if ch := c.Choices[0]; c.Object != "chat.completion" || ch.Message.Role != "assistant" || ch.Message.Content != mockworker.AnswerText ||
				ch.FinishReason != "stop" || ch.MatchedStop != eos || c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens != len(g.tok.Encode(nil, mockworker.AnswerText, false))+1 {
				t.Fatalf("answer %s", body)
			}

			// Streamed, with usage: a role chunk, deltas that make the text, a finish chunk.
			st, body = g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, `,"stream":true,"stream_options":{"include_usage":true}`))
			evs := events(t, body)
			if st != 200 || evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("%d %s", st, body)
			}
			var text strings.Builder
			var finish string
			for i, ev := range evs[:len(evs)-1] {
				var ck chunkJSON
				if err := json.Unmarshal([]byte(ev), &ck); err != nil || ck.Object != "chat.completion.chunk" {
					t.Fatalf("event %q: %v", ev, err)
				}
				switch {
				case i == 0:
					if r := ck.Choices[0].Delta.Role; r == nil || *r != "assistant" {
						t.Fatalf("first event is not the role chunk: %s", ev)
					}
				case len(ck.Choices) == 0:
					if i != len(evs)-2 || ck.Usage == nil || ck.Usage.CompletionTokens == 0 || ck.Usage.TotalTokens != ck.Usage.PromptTokens+ck.Usage.CompletionTokens {
						t.Fatalf("usage chunk %s", ev)
					}
				case ck.Choices[0].FinishReason != nil:
					finish = *ck.Choices[0].FinishReason
				default:
					text.WriteString(*ck.Choices[0].Delta.Content)
				}
			}
			if text.String() != mockworker.AnswerText || finish != "stop" {
				t.Fatalf("streamed %q finish %q", text.String(), finish)
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
		})
	}
}

func TestGRPCStopsAndLimits(t *testing.T) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{}, nil)
	cases := []struct {
		extra, content, finish string
		matched                any
	}{
		{`,"stop":["sat on"]`, "the mock cat ", "stop", "sat on"},
		{`,"stop":"sat on","no_stop_trim":true`, "the mock cat sat on", "stop", "sat on"},
		{`,"max_tokens":3`, "", "length", nil},
		{`,"max_completion_tokens":3`, "", "length", nil},
	}
	answer := g.tok.Encode(nil, mockworker.AnswerText, false)
	three := string(g.tok.Decode(nil, answer[:3], true))
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			extra := c.extra
			if stream {
				extra += `,"stream":true`
			}
			st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, extra))
			want := c.content
			if c.finish == "length" {
				want = three
			}
			var content, finish string
			var matched any
			if stream {
				for _, ev := range events(t, body) {
					var ck chunkJSON
					if ev == "[DONE]" || json.Unmarshal([]byte(ev), &ck) != nil || len(ck.Choices) == 0 {
						continue
					}
					if ch := ck.Choices[0]; ch.FinishReason != nil {
						finish, matched = *ch.FinishReason, ch.MatchedStop
					} else if ch.Delta.Content != nil {
						content += *ch.Delta.Content
					}
				}
			} else {
				var cj completionJSON
				if err := json.Unmarshal([]byte(body), &cj); err != nil {
					t.Fatalf("%s: %v", body, err)
				}
				content, finish, matched = cj.Choices[0].Message.Content, cj.Choices[0].FinishReason, cj.Choices[0].MatchedStop
			}
			if st != 200 || content != want || finish != c.finish || matched != c.matched {
				t.Errorf("%s stream=%v: %d content %q finish %q matched %v\n%s", c.extra, stream, st, content, finish, matched, body)
			}
		}
	}
	// stop_token_ids: the id of the answer's third token ends it before that token.
	st, body := g.post("/v1/completions", fmt.Sprintf(`{"model":"qwen3","prompt":"Say","max_tokens":100,"stop_token_ids":[%d]}`, answer[2]))
	var cj completionJSON
	if err := json.Unmarshal([]byte(body), &cj); st != 200 || err != nil || cj.Object != "text_completion" ||
		cj.Choices[0].Text != string(g.tok.Decode(nil, answer[:2], true)) || cj.Choices[0].MatchedStop != float64(answer[2]) {
		t.Fatalf("stop_token_ids: %d %s", st, body)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

func TestGRPCCompletionsNAndGenerate(t *testing.T) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{}, nil)
	st, body := g.post("/v1/completions", `{"model":"qwen3","prompt":"Say","max_tokens":100,"n":2,"stream":true}`)
	texts := map[int]string{}
	finishes := 0
	for _, ev := range events(t, body) {
		var ck chunkJSON
		if ev == "[DONE]" {
			continue
		}
		if err := json.Unmarshal([]byte(ev), &ck); err != nil || ck.Object != "text_completion" {
			t.Fatalf("%s: %v", ev, err)
		}
		texts[ck.Choices[0].Index] += ck.Choices[0].Text
		if ck.Choices[0].FinishReason != nil {
			finishes++
		}
	}
	if st != 200 || finishes != 2 || texts[0] != mockworker.AnswerText || texts[1] != mockworker.AnswerText {
		t.Fatalf("n=2: %d %v finishes %d", st, texts, finishes)
	}
	ids := g.tok.Encode(nil, "Say something.", false)
	idJSON, _ := json.Marshal(ids)
	for _, in := range []string{`"text":"Say something."`, `"input_ids":` + string(idJSON)} {
		st, body = g.post("/generate", `{"model":"qwen3",`+in+`,"sampling_params":{"max_new_tokens":100}}`)
		var gj struct {
			Text     string   `json:"text"`
			Output   []uint32 `json:"output_ids"`
			MetaInfo struct {
				FinishReason struct {
					Type string `json:"type"`
				} `json:"finish_reason"`
				PromptTokens int `json:"prompt_tokens"`
			} `json:"meta_info"`
		}
		if err := json.Unmarshal([]byte(body), &gj); st != 200 || err != nil || gj.Text != mockworker.AnswerText || gj.MetaInfo.FinishReason.Type != "stop" || gj.MetaInfo.PromptTokens == 0 {
			t.Fatalf("/generate %s: %d %s", in, st, body)
		}
	}
	// Errors the engine never sees.
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"qwen3","messages":"hi"}`, "messages"},
		{"/v1/chat/completions", `{"model":"qwen3","messages":[],"top_p":0}`, "top_p"},
		{"/v1/completions", `{"model":"qwen3","prompt":["a","b"]}`, "one prompt"},
		{"/generate", `{"model":"qwen3","input_ids":[999999999]}`, "vocabulary"},
	} {
		st, body := g.post(c.path, c.body)
		if st != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, `"type":"invalid_request_error"`) {
			t.Errorf("%s %s: %d %s", c.path, c.body, st, body)
		}
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// A client that leaves mid-stream: the engine is told at once (its sequence is gone) and the
// in-flight count is back to 0.
func TestGRPCClientGoneAbortsTheEngine(t *testing.T) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{}, func(c *mockworker.Config) { c.TimeScale = 1 })
	conn, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(grpcChatBody, `,"stream":true,"ignore_eos":true,"max_tokens":100000`)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":"the`) {
			break // tokens are flowing
		}
	}
	w := g.fleet.Workers()[0]
	if w.Active() != 1 || g.inFlight() != 1 {
		t.Fatalf("mid-stream: engine active %d, in flight %d", w.Active(), g.inFlight())
	}
	conn.Close()
	testutil.Eventually(t, "the engine's sequence aborted", func() bool { return w.Active() == 0 })
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// UNAVAILABLE from a worker before the first token: the request is retried on another one.
func TestGRPCUnavailableIsRetried(t *testing.T) {
	cfg := Config{}
	cfg.Retry = DefaultConfig().Retry
	g := newGRPCGateway(t, mockworker.DialectSGLang, 2, "round_robin", cfg, nil)
	if err := g.fleet.Workers()[0].Configure(mockworker.AdminConfig{Status: 503}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, ""))
		if st != 200 || !strings.Contains(body, "the mock cat") {
			t.Fatalf("%d %s", st, body)
		}
	}
	if n := g.fleet.Workers()[1].Served(); n != 4 {
		t.Fatalf("the healthy worker served %d of 4", n)
	}
	// Every worker failing: the client gets the engine's class as its status.
	if err := g.fleet.Workers()[1].Configure(mockworker.AdminConfig{Status: 503}); err != nil {
		t.Fatal(err)
	}
	if st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, "")); st != 503 || !strings.Contains(body, `"code":"worker_unavailable"`) {
		t.Fatalf("all unavailable: %d %s", st, body)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// A gRPC request that every worker refused used its retries: its record says so
// (smg_worker_retries_exhausted_total).
func TestGRPCEveryWorkerFailingExhaustsTheRetries(t *testing.T) {
	c := &collector{}
	cfg := Config{Telemetry: newTelemetrySink(t, metrics.NewSet(), c)}
	cfg.Retry = fastRetries()
	g := newGRPCGateway(t, mockworker.DialectSGLang, 2, "round_robin", cfg, nil)
	for _, w := range g.fleet.Workers() {
		if err := w.Configure(mockworker.AdminConfig{Status: 503}); err != nil {
			t.Fatal(err)
		}
	}
	if st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, "")); st != 503 {
		t.Fatalf("all unavailable: %d %s", st, body)
	}
	n := 0
	if r := c.next(t, &n); r.Status != 503 || r.Attempts != 2 || !r.RetriesExhausted {
		t.Fatalf("record %+v: want 503 after 2 tries with the retries exhausted", r)
	}
}

// An engine that does not answer within --request-timeout-secs: 504.
func TestGRPCHangTimesOut(t *testing.T) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{RequestTimeout: 300 * time.Millisecond}, nil)
	w := g.fleet.Workers()[0]
	if err := w.Configure(mockworker.AdminConfig{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, "")); st != 504 {
		t.Fatalf("%d %s", st, body)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	testutil.Eventually(t, "the engine let go", func() bool { return w.Active() == 0 })
}

// cache_aware on token trees and prefix_hash on token heads: requests sharing a long prompt
// prefix go to the same worker.
func TestGRPCCacheAwareKeepsPrefixesTogether(t *testing.T) {
	for _, p := range []string{"cache_aware", "prefix_hash"} {
		t.Run(p, func(t *testing.T) { samePrefixSameWorker(t, p) })
	}
}

func samePrefixSameWorker(t *testing.T, policyName string) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 4, policyName, Config{}, nil)
	shared := strings.Repeat("The shared system prompt describes a long task in detail. ", 40)
	seen := map[string]int{}
	for i := range 8 {
		body := fmt.Sprintf(`{"model":"qwen3","max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":"question %d"}]}`, shared, i)
		resp := g.do("POST", "/v1/chat/completions", body)
		if resp.StatusCode() != 200 {
			t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
		}
		seen[string(resp.Header.Peek(headerRoutedWorker))]++
	}
	if len(seen) != 1 {
		t.Fatalf("same-prefix requests spread over %v", seen)
	}
	if policyName == "cache_aware" {
		// The picks were made on token ids: the token tree holds the prompts, cut at the
		// block size.
		rt, _ := g.srv.router.Current().Lookup([]byte("qwen3"))
		tree := rt.Builder.(*cacheaware.Builder).TokenTree()
		if n := tree.Size(); n < int64(len(g.tok.Encode(nil, shared, false))) {
			t.Fatalf("token tree size %d: the requests were not routed on token ids", n)
		}
	}
}

// noGRPCCalls waits until no goroutine of a gRPC request (grpcCall) is left.
func noGRPCCalls(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, "no gRPC request goroutine left", func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "fastpath.(*grpcCall)")
	})
}

// brokenEngine is an SGLang engine that streams the first tokens of the mock's answer and
// then fails the call with INTERNAL, as an engine that aborted the request does.
type brokenEngine struct {
	sglangpb.UnimplementedSglangSchedulerServer
	ids []uint32
}

func (e *brokenEngine) Generate(req *sglangpb.GenerateRequest, st grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	for _, id := range e.ids[:3] {
		if err := st.Send(&sglangpb.GenerateResponse{Response: &sglangpb.GenerateResponse_Chunk{Chunk: &sglangpb.GenerateStreamChunk{TokenIds: []uint32{id}, PromptTokens: 5}}}); err != nil {
			return err
		}
	}
	return status.Error(codes.Internal, "the scheduler aborted the request")
}

// An engine that fails mid-stream: the client gets an SSE error event, then [DONE]; an
// unstreamed request, whose answer had not started, gets the engine's class as its status.
func TestGRPCMidStreamFailure(t *testing.T) {
	tok, err := tokenizer.Load(qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sglangpb.RegisterSglangSchedulerServer(srv, &brokenEngine{ids: tok.Encode(nil, mockworker.AnswerText, false)})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	g := newGRPCGatewayTB(t, mockworker.DialectSGLang, 0, "round_robin", Config{}, func(c *mockworker.Config) { c.Host = ln.Addr().String() })

	st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, `,"stream":true`))
	evs := events(t, body)
	n := len(evs)
	if st != 200 || n < 3 || evs[n-1] != "[DONE]" || !strings.Contains(evs[n-2], `"error":{"message":"the scheduler aborted the request","type":"server_error","code":"worker_unreachable"`) {
		t.Fatalf("%d %s", st, body)
	}
	if !strings.Contains(body, `"content":"the"`) {
		t.Fatalf("the tokens before the failure are missing: %s", body)
	}
	st, body = g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, ""))
	if st != 502 || !strings.Contains(body, "the scheduler aborted the request") {
		t.Fatalf("unstreamed: %d %s", st, body)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// Tokenizing runs off the event loops under a bound: while every tokenizer slot is taken a
// gRPC request waits for one, and other requests on the same loops are still served.
func TestGRPCTokenizerPoolIsBoundedAndOffTheLoops(t *testing.T) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{EventLoops: 1}, nil)
	sem := g.srv.cfg.GRPC.sem
	for range cap(sem) {
		sem <- struct{}{} // every slot taken, as by long prompts being tokenized
	}
	type answer struct {
		st   int
		body string
	}
	done := make(chan answer, 1)
	c2 := &grpcGateway{gateway: g.gateway}
	go func() {
		st, body := c2.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, `,"max_tokens":4`))
		done <- answer{st, body}
	}()
	testutil.Eventually(t, "the request waits for a tokenizer slot", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "fastpath.(*grpcCall).prepare")
	})
	// The one loop still serves other requests.
	if resp := g.do("GET", "/readiness", ""); resp.StatusCode() != 200 {
		t.Fatalf("readiness while tokenizing: %d", resp.StatusCode())
	}
	select {
	case a := <-done:
		t.Fatalf("answered without a tokenizer slot: %d %s", a.st, a.body)
	default:
	}
	for range cap(sem) {
		<-sem
	}
	if a := <-done; a.st != 200 || !strings.Contains(a.body, `"finish_reason":"length"`) {
		t.Fatalf("after the slots freed: %d %s", a.st, a.body)
	}
}

// A 100 KB prompt is served; a prompt longer than the model takes gets 400 before any engine
// sees it.
func TestGRPCLongPrompts(t *testing.T) {
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{MaxPayloadSize: 1 << 20}, nil)
	long := strings.Repeat("Every sentence of this long prompt adds a few more tokens to it. ", 1600) // 100 KB
	body := fmt.Sprintf(`{"model":"qwen3","max_tokens":2,"messages":[{"role":"user","content":%q}]}`, long)
	if st, answer := g.post("/v1/chat/completions", body); st != 200 || !strings.Contains(answer, `"finish_reason":"length"`) {
		t.Fatalf("100 KB prompt: %d %s", st, answer)
	}
	served := g.fleet.Workers()[0].Served()
	g.maxPrompt.Store(1000)
	st, answer := g.post("/v1/chat/completions", body)
	if st != 400 || !strings.Contains(answer, "takes at most 1000") {
		t.Fatalf("too long: %d %s", st, answer)
	}
	if n := g.fleet.Workers()[0].Served(); n != served {
		t.Fatalf("the engine served %d requests after the refusal, want %d", n, served)
	}
}
