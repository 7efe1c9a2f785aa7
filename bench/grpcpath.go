package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
)

// GRPCConfig configures the gRPC path suite: what the gateway adds on the token-aware path
// (chat template, encode, pick, dispatch; detokenize per token), against the engine alone and
// against the HTTP text path through the same binary, in one run. Start from
// DefaultGRPCConfig.
type GRPCConfig struct {
	Bin Binaries
	// TokenizerDir is the model directory of the mocks and of smg --model-path (Qwen3).
	TokenizerDir string
	// PromptBytes is the chat prompt's size. Default 4 KB.
	PromptBytes int
	// Requests is how many one-token requests each TTFT row sends, one at a time. Default 300.
	Requests int
	// StreamTokens is the answer length of the CPU rows, paced one per TokenInterval.
	// Defaults 128 and 1 ms.
	StreamTokens  int
	TokenInterval time.Duration
	// CPURequests is how many streamed answers each CPU row relays, one at a time. Default 50.
	CPURequests int
	Logf        func(string, ...any)
}

// DefaultGRPCConfig returns the suite's defaults (each field says its own).
func DefaultGRPCConfig(bin Binaries, tokenizerDir string) GRPCConfig {
	return GRPCConfig{Bin: bin, TokenizerDir: tokenizerDir, PromptBytes: 4 << 10, Requests: 300,
		StreamTokens: 128, TokenInterval: time.Millisecond, CPURequests: 50, Logf: func(string, ...any) {}}
}

// Validate reports configuration errors, each saying how to fix it.
func (c GRPCConfig) Validate() error {
	if c.TokenizerDir == "" || c.PromptBytes < 1 || c.Requests < 10 || c.StreamTokens < 2 || c.TokenInterval <= 0 || c.CPURequests < 1 || c.Logf == nil {
		return fmt.Errorf("grpc suite: tokenizer dir %q, prompt %d B, %d requests, %d tokens every %v, %d CPU requests: give a tokenizer directory, at least 10 requests and 2 tokens (start from bench.DefaultGRPCConfig())",
			c.TokenizerDir, c.PromptBytes, c.Requests, c.StreamTokens, c.TokenInterval, c.CPURequests)
	}
	return nil
}

// GRPCRow is one way to the engine: "direct-grpc" (grpcworker.Client with token ids),
// "direct-http" (the HTTP mock), "smg-grpc" and "smg-http" (through the gateway).
type GRPCRow struct {
	Key                  string
	TTFTP50MS, TTFTP99MS float64
	// CPUMSPerRequest is the gateway's CPU per streamed answer of StreamTokens tokens (smg rows).
	CPUMSPerRequest float64 `json:",omitempty"`
}

// GRPCResult is the suite's rows.
type GRPCResult struct {
	PromptBytes, StreamTokens int
	Rows                      []GRPCRow
}

func (r *GRPCResult) row(key string) *GRPCRow {
	for i := range r.Rows {
		if r.Rows[i].Key == key {
			return &r.Rows[i]
		}
	}
	return nil
}

// GRPC runs the suite: a one-worker fleet per protocol (instant mocks), a gateway in front of
// each, TTFT of one-token chat answers per row, then the gateways' CPU per paced answer.
func GRPC(cfg GRPCConfig) (*GRPCResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", cfg.PromptBytes/45+1)[:cfg.PromptBytes]
	res := &GRPCResult{PromptBytes: cfg.PromptBytes, StreamTokens: cfg.StreamTokens}
	for _, pace := range []bool{false, true} {
		interval := "0"
		if pace {
			interval = strconv.FormatFloat(float64(cfg.TokenInterval)/float64(time.Millisecond), 'f', -1, 64)
		}
		f, err := startGRPCSuiteFleet(cfg, interval)
		if err != nil {
			return nil, err
		}
		if !pace {
			err = f.ttftRows(cfg, prompt, res)
		} else {
			err = f.cpuRows(cfg, prompt, res)
		}
		f.stop()
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// grpcSuiteFleet is the suite's processes: one mock per protocol and a gateway before each.
type grpcSuiteFleet struct {
	procs              []*proc
	httpMock, grpcMock string // http://host:port, grpc://host:port
	smgHTTP, smgGRPC   string
	smgHTTPProc        *proc
	smgGRPCProc        *proc
}

func (f *grpcSuiteFleet) stop() {
	for _, p := range slices.Backward(f.procs) {
		p.stop()
	}
}

func startGRPCSuiteFleet(cfg GRPCConfig, interval string) (f *grpcSuiteFleet, err error) {
	f = &grpcSuiteFleet{}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	common := []string{"--host", "127.0.0.1", "--port", "0", "--count", "1", "--model", "qwen3", "--token-interval-ms", interval}
	mocks := []struct {
		extra []string
		dst   *string
		grpc  bool
	}{
		{nil, &f.httpMock, false},
		{[]string{"--protocol", "grpc", "--dialect", "sglang", "--tokenizer-path", cfg.TokenizerDir}, &f.grpcMock, true},
	}
	for _, m := range mocks {
		re := listenLine
		if m.grpc {
			re = grpcListenLine
		}
		p, urls, err := startListening(pinned(-1), cfg.Bin.MockWorker, re, 1, 10*time.Second, append(slices.Clone(common), m.extra...)...)
		if err != nil {
			return f, err
		}
		f.procs = append(f.procs, p)
		*m.dst = urls[0]
	}
	for _, g := range []struct {
		worker string
		extra  []string
		base   *string
		p      **proc
	}{
		{f.httpMock, nil, &f.smgHTTP, &f.smgHTTPProc},
		{f.grpcMock, []string{"--model-path", cfg.TokenizerDir}, &f.smgGRPC, &f.smgGRPCProc},
	} {
		p, base, err := launchSMG(-1, cfg.Bin.SMG, "round_robin", []string{"--worker-urls", g.worker}, g.extra...)
		if err != nil {
			return f, err
		}
		f.procs = append(f.procs, p)
		if err := waitReadiness(base, 10*time.Second); err != nil {
			return f, err
		}
		*g.base, *g.p = base, p
	}
	return f, nil
}

func chatBody(prompt string, maxTokens int) []byte {
	return fmt.Appendf(nil, `{"model":"qwen3","messages":[{"role":"user","content":%s}],"stream":true,"max_tokens":%d,"ignore_eos":true}`,
		strconv.Quote(prompt), maxTokens)
}

// ttftRows measures time to the first SSE event of one-token answers, one request at a
// time, for each row; direct-grpc sends the token ids the gateway would (the Qwen3 chat
// template rendered and encoded here).
func (f *grpcSuiteFleet) ttftRows(cfg GRPCConfig, prompt string, res *GRPCResult) error {
	body := chatBody(prompt, 1)
	ids, err := promptIDs(cfg.TokenizerDir, body)
	if err != nil {
		return err
	}
	c, err := grpcworker.Dial(context.Background(), strings.TrimPrefix(f.grpcMock, "grpc://"), grpcworker.SGLang, grpcworker.DefaultConfig())
	if err != nil {
		return err
	}
	defer c.Close()
	n := 0
	direct := func() (time.Duration, error) {
		n++
		t0 := time.Now()
		s, err := c.Generate(context.Background(), &grpcworker.GenerateRequest{RequestID: "bench-" + strconv.Itoa(n), InputIDs: ids, Stream: true,
			Sampling: grpcworker.Sampling{MaxNewTokens: grpcworker.Some[uint32](1), IgnoreEOS: true}})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		if _, err := s.Recv(); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	for _, row := range []struct {
		key string
		do  func() (time.Duration, error)
	}{
		{"direct-grpc", direct},
		{"direct-http", func() (time.Duration, error) { return firstEvent(f.httpMock+"/v1/chat/completions", body) }},
		{"smg-grpc", func() (time.Duration, error) { return firstEvent(f.smgGRPC+"/v1/chat/completions", body) }},
		{"smg-http", func() (time.Duration, error) { return firstEvent(f.smgHTTP+"/v1/chat/completions", body) }},
	} {
		lat := make([]float64, 0, cfg.Requests)
		for i := range cfg.Requests + cfg.Requests/10 { // the first tenth warms up
			d, err := row.do()
			if err != nil {
				return fmt.Errorf("grpc suite %s: %w", row.key, err)
			}
			if i >= cfg.Requests/10 {
				lat = append(lat, float64(d)/float64(time.Millisecond))
			}
		}
		slices.Sort(lat)
		r := GRPCRow{Key: row.key, TTFTP50MS: lat[len(lat)/2], TTFTP99MS: lat[len(lat)*99/100]}
		cfg.Logf("smgbench: grpc %-12s TTFT p50 %.3f p99 %.3f ms (%d requests)", r.Key, r.TTFTP50MS, r.TTFTP99MS, len(lat))
		res.Rows = append(res.Rows, r)
	}
	return nil
}

// cpuRows measures each gateway's CPU per paced streamed answer.
func (f *grpcSuiteFleet) cpuRows(cfg GRPCConfig, prompt string, res *GRPCResult) error {
	body := chatBody(prompt, cfg.StreamTokens)
	for _, g := range []struct {
		key, base string
		p         *proc
	}{{"smg-grpc", f.smgGRPC, f.smgGRPCProc}, {"smg-http", f.smgHTTP, f.smgHTTPProc}} {
		for range 3 { // warm-up
			if _, err := relayAll(g.base+"/v1/chat/completions", body); err != nil {
				return err
			}
		}
		before, err := g.p.cpuTime()
		if err != nil {
			return err
		}
		for range cfg.CPURequests {
			events, err := relayAll(g.base+"/v1/chat/completions", body)
			if err != nil {
				return err
			}
			if events < cfg.StreamTokens {
				return fmt.Errorf("grpc suite %s: %d events, want at least %d", g.key, events, cfg.StreamTokens)
			}
		}
		after, err := g.p.cpuTime()
		if err != nil {
			return err
		}
		r := res.row(g.key)
		if r == nil {
			res.Rows = append(res.Rows, GRPCRow{Key: g.key})
			r = &res.Rows[len(res.Rows)-1]
		}
		r.CPUMSPerRequest = (after - before) * 1000 / float64(cfg.CPURequests)
		cfg.Logf("smgbench: grpc %-12s CPU %.2f ms per %d-token answer", g.key, r.CPUMSPerRequest, cfg.StreamTokens)
	}
	return nil
}

// promptIDs renders the chat body with the model's template and encodes it, as the gateway
// does.
func promptIDs(dir string, body []byte) ([]uint32, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	config, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	tmpl, err := chat.FromTokenizerConfig(config)
	if err != nil {
		return nil, err
	}
	req, err := chat.DecodeRequest(body)
	if err != nil {
		return nil, err
	}
	text, err := tmpl.Render(nil, req)
	if err != nil {
		return nil, err
	}
	return tok.Encode(nil, string(text), false), nil
}

var sseClient = &http.Client{Timeout: time.Minute}

// postSSE posts a streamed chat body; an answer other than 200 is an error.
func postSSE(url string, body []byte) (*http.Response, error) {
	r, err := sseClient.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if r.StatusCode != 200 {
		r.Body.Close()
		return nil, fmt.Errorf("%s: status %d", url, r.StatusCode)
	}
	return r, nil
}

// firstEvent posts body and returns the time until the answer's first SSE data line.
func firstEvent(url string, body []byte) (time.Duration, error) {
	t0 := time.Now()
	r, err := postSSE(url, body)
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	br := bufio.NewReader(r.Body)
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data:")) {
			d := time.Since(t0)
			_, _ = br.WriteTo(io.Discard) // the rest, so the connection is reused
			return d, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: no SSE event: %w", url, err)
		}
	}
}

// relayAll posts body and reads the whole SSE answer, returning its data events.
func relayAll(url string, body []byte) (int, error) {
	r, err := postSSE(url, body)
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	n := 0
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if bytes.HasPrefix(sc.Bytes(), []byte("data:")) {
			n++
		}
	}
	return n, sc.Err()
}

// metrics adds grpc.added_ttft_{p50,p99}_ms (the gateway's time to first token over the
// engine's own, reported), grpc.ttft_p50_ratio.smg-grpc/smg-http and
// grpc.cpu_ratio.smg-grpc/smg-http (the token-aware path against the text path through the
// same binary, in one run: the gated ones) and grpc.cpu_ms_per_request.<row>.
func (r *GRPCResult) metrics(m map[string]float64) {
	direct, sg, sh := r.row("direct-grpc"), r.row("smg-grpc"), r.row("smg-http")
	if direct != nil && sg != nil {
		m["grpc.added_ttft_p50_ms"] = sg.TTFTP50MS - direct.TTFTP50MS
		m["grpc.added_ttft_p99_ms"] = sg.TTFTP99MS - direct.TTFTP99MS
	}
	if sg != nil && sh != nil {
		if sh.TTFTP50MS > 0 {
			m["grpc.ttft_p50_ratio.smg-grpc/smg-http"] = sg.TTFTP50MS / sh.TTFTP50MS
		}
		if sh.CPUMSPerRequest > 0 {
			m["grpc.cpu_ratio.smg-grpc/smg-http"] = sg.CPUMSPerRequest / sh.CPUMSPerRequest
		}
	}
	for _, x := range r.Rows {
		if x.CPUMSPerRequest > 0 {
			m["grpc.cpu_ms_per_request."+x.Key] = x.CPUMSPerRequest
		}
	}
}

// Table is the suite's section of the make bench report.
func (r *GRPCResult) Table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "## gRPC path (%d B chat prompt; TTFT of one-token answers; gateway CPU per %d-token streamed answer)\n\n"+
		"| row | TTFT p50 ms | TTFT p99 ms | gateway CPU ms/answer |\n|---|---|---|---|\n", r.PromptBytes, r.StreamTokens)
	for _, x := range r.Rows {
		cpu := ""
		if x.CPUMSPerRequest > 0 {
			cpu = strconv.FormatFloat(x.CPUMSPerRequest, 'f', 2, 64)
		}
		fmt.Fprintf(&sb, "| %s | %.3f | %.3f | %s |\n", x.Key, x.TTFTP50MS, x.TTFTP99MS, cpu)
	}
	m := map[string]float64{}
	r.metrics(m)
	fmt.Fprintf(&sb, "\nAdded by the gateway over the engine: TTFT p50 %.3f ms, p99 %.3f ms.\n\n", m["grpc.added_ttft_p50_ms"], m["grpc.added_ttft_p99_ms"])
	return sb.String()
}
