package mockworker

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"github.com/smg-go/smg/internal/testutil"
)

// grpcEngine is an engine-mode gRPC fleet config running the model 50× faster than real time.
func grpcEngine(d Dialect) Config {
	return config(func(c *Config) {
		c.Protocol, c.Dialect, c.Mode, c.TimeScale = ProtocolGRPC, d, ModeEngine, 50
	})
}

// dial opens a client connection to worker i, closed at the end of the test.
func dial(t *testing.T, f *Fleet, i int) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(f.Addrs()[i], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// sglStream is what one SGLang Generate call returned.
type sglStream struct {
	chunks   []*sglangpb.GenerateStreamChunk
	complete []*sglangpb.GenerateComplete
	err      error
}

// ids is sample index's output ids: the chunks' when streamed, else the complete's.
func (s *sglStream) ids(index int) []uint32 {
	var out []uint32
	for _, c := range s.chunks {
		if int(c.Index) == index {
			out = append(out, c.TokenIds...)
		}
	}
	for _, c := range s.complete {
		if int(c.Index) == index {
			out = append(out, c.OutputIds...)
		}
	}
	return out
}

func sglGenerate(ctx context.Context, c sglangpb.SglangSchedulerClient, req *sglangpb.GenerateRequest) sglStream {
	var out sglStream
	st, err := c.Generate(ctx, req)
	if err != nil {
		out.err = err
		return out
	}
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			out.err = err
			return out
		}
		switch r := m.Response.(type) {
		case *sglangpb.GenerateResponse_Chunk:
			out.chunks = append(out.chunks, r.Chunk)
		case *sglangpb.GenerateResponse_Complete:
			out.complete = append(out.complete, r.Complete)
		}
	}
}

func sglRequest(id string, prompt []uint32, maxTokens uint32, stream bool) *sglangpb.GenerateRequest {
	sp := sglangpb.DefaultSamplingParams()
	sp.MaxNewTokens = &maxTokens
	return &sglangpb.GenerateRequest{RequestId: id, Tokenized: &sglangpb.TokenizedInput{InputIds: prompt},
		SamplingParams: sp, Stream: stream, LogprobStartLen: -1}
}

func promptIDs(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i*7 + 3)
	}
	return ids
}

func positionIDs(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = PositionTokenBase + uint32(i%10)
	}
	return ids
}

// idle waits until worker w holds no request, then checks that its load report agrees.
func idle(t *testing.T, w *Worker) {
	t.Helper()
	testutil.Eventually(t, "no active request", func() bool { return w.Active() == 0 })
	if l := w.load(); l.running != 0 || l.waiting != 0 || l.usedTokens != 0 {
		t.Errorf("load after the requests: %+v, want nothing running, waiting or held", l)
	}
}

func TestGRPCSGLangStreamsTheEngineModel(t *testing.T) {
	f := startFleet(t, grpcEngine(DialectSGLang))
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))
	prompt := promptIDs(100) // 6 full blocks of 16

	// Concurrent streams: every one gets its tokens one chunk each, position ids, "length".
	const streams = 8
	var wg sync.WaitGroup
	results := make([]sglStream, streams)
	for i := range streams {
		wg.Go(func() {
			results[i] = sglGenerate(t.Context(), c, sglRequest("r"+string(rune('a'+i)), prompt, 12, true))
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil || len(r.chunks) != 12 || len(r.complete) != 1 {
			t.Fatalf("stream %d: err %v, %d chunks, %d completes", i, r.err, len(r.chunks), len(r.complete))
		}
		end := r.complete[0]
		if !slices.Equal(r.ids(0), positionIDs(12)) || end.FinishReason != "length" || end.CompletionTokens != 12 ||
			end.PromptTokens != 100 || end.MatchedStop != nil {
			t.Errorf("stream %d: ids %v, complete %v", i, r.ids(0), end)
		}
		for j, ch := range r.chunks {
			if ch.CompletionTokens != uint32(j+1) || ch.PromptTokens != 100 {
				t.Errorf("stream %d chunk %d: %v", i, j, ch)
			}
		}
	}
	idle(t, f.Workers()[0])

	// The prefix cache keys on the token ids: the same prompt again finds its 6 blocks.
	r := sglGenerate(t.Context(), c, sglRequest("again", prompt, 2, false))
	if r.err != nil || len(r.chunks) != 0 || len(r.complete) != 1 || r.complete[0].CachedTokens != 96 ||
		!slices.Equal(r.complete[0].OutputIds, positionIDs(2)) {
		t.Fatalf("repeat, not streamed: %v %v", r.err, r.complete)
	}
	loads, err := c.GetLoads(t.Context(), &sglangpb.GetLoadsRequest{Include: []string{"all"}})
	if err != nil || len(loads.Loads) != 1 || loads.Loads[0].CacheHitRate <= 0 || loads.Loads[0].NumRunningReqs != 0 ||
		loads.Loads[0].MaxTotalNumTokens != DefaultKVTokens || loads.Loads[0].Memory.GetTokenCapacity() != DefaultKVTokens ||
		loads.Aggregate.GetTotalReqs() != 0 || loads.DpRankCount != 1 {
		t.Fatalf("loads: %v %v", err, loads)
	}

	// FlushCache drops the cached blocks: the prompt is computed again.
	fl, err := c.FlushCache(t.Context(), &commonpb.FlushCacheRequest{})
	if err != nil || !fl.Success {
		t.Fatalf("flush: %v %v", err, fl)
	}
	r = sglGenerate(t.Context(), c, sglRequest("flushed", prompt, 1, false))
	if r.err != nil || r.complete[0].CachedTokens != 0 {
		t.Fatalf("after the flush: %v %v", r.err, r.complete)
	}
}

func TestGRPCStopsAndSamples(t *testing.T) {
	f := startFleet(t, grpcEngine(DialectSGLang))
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))

	req := sglRequest("stop-id", promptIDs(5), 50, true)
	req.SamplingParams.StopTokenIds = []uint32{PositionTokenBase + 3}
	r := sglGenerate(t.Context(), c, req)
	if r.err != nil || !slices.Equal(r.ids(0), positionIDs(4)) || r.complete[0].FinishReason != "stop" ||
		r.complete[0].GetMatchedTokenId() != PositionTokenBase+3 {
		t.Fatalf("stop id: %v %v %v", r.err, r.ids(0), r.complete)
	}

	req = sglRequest("stop-str", promptIDs(5), 50, false)
	req.SamplingParams.Stop = []string{"mat and"}
	r = sglGenerate(t.Context(), c, req)
	if r.err != nil || !slices.Equal(r.ids(0), positionIDs(8)) || r.complete[0].GetMatchedStopStr() != "mat and" {
		t.Fatalf("stop string: %v %v %v", r.err, r.ids(0), r.complete)
	}

	req = sglRequest("samples", promptIDs(40), 5, true)
	req.SamplingParams.N = 3
	r = sglGenerate(t.Context(), c, req)
	if r.err != nil || len(r.complete) != 3 || len(r.chunks) != 15 {
		t.Fatalf("n=3: %v, %d completes, %d chunks", r.err, len(r.complete), len(r.chunks))
	}
	for i := range 3 {
		if !slices.Equal(r.ids(i), positionIDs(5)) {
			t.Errorf("sample %d: %v", i, r.ids(i))
		}
	}
	idle(t, f.Workers()[0])
}

func TestGRPCAbortFreesTheSlot(t *testing.T) {
	cfg := grpcEngine(DialectSGLang)
	cfg.TimeScale = 1 // 8 ms a token: the stream is still running when Abort comes
	f := startFleet(t, cfg)
	w := f.Workers()[0]
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))
	st, err := c.Generate(t.Context(), sglRequest("long", promptIDs(64), 100000, true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	loads, err := c.GetLoads(t.Context(), &sglangpb.GetLoadsRequest{})
	if err != nil || loads.Loads[0].NumRunningReqs != 1 || loads.Loads[0].NumUsedTokens == 0 {
		t.Fatalf("running: %v %v", err, loads)
	}
	if a, err := c.Abort(t.Context(), &sglangpb.AbortRequest{RequestId: "nobody"}); err != nil || a.Success {
		t.Fatalf("abort of an unknown id: %v %v", err, a)
	}
	if a, err := c.Abort(t.Context(), &sglangpb.AbortRequest{RequestId: "long"}); err != nil || !a.Success {
		t.Fatalf("abort: %v %v", err, a)
	}
	var end *sglangpb.GenerateComplete
	for end == nil {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream after the abort: %v", err)
		}
		end = m.GetComplete()
	}
	if end.FinishReason != "abort" || end.CompletionTokens == 0 {
		t.Fatalf("complete %v", end)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after the complete: %v", err)
	}
	idle(t, w)
	loads, err = c.GetLoads(t.Context(), &sglangpb.GetLoadsRequest{})
	if err != nil || loads.Loads[0].NumRunningReqs != 0 || loads.Loads[0].NumUsedTokens != 0 {
		t.Fatalf("after the abort: %v %v", err, loads)
	}
}

func TestGRPCFaults(t *testing.T) {
	cfg := grpcEngine(DialectSGLang)
	cfg.TimeScale = 5
	f := startFleet(t, cfg)
	w := f.Workers()[0]
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))
	with := func(fault string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), faultHeader, fault)
	}

	r := sglGenerate(with("status=503"), c, sglRequest("u", promptIDs(8), 4, true))
	if status.Code(r.err) != codes.Unavailable || len(r.chunks) != 0 {
		t.Errorf("status=503: %v, %d chunks", r.err, len(r.chunks))
	}
	r = sglGenerate(with("status=429"), c, sglRequest("u", promptIDs(8), 4, true))
	if status.Code(r.err) != codes.ResourceExhausted {
		t.Errorf("status=429: %v", r.err)
	}
	r = sglGenerate(with("abort-after=3"), c, sglRequest("cut", promptIDs(8), 10, true))
	if status.Code(r.err) != codes.Internal || len(r.chunks) != 3 || len(r.complete) != 0 {
		t.Errorf("abort-after=3: %v, %d chunks, %d completes", r.err, len(r.chunks), len(r.complete))
	}
	r = sglGenerate(with("abort-after=10"), c, sglRequest("whole", promptIDs(8), 10, true))
	if r.err != nil || len(r.chunks) != 10 || len(r.complete) != 1 {
		t.Errorf("abort-after past the end: %v, %d chunks", r.err, len(r.chunks))
	}
	r = sglGenerate(with("bogus"), c, sglRequest("u", promptIDs(8), 4, true))
	if status.Code(r.err) != codes.InvalidArgument || !strings.Contains(r.err.Error(), "unknown item") {
		t.Errorf("unknown fault: %v", r.err)
	}
	idle(t, w)

	// A hang sends nothing until the client gives up.
	ctx, cancel := context.WithCancel(with("hang"))
	done := make(chan sglStream)
	go func() { done <- sglGenerate(ctx, c, sglRequest("h", promptIDs(8), 4, true)) }()
	testutil.Eventually(t, "the hang held", func() bool { return w.Active() == 1 })
	cancel()
	if r := <-done; status.Code(r.err) != codes.Canceled || len(r.chunks) != 0 {
		t.Errorf("hang: %v, %d chunks", r.err, len(r.chunks))
	}
	idle(t, w)

	// Runtime configuration applies to gRPC as to HTTP.
	if err := w.Configure(AdminConfig{Status: 503, Unhealthy: true}); err != nil {
		t.Fatal(err)
	}
	r = sglGenerate(t.Context(), c, sglRequest("u", promptIDs(8), 4, true))
	h, err := c.HealthCheck(t.Context(), &sglangpb.HealthCheckRequest{})
	if status.Code(r.err) != codes.Unavailable || err != nil || h.Healthy {
		t.Errorf("admin status 503, unhealthy: %v, health %v %v", r.err, h, err)
	}
	if err := w.Configure(AdminConfig{}); err != nil {
		t.Fatal(err)
	}
	h, err = c.HealthCheck(t.Context(), &sglangpb.HealthCheckRequest{})
	if err != nil || !h.Healthy {
		t.Errorf("healthy again: %v %v", h, err)
	}
	idle(t, w)
}

func TestGRPCInfo(t *testing.T) {
	f := startFleet(t, grpcEngine(DialectSGLang))
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))
	mi, err := c.GetModelInfo(t.Context(), &sglangpb.GetModelInfoRequest{})
	if err != nil || mi.ModelPath != DefaultModel || mi.MaxContextLength != DefaultKVTokens || mi.VocabSize != PositionTokenBase+10 ||
		!mi.IsGeneration || len(mi.EosTokenIds) != 0 {
		t.Errorf("model info: %v %v", err, mi)
	}
	si, err := c.GetServerInfo(t.Context(), &sglangpb.GetServerInfoRequest{})
	if err != nil || si.ServerType != "grpc" || si.MaxTotalNumTokens != DefaultKVTokens ||
		si.ServerArgs.GetFields()["page_size"].GetNumberValue() != DefaultBlockSize {
		t.Errorf("server info: %v %v", err, si)
	}
	tk, err := c.GetTokenizer(t.Context(), &commonpb.GetTokenizerRequest{})
	if err == nil {
		_, err = tk.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("tokenizer without --tokenizer-path: %v", err)
	}
	r := sglGenerate(t.Context(), c, &sglangpb.GenerateRequest{RequestId: "no-input"})
	if status.Code(r.err) != codes.InvalidArgument {
		t.Errorf("no tokenized input: %v", r.err)
	}
	if !strings.HasPrefix(f.URLs()[0], "grpc://") {
		t.Errorf("URL %s", f.URLs()[0])
	}
}

func TestGRPCVLLM(t *testing.T) {
	f := startFleet(t, grpcEngine(DialectVLLM))
	w := f.Workers()[0]
	c := vllmpb.NewVllmEngineClient(dial(t, f, 0))
	gen := func(ctx context.Context, id string, maxTokens uint32, stream bool) (ids []uint32, end *vllmpb.GenerateComplete, chunks int, err error) {
		sp := vllmpb.DefaultSamplingParams()
		sp.MaxTokens = &maxTokens
		st, err := c.Generate(ctx, &vllmpb.GenerateRequest{RequestId: id, SamplingParams: sp, Stream: stream,
			Input: &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: promptIDs(40)}}})
		if err != nil {
			return nil, nil, 0, err
		}
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return ids, end, chunks, nil
			}
			if err != nil {
				return ids, end, chunks, err
			}
			if ch := m.GetChunk(); ch != nil {
				ids = append(ids, ch.TokenIds...)
				chunks++
			}
			if e := m.GetComplete(); e != nil {
				end = e
				ids = append(ids, e.OutputIds...)
			}
		}
	}
	ids, end, chunks, err := gen(t.Context(), "v1", 7, true)
	if err != nil || chunks != 7 || !slices.Equal(ids, positionIDs(7)) || end.FinishReason != "length" || end.PromptTokens != 40 {
		t.Fatalf("stream: %v %d %v %v", err, chunks, ids, end)
	}
	ids, end, chunks, err = gen(t.Context(), "v2", 3, false)
	if err != nil || chunks != 0 || !slices.Equal(ids, positionIDs(3)) || end.CachedTokens != 32 {
		t.Fatalf("not streamed: %v %d %v %v", err, chunks, ids, end)
	}

	// Abort by id, as vLLM takes a list.
	type result struct {
		end *vllmpb.GenerateComplete
		err error
	}
	res := make(chan result)
	go func() {
		_, end, _, err := gen(t.Context(), "long", 100000, true)
		res <- result{end, err}
	}()
	testutil.Eventually(t, "the long request runs", func() bool { return w.load().running == 1 })
	if _, err := c.Abort(t.Context(), &vllmpb.AbortRequest{RequestIds: []string{"long", "other"}}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.end.GetFinishReason() != "abort" {
		t.Fatalf("aborted: %v %v", r.err, r.end)
	}
	idle(t, w)
	loads, err := c.GetLoads(t.Context(), &vllmpb.GetLoadsRequest{})
	if err != nil || len(loads.Loads) != 1 || loads.Loads[0].NumRunningReqs != 0 || loads.Loads[0].NumUsedTokens != 0 ||
		loads.Loads[0].MaxRunningRequests != DefaultMaxRunning {
		t.Fatalf("loads: %v %v", err, loads)
	}
	mi, err := c.GetModelInfo(t.Context(), &vllmpb.GetModelInfoRequest{})
	si, err2 := c.GetServerInfo(t.Context(), &vllmpb.GetServerInfoRequest{})
	h, err3 := c.HealthCheck(t.Context(), &vllmpb.HealthCheckRequest{})
	if err != nil || err2 != nil || err3 != nil || mi.MaxContextLength != DefaultKVTokens || si.ServerType != "vllm-grpc" || !h.Healthy {
		t.Fatalf("info: %v %v %v / %v %v %v", err, err2, err3, mi, si, h)
	}
}

func TestGRPCInstantMode(t *testing.T) {
	f := startFleet(t, config(func(c *Config) { c.Protocol, c.TokenInterval = ProtocolGRPC, time.Millisecond }))
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))
	r := sglGenerate(t.Context(), c, sglRequest("i", promptIDs(3), 5, true))
	if r.err != nil || len(r.chunks) != 5 || !slices.Equal(r.ids(0), positionIDs(5)) || r.complete[0].CachedTokens != 0 {
		t.Fatalf("paced instant stream: %v %v", r.err, r.ids(0))
	}
	// No maximum: Config.OutputTokens.
	req := sglRequest("d", promptIDs(3), 1, false)
	req.SamplingParams.MaxNewTokens = nil
	r = sglGenerate(t.Context(), c, req)
	if r.err != nil || len(r.complete[0].OutputIds) != DefaultOutputTokens {
		t.Fatalf("default maximum: %v %v", r.err, r.complete)
	}
	idle(t, f.Workers()[0])
}

func TestGRPCConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		set  func(c *Config)
		want string
	}{
		{func(c *Config) { c.Protocol = "h3" }, "protocol"},
		{func(c *Config) { c.Protocol, c.Role = ProtocolGRPC, RoleEncode }, "no encode leg"},
		{func(c *Config) { c.TokenizerPath = t.TempDir() }, "cannot load the tokenizer"}, // HTTP engines tokenize prompts too
		{func(c *Config) { c.Protocol, c.TokenizerPath = ProtocolGRPC, t.TempDir() }, "tokenizer"},
	} {
		_, err := Start(config(tc.set))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
}

// TestGRPCCloseLeavesNoGoroutines closes gRPC fleets under a hang, a slow first token and a
// running stream (n=2 samples) and checks that every call ended and every goroutine returned.
func TestGRPCCloseLeavesNoGoroutines(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		t.Run(string(mode), func(t *testing.T) {
			f, err := Start(config(func(c *Config) {
				c.Protocol, c.Mode, c.TokenInterval, c.DecodeBase = ProtocolGRPC, mode, time.Hour, time.Hour
			}))
			if err != nil {
				t.Fatal(err)
			}
			cc, err := grpc.NewClient(f.Addrs()[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			c := sglangpb.NewSglangSchedulerClient(cc)
			errs := make(chan error, 3)
			for _, fault := range []string{"hang", "slow-ttft=3600000", ""} {
				req := sglRequest("c", promptIDs(4), 4, true)
				req.SamplingParams.N = 2
				go func() {
					errs <- sglGenerate(metadata.AppendToOutgoingContext(t.Context(), faultHeader, fault), c, req).err
				}()
			}
			// A connection that never says which protocol it speaks.
			silent, err := net.Dial("tcp", f.Addrs()[0])
			if err != nil {
				t.Fatal(err)
			}
			defer silent.Close()
			testutil.Eventually(t, "three calls in progress", func() bool { return f.Workers()[0].Active() == 3 })
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := <-errs; status.Code(err) != codes.Unavailable {
					t.Errorf("a call cut by Close: %v, want UNAVAILABLE", err)
				}
			}
			if got := f.Workers()[0].Active(); got != 0 {
				t.Errorf("%d calls still active after Close", got)
			}
			for deadline := time.Now().Add(10 * time.Second); len(ownGoroutines()) > 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("goroutines left after Close:\n%s", strings.Join(ownGoroutines(), "\n\n"))
				}
			}
		})
	}
}

// TestGRPCWorkerKeepsTheHTTPAdminRoutes drives a gRPC worker's faults and reads its load over
// HTTP/1.1 on the same port, as a test does with an HTTP fleet.
func TestGRPCWorkerKeepsTheHTTPAdminRoutes(t *testing.T) {
	f := startFleet(t, grpcEngine(DialectSGLang))
	base := "http://" + f.Addrs()[0]
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))

	resp, body := do(t, "POST", base+"/admin/config", `{"status":503,"healthy":false}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"status":503`) {
		t.Fatalf("admin: %d %s", resp.StatusCode, body)
	}
	r := sglGenerate(t.Context(), c, sglRequest("a", promptIDs(8), 4, true))
	h, err := c.HealthCheck(t.Context(), &sglangpb.HealthCheckRequest{})
	if status.Code(r.err) != codes.Unavailable || err != nil || h.Healthy {
		t.Fatalf("after the admin POST: %v, health %v %v", r.err, h, err)
	}
	if resp, _ := do(t, "GET", base+"/health", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health: %d", resp.StatusCode)
	}
	do(t, "POST", base+"/admin/config", `{"status":0,"healthy":true}`)
	if r := sglGenerate(t.Context(), c, sglRequest("b", promptIDs(8), 4, true)); r.err != nil || len(r.chunks) != 4 {
		t.Fatalf("cleared: %v", r.err)
	}
	resp, body = do(t, "GET", base+"/v1/loads", "")
	if resp.StatusCode != 200 || path(t, decode(t, body), "loads", 0, "num_running_reqs") != 0.0 {
		t.Errorf("/v1/loads: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", base+"/v1/chat/completions", `{"messages":[]}`); resp.StatusCode != 404 || !strings.Contains(body, "gRPC") {
		t.Errorf("generation over HTTP: %d %s", resp.StatusCode, body)
	}
	idle(t, f.Workers()[0])
}
