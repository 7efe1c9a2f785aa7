package grpcworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/worker"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"dial timeout", func(c *Config) { c.DialTimeout = 0 }, "dial timeout"},
		{"no conns", func(c *Config) { c.Conns = 0 }, "connections per worker is 0: give 1-64"},
		{"too many conns", func(c *Config) { c.Conns = MaxConns + 1 }, "give 1-64"},
		{"streams", func(c *Config) { c.MaxStreams = 0 }, "max streams"},
		{"keepalive", func(c *Config) { c.KeepaliveTime = -1 }, "keepalive time"},
		{"keepalive timeout", func(c *Config) { c.KeepaliveTimeout = 0 }, "keepalive timeout"},
		{"recv size", func(c *Config) { c.MaxRecvMsgSize = 10 }, "max message sizes"},
		{"send size", func(c *Config) { c.MaxSendMsgSize = 0 }, "max message sizes"},
		{"backoff", func(c *Config) { c.ReconnectMaxBackoff = 0 }, "reconnect max backoff"},
		{"abort timeout", func(c *Config) { c.AbortTimeout = 0 }, "abort timeout"},
		{"stream window", func(c *Config) { c.StreamWindow = 1024 }, "flow-control windows"},
		{"connection window", func(c *Config) { c.ConnWindow = 0 }, "flow-control windows"},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
		if _, derr := Dial(context.Background(), "127.0.0.1:1", SGLang, cfg); derr == nil || derr.Error() != err.Error() {
			t.Errorf("%s: Dial returned %v, want the Validate error", tc.name, derr)
		}
	}
}

func TestParseDialect(t *testing.T) {
	for s, want := range map[string]Dialect{"sglang": SGLang, "SGLang": SGLang, "vllm": VLLM, "VLLM": VLLM} {
		if d, err := ParseDialect(s); err != nil || d != want {
			t.Errorf("ParseDialect(%q) = %v, %v; want %v", s, d, err, want)
		}
		if want.String() != strings.ToLower(s) {
			t.Errorf("%v.String() = %q", want, want.String())
		}
	}
	if _, err := ParseDialect("trtllm"); err == nil || !strings.Contains(err.Error(), "use sglang or vllm") {
		t.Errorf("ParseDialect(trtllm) = %v", err)
	}
}

func TestDialRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = Dial(context.Background(), addr, VLLM, DefaultConfig())
	if !errors.Is(err, ErrConnect) || Classify(err) != Unavailable || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Dial to a closed port: %v (class %v), want ErrConnect naming the refusal, class unavailable", err, Classify(err))
	}
}

// A TCP server that is not gRPC fails the HTTP/2 handshake: Dial fails instead of hanging.
func TestDialNotGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	_, err = Dial(context.Background(), l.Addr().String(), SGLang, DefaultConfig())
	if !errors.Is(err, ErrConnect) || Classify(err) != Unavailable {
		t.Fatalf("Dial to an HTTP/1 server: %v, want ErrConnect", err)
	}
	l.Close()
	<-done
}

func TestDialBadArgs(t *testing.T) {
	if _, err := Dial(context.Background(), "grpc://127.0.0.1:1", SGLang, DefaultConfig()); err == nil || !strings.Contains(err.Error(), "give host:port") {
		t.Errorf("a URL as target: %v", err)
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1", Dialect(9), DefaultConfig()); err == nil || !strings.Contains(err.Error(), "unknown dialect") {
		t.Errorf("unknown dialect: %v", err)
	}
}

type collected struct {
	tokens map[uint32][]uint32
	finals map[uint32]Chunk
	chunks int
}

// drain reads s to its end, copying what the chunks lend.
func drain(t *testing.T, s Stream) (collected, error) {
	t.Helper()
	got := collected{tokens: map[uint32][]uint32{}, finals: map[uint32]Chunk{}}
	for {
		c, err := s.Recv()
		if err != nil {
			return got, err
		}
		got.chunks++
		got.tokens[c.Index] = append(got.tokens[c.Index], c.TokenIDs...)
		if c.Final {
			f := *c
			f.OutputIDs = append([]uint32(nil), c.OutputIDs...)
			f.TokenIDs = nil
			got.finals[c.Index] = f
		}
	}
}

func TestGenerateStreamed(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			c := dial(t, ts, d, DefaultConfig())
			s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "r1", InputIDs: []uint32{1, 2, 3, 4}, Stream: true,
				Sampling: Sampling{N: 2}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := drain(t, s)
			if err != io.EOF {
				t.Fatalf("stream ended with %v, want io.EOF", err)
			}
			s.Close()
			if _, err := s.Recv(); err != io.EOF {
				t.Errorf("Recv after the end = %v, want io.EOF again", err)
			}
			if got.chunks != 6 {
				t.Errorf("%d chunks, want 2 samples × (2 chunks + 1 final)", got.chunks)
			}
			for i := uint32(0); i < 2; i++ {
				if want := []uint32{10 + i, 20 + i, 30 + i}; !reflect.DeepEqual(got.tokens[i], want) {
					t.Errorf("sample %d tokens %v, want %v", i, got.tokens[i], want)
				}
				f := got.finals[i]
				if f.FinishReason != "stop" || f.PromptTokens != 4 || f.CompletionTokens != 3 || f.CachedTokens != 2 ||
					!reflect.DeepEqual(f.OutputIDs, []uint32{10 + i, 20 + i, 30 + i}) {
					t.Errorf("sample %d final %+v", i, f)
				}
			}
			if f := got.finals[0]; f.MatchedStop != MatchedTokenID || f.MatchedTokenID != 30 {
				t.Errorf("sample 0 matched stop %v %d, want token 30", f.MatchedStop, f.MatchedTokenID)
			}
			if f := got.finals[1]; f.MatchedStop != MatchedString || f.MatchedStopString != "END" {
				t.Errorf("sample 1 matched stop %v %q, want \"END\"", f.MatchedStop, f.MatchedStopString)
			}
			switch d {
			case SGLang:
				if got.finals[0].ReasoningTokens != 1 {
					t.Errorf("SGLang reasoning tokens %d, want 1", got.finals[0].ReasoningTokens)
				}
			case VLLM:
				if got.finals[1].KVTransferParamsJSON != `{"remote_host":"p1"}` {
					t.Errorf("vLLM kv_transfer_params_json %q", got.finals[1].KVTransferParamsJSON)
				}
			}
			if ids := ts.eng.abortedIDs(); len(ids) != 0 {
				t.Errorf("a completed stream sent Abort for %v", ids)
			}
		})
	}
}

func TestGenerateUnstreamed(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			c := dial(t, ts, d, DefaultConfig())
			s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "r1", InputIDs: []uint32{1}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := drain(t, s)
			if err != io.EOF || got.chunks != 1 || !reflect.DeepEqual(got.finals[0].OutputIDs, []uint32{10, 20, 30}) || len(got.tokens[0]) != 0 {
				t.Fatalf("got %d chunks %+v, %v; want one final chunk with output ids [10 20 30]", got.chunks, got.finals, err)
			}
		})
	}
}

// Canceling the caller's context ends the stream and sends the engine exactly one Abort for
// the request, whatever else the caller does afterwards.
func TestCancelSendsOneAbort(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			c, err := Dial(context.Background(), ts.addr, d, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			s, err := c.Generate(ctx, &GenerateRequest{RequestID: "hang-1", InputIDs: []uint32{1}, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			if ch, err := s.Recv(); err != nil || !reflect.DeepEqual(ch.TokenIDs, []uint32{7}) {
				t.Fatalf("first chunk %+v, %v", ch, err)
			}
			<-ts.eng.started
			cancel()
			_, err = s.Recv()
			if Classify(err) != Canceled || Classify(err).HTTPStatus() != 499 {
				t.Fatalf("Recv after cancel: %v (class %v), want canceled", err, Classify(err))
			}
			s.Close()
			s.Close()
			cancel()
			if err := c.Close(); err != nil { // waits for the Abort under way
				t.Fatal(err)
			}
			if ids := ts.eng.abortedIDs(); !reflect.DeepEqual(ids, []string{"hang-1"}) {
				t.Fatalf("aborts %v, want exactly [hang-1]", ids)
			}
		})
	}
}

// Close before the end abandons the request: one Abort, and Recv reports the cancellation.
func TestCloseAbandonsWithOneAbort(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			c, err := Dial(context.Background(), ts.addr, d, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := c.Generate(ctx, &GenerateRequest{RequestID: "hang-2", InputIDs: []uint32{1}, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			<-ts.eng.started
			s.Close()
			if _, err := s.Recv(); !errors.Is(err, context.Canceled) {
				t.Errorf("Recv after Close: %v, want context.Canceled", err)
			}
			cancel() // the caller's context ending later must not abort again
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if ids := ts.eng.abortedIDs(); !reflect.DeepEqual(ids, []string{"hang-2"}) {
				t.Fatalf("aborts %v, want exactly [hang-2]", ids)
			}
		})
	}
}

// A stream whose samples all completed is not aborted when its context ends afterwards.
func TestCancelAfterCompletionSendsNoAbort(t *testing.T) {
	ts := startServer(t, SGLang)
	c, err := Dial(context.Background(), ts.addr, SGLang, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Generate(ctx, &GenerateRequest{RequestID: "r", InputIDs: []uint32{1}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ch, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ch.Final {
			break // every sample complete; io.EOF not read yet
		}
	}
	cancel()
	s.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := ts.eng.abortedIDs(); len(ids) != 0 {
		t.Fatalf("aborts %v after a completed request, want none", ids)
	}
}

func TestEngineErrors(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			c := dial(t, ts, d, DefaultConfig())
			for _, tc := range []struct {
				id    string
				class Class
				msg   string
			}{
				{"invalid-1", ClientError, "temperature must be >= 0"},
				{"busy-1", Backpressure, "queue full"},
				{"trunc-1", Internal, ""},
			} {
				s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: tc.id, InputIDs: []uint32{1}, Stream: true})
				if err != nil {
					t.Fatal(err)
				}
				_, err = drain(t, s)
				s.Close()
				if Classify(err) != tc.class || (tc.msg != "" && Message(err) != tc.msg) {
					t.Errorf("%s: %v (class %v, message %q), want class %v message %q", tc.id, err, Classify(err), Message(err), tc.class, tc.msg)
				}
				if tc.id == "trunc-1" && !errors.Is(err, ErrTruncated) {
					t.Errorf("trunc-1: %v, want ErrTruncated", err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			// The engine ended invalid-1 and busy-1 itself; trunc-1 may still be running there.
			if ids := ts.eng.abortedIDs(); len(ids) != 0 {
				t.Errorf("aborts %v: an engine that ended the call has nothing to abort", ids)
			}
		})
	}
}

func TestGenerateBadRequest(t *testing.T) {
	ts := startServer(t, VLLM)
	c := dial(t, ts, VLLM, DefaultConfig())
	for _, r := range []*GenerateRequest{
		{InputIDs: []uint32{1}},
		{RequestID: "x"},
		{RequestID: "x", InputIDs: []uint32{1}, Sampling: Sampling{Constraint: JSONObject + 1}},
		{RequestID: "x", InputIDs: []uint32{1}, Sampling: Sampling{N: MaxSamples + 1}},
	} {
		if _, err := c.Generate(context.Background(), r); !errors.Is(err, ErrBadRequest) || Classify(err) != ClientError {
			t.Errorf("Generate(%+v) = %v, want ErrBadRequest", r, err)
		}
	}
	ts.eng.mu.Lock()
	defer ts.eng.mu.Unlock()
	if len(ts.eng.vlReqs) != 0 {
		t.Errorf("an invalid request reached the engine")
	}
}

// MaxStreams bounds open streams; the next fails at once as backpressure, and a closed
// stream frees its slot.
func TestStreamLimit(t *testing.T) {
	ts := startServer(t, SGLang)
	cfg := DefaultConfig()
	cfg.MaxStreams = 2
	c := dial(t, ts, SGLang, cfg)
	var open []Stream
	for i := range 2 {
		s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: fmt.Sprintf("hang-%d", i), InputIDs: []uint32{1}, Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, s)
		<-ts.eng.started
	}
	_, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "r3", InputIDs: []uint32{1}})
	if !errors.Is(err, ErrStreamLimit) || Classify(err) != Backpressure || Classify(err).HTTPStatus() != 429 {
		t.Fatalf("third stream: %v, want ErrStreamLimit (backpressure)", err)
	}
	if err := c.HealthCheck(context.Background()); err != nil {
		t.Fatalf("a unary call while the streams are full: %v", err)
	}
	open[0].Close()
	s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "r4", InputIDs: []uint32{1}})
	if err != nil {
		t.Fatalf("after closing one stream: %v", err)
	}
	if _, err := drain(t, s); err != io.EOF {
		t.Fatalf("r4: %v", err)
	}
	s.Close()
	// A failed Generate (refused by the engine) also returns its slot.
	for range 3 {
		s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "invalid-x", InputIDs: []uint32{1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drain(t, s); Classify(err) != ClientError {
			t.Fatalf("invalid-x: %v", err)
		}
	}
	open[1].Close()
}

// The pool holds exactly Conns connections, and calls are spread over all of them.
func TestPoolConns(t *testing.T) {
	ts := startServer(t, VLLM)
	cfg := DefaultConfig()
	cfg.Conns = 3
	c := dial(t, ts, VLLM, cfg)
	if n := ts.lis.count(); n != 3 {
		t.Fatalf("%d connections after Dial, want 3", n)
	}
	for range 30 {
		if err := c.HealthCheck(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := ts.lis.count(); n != 3 {
		t.Fatalf("%d connections after 30 calls, want 3", n)
	}
	ts.eng.mu.Lock()
	defer ts.eng.mu.Unlock()
	if len(ts.eng.peers) != 3 {
		t.Fatalf("calls came over %d connections (%v), want all 3", len(ts.eng.peers), ts.eng.peers)
	}
	for p, n := range ts.eng.peers {
		if n != 10 {
			t.Errorf("connection %s carried %d of 30 calls, want 10 (round robin)", p, n)
		}
	}
}

// Close closes every connection of the pool (the server sees each end), ends open streams,
// and fails later calls with ErrClosed.
func TestCloseReleases(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			cfg := DefaultConfig()
			cfg.Conns = 2
			c, err := Dial(context.Background(), ts.addr, d, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "hang-c", InputIDs: []uint32{1}, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			<-ts.eng.started
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			for range 2 {
				<-ts.lis.gone // each connection's end reaches the server
			}
			var err2 error
			for err2 == nil {
				_, err2 = s.Recv()
			}
			if !errors.Is(err2, ErrClosed) || Classify(err2) != Unavailable {
				t.Errorf("open stream after Close: %v (class %v), want ErrClosed", err2, Classify(err2))
			}
			s.Close()
			checks := map[string]error{"HealthCheck": c.HealthCheck(context.Background()), "Abort": c.Abort(context.Background(), "x"),
				"FlushCache": c.FlushCache(context.Background(), time.Second)}
			_, checks["Generate"] = c.Generate(context.Background(), &GenerateRequest{RequestID: "x", InputIDs: []uint32{1}})
			_, checks["GetLoads"] = c.GetLoads(context.Background())
			_, checks["GetModelInfo"] = c.GetModelInfo(context.Background())
			_, checks["GetServerInfo"] = c.GetServerInfo(context.Background())
			for name, err := range checks {
				if !errors.Is(err, ErrClosed) {
					t.Errorf("%s after Close: %v, want ErrClosed", name, err)
				}
			}
		})
	}
}

func TestHealthCheck(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			c := dial(t, ts, d, DefaultConfig())
			if err := c.HealthCheck(context.Background()); err != nil {
				t.Fatalf("healthy engine: %v", err)
			}
			ts.eng.mu.Lock()
			ts.eng.unhealthy = true
			ts.eng.mu.Unlock()
			err := c.HealthCheck(context.Background())
			if !errors.Is(err, ErrUnhealthy) || Classify(err) != Unavailable {
				t.Fatalf("unhealthy engine: %v, want ErrUnhealthy", err)
			}
			if d == SGLang && !strings.Contains(err.Error(), "Server is shutting down") {
				t.Errorf("error %q does not carry the engine's message", err)
			}
		})
	}
}

func TestGetLoads(t *testing.T) {
	ts := startServer(t, SGLang)
	c := dial(t, ts, SGLang, DefaultConfig())
	l, err := c.GetLoads(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Loads{Timestamp: "2026-12-05T10:00:00Z", Version: "0.5.9", DPRankCount: 2, Ranks: []RankLoad{
		{DPRank: 0, RunningRequests: 3, WaitingRequests: 4, TotalRequests: 7, UsedTokens: 500, MaxTotalTokens: 1000, TokenUsage: 0.5,
			GenThroughput: 100, CacheHitRate: 0.25, Utilization: 0.75, MaxRunning: 64, WaitingTokens: 300},
		{DPRank: 1, RunningRequests: 1, TotalRequests: 1, UsedTokens: 100, MaxTotalTokens: 1000, TokenUsage: 0.1, GenThroughput: 50},
	}, WaitingRequests: 4, RunningRequests: 4, WaitingTokens: 300, TokenUsage: 0.3, GenThroughput: 150, KVCapacityTokens: 2000}
	if !reflect.DeepEqual(l, want) {
		t.Fatalf("loads\n got %+v\nwant %+v", l, want)
	}
	at := time.Unix(100, 0)
	r := worker.LoadReport{At: at}
	l.Report(&r)
	if r.At != at || r.WaitingRequests != 4 || r.RunningRequests != 4 || r.WaitingTokens != 300 || r.TokenUsage != 0.3 ||
		r.GenThroughput != 150 || r.KVCapacityTokens != 2000 {
		t.Errorf("report %+v", r)
	}
	r1, ok := l.Rank(1)
	if !ok || r1.GenThroughput != 50 {
		t.Fatalf("Rank(1) = %+v, %v", r1, ok)
	}
	r1.Report(&r)
	if r.WaitingRequests != 0 || r.RunningRequests != 1 || r.TokenUsage != 0.1 || r.KVCapacityTokens != 1000 || r.WaitingTokens != 0 {
		t.Errorf("rank 1 report %+v", r)
	}
	if _, ok := l.Rank(5); ok {
		t.Error("Rank(5) found")
	}

	tv := startServer(t, VLLM)
	cv := dial(t, tv, VLLM, DefaultConfig())
	lv, err := cv.GetLoads(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if lv.WaitingRequests != 5 || lv.RunningRequests != 2 || lv.WaitingTokens != -1 || lv.TokenUsage != 0.8 || lv.KVCapacityTokens != 1000 ||
		lv.GenThroughput != 30 || len(lv.Ranks) != 1 || lv.Ranks[0].WaitingTokens != -1 {
		t.Fatalf("vLLM loads %+v: want waiting tokens -1 (not reported)", lv)
	}
}

func TestGetModelInfo(t *testing.T) {
	ts := startServer(t, SGLang)
	m, err := dial(t, ts, SGLang, DefaultConfig()).GetModelInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := ModelInfo{ModelID: "Qwen/Qwen3-8B", ModelPath: "/models/qwen3", TokenizerPath: "/models/qwen3", EOSTokenIDs: []uint32{151645, 151643},
		MaxContextLength: 40960, MaxReqInputLen: 40955, VocabSize: 151936, PadTokenID: 151643, BOSTokenID: -1, IsGeneration: true,
		ModelType: "qwen3", Architectures: []string{"Qwen3ForCausalLM"}, DefaultSamplingParamsJSON: `{"temperature":0.6}`}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("SGLang model info\n got %+v\nwant %+v", m, want)
	}
	tv := startServer(t, VLLM)
	mv, err := dial(t, tv, VLLM, DefaultConfig()).GetModelInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// No served_model_name: the model path is the id.
	if mv.ModelID != "meta-llama/Llama-3.1-8B-Instruct" || !reflect.DeepEqual(mv.EOSTokenIDs, []uint32{128009}) ||
		mv.MaxContextLength != 131072 || mv.VocabSize != 128256 || mv.MaxReqInputLen != 131071 {
		t.Fatalf("vLLM model info %+v", mv)
	}
}

func TestGetServerInfo(t *testing.T) {
	ts := startServer(t, SGLang)
	s, err := dial(t, ts, SGLang, DefaultConfig()).GetServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.ActiveRequests != 5 || s.Version != "0.5.9" || s.ServerType != "grpc" || s.MaxTotalNumTokens != 2000 || s.DataParallelSize != 1 ||
		s.ServerArgs["dp_size"] != 2.0 || s.UptimeSeconds != 12.5 || s.LastReceiveTimestamp != 1.5 {
		t.Fatalf("SGLang server info %+v", s)
	}
	tv := startServer(t, VLLM)
	v, err := dial(t, tv, VLLM, DefaultConfig()).GetServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v.ActiveRequests != 2 || v.ServerType != "vllm-grpc" || v.DataParallelSize != 4 || v.KVConnector != "NixlConnector" || v.KVRole != "kv_both" || v.ServerArgs != nil {
		t.Fatalf("vLLM server info %+v", v)
	}
}

func TestFlushCache(t *testing.T) {
	ts := startServer(t, SGLang)
	c := dial(t, ts, SGLang, DefaultConfig())
	if err := c.FlushCache(context.Background(), time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
	err := c.FlushCache(context.Background(), 0) // the test engine refuses without a timeout
	if err == nil || !strings.Contains(err.Error(), "pending requests") || Classify(err) != Internal {
		t.Fatalf("refused flush: %v, want the engine's message", err)
	}
	tv := startServer(t, VLLM)
	err = dial(t, tv, VLLM, DefaultConfig()).FlushCache(context.Background(), time.Second)
	if !errors.Is(err, ErrUnsupported) || Classify(err) != Unsupported || Classify(err).HTTPStatus() != 501 ||
		!strings.Contains(err.Error(), "vLLM's gRPC service has no FlushCache") {
		t.Fatalf("vLLM flush: %v, want ErrUnsupported", err)
	}
}

func TestAbortIDs(t *testing.T) {
	for _, tc := range []struct {
		d     Dialect
		calls int // SGLang takes one id per call, vLLM all in one
	}{{SGLang, 3}, {VLLM, 1}} {
		ts := startServer(t, tc.d)
		c := dial(t, ts, tc.d, DefaultConfig())
		if err := c.Abort(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Abort(context.Background(), "a", "b", "c"); err != nil {
			t.Fatal(err)
		}
		ts.eng.mu.Lock()
		if !reflect.DeepEqual(ts.eng.aborts, []string{"a", "b", "c"}) || ts.eng.abortRPC != tc.calls {
			t.Errorf("%v: aborts %v in %d calls, want [a b c] in %d", tc.d, ts.eng.aborts, ts.eng.abortRPC, tc.calls)
		}
		ts.eng.mu.Unlock()
	}
}

// An engine that limits concurrent streams per connection still serves every stream up to
// MaxStreams when the pool has enough connections.
func TestPoolSpreadsStreams(t *testing.T) {
	ts := startServer(t, SGLang)
	cfg := DefaultConfig()
	cfg.Conns = 2
	c := dial(t, ts, SGLang, cfg)
	var open []Stream
	for i := range 4 {
		s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: fmt.Sprintf("hang-p%d", i), InputIDs: []uint32{1}, Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		<-ts.eng.started
		open = append(open, s)
	}
	ts.eng.mu.Lock()
	spread := len(ts.eng.peers)
	ts.eng.mu.Unlock()
	if spread != 2 {
		t.Errorf("4 streams over %d connections, want 2", spread)
	}
	for _, s := range open {
		s.Close()
	}
}

// An engine that went away fails calls as Unavailable (retry elsewhere), and failed streams
// return their slot.
func TestEngineGone(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.String(), func(t *testing.T) {
			ts := startServer(t, d)
			cfg := DefaultConfig()
			cfg.MaxStreams = 1
			c := dial(t, ts, d, cfg)
			ts.stop()
			for range 3 {
				s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "g", InputIDs: []uint32{1}})
				if err == nil {
					_, err = drain(t, s)
					s.Close()
				}
				if Classify(err) != Unavailable || !Classify(err).Retryable() || !Classify(err).Fault() {
					t.Fatalf("Generate on a stopped engine: %v (class %v), want unavailable", err, Classify(err))
				}
			}
			if err := c.HealthCheck(context.Background()); Classify(err) != Unavailable {
				t.Fatalf("HealthCheck on a stopped engine: %v, want unavailable", err)
			}
		})
	}
}

// A deadline that passes mid-stream is a Timeout, and the engine is told to stop.
func TestDeadlineAborts(t *testing.T) {
	ts := startServer(t, VLLM)
	c, err := Dial(context.Background(), ts.addr, VLLM, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s, err := c.Generate(ctx, &GenerateRequest{RequestID: "hang-d", InputIDs: []uint32{1}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = drain(t, s) // the first chunk, then blocks until the deadline
	if Classify(err) != Timeout || Classify(err).HTTPStatus() != 504 {
		t.Fatalf("stream past its deadline: %v (class %v), want timeout", err, Classify(err))
	}
	s.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := ts.eng.abortedIDs(); !reflect.DeepEqual(ids, []string{"hang-d"}) {
		t.Fatalf("aborts %v, want exactly [hang-d]", ids)
	}
}

// Close from another goroutine ends a Recv blocked on the engine.
func TestCloseFromAnotherGoroutine(t *testing.T) {
	ts := startServer(t, SGLang)
	c, err := Dial(context.Background(), ts.addr, SGLang, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "hang-g", InputIDs: []uint32{1}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	<-ts.eng.started
	done := make(chan error)
	go func() {
		_, err := s.Recv()
		done <- err
	}()
	s.Close()
	if err := <-done; Classify(err) != Canceled {
		t.Fatalf("blocked Recv after Close: %v, want canceled", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ids := ts.eng.abortedIDs(); !reflect.DeepEqual(ids, []string{"hang-g"}) {
		t.Fatalf("aborts %v, want exactly [hang-g]", ids)
	}
}
