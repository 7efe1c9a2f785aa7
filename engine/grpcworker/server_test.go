package grpcworker

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// engine is a minimal engine behind both services, enough to exercise the client. What a
// Generate call does depends on its request id's prefix:
//
//	hang-   one chunk (token 7) per sample, then wait until the call is canceled
//	invalid- INVALID_ARGUMENT "temperature must be >= 0"
//	busy-   RESOURCE_EXHAUSTED
//	trunc-  one chunk, then end the call without a GenerateComplete
//	bench-  max_new_tokens chunks of one token each, then the completes
//	other   per sample i: chunks [10+i], [20+i, 30+i] when streamed, then a complete with
//	        output_ids [10+i, 20+i, 30+i]; sample 0 stopped by token 30, sample 1 by "END"
type engine struct {
	mu        sync.Mutex
	aborts    []string // every id an Abort named, in order
	abortRPC  int      // Abort calls
	sgReqs    []*sglangpb.GenerateRequest
	vlReqs    []*vllmpb.GenerateRequest
	peers     map[string]int // remote address → calls
	flushes   int
	unhealthy bool
	started   chan string // a hang- request has sent its chunks
}

func (e *engine) sawPeer(ctx context.Context) {
	if p, ok := peer.FromContext(ctx); ok {
		e.mu.Lock()
		e.peers[p.Addr.String()]++
		e.mu.Unlock()
	}
}

func (e *engine) abortedIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.aborts...)
}

// sample is one sample's scripted output.
type sample struct {
	chunks   [][]uint32
	output   []uint32
	finish   string
	tokenID  uint32
	stopStr  string
	prompt   uint32
	complete uint32
	cached   uint32
}

func script(id string, n, maxNew uint32, prompt int) ([]sample, error) {
	switch {
	case strings.HasPrefix(id, "invalid-"):
		return nil, status.Error(codes.InvalidArgument, "temperature must be >= 0")
	case strings.HasPrefix(id, "busy-"):
		return nil, status.Error(codes.ResourceExhausted, "queue full")
	}
	out := make([]sample, max(n, 1))
	for i := range out {
		u := uint32(i)
		switch {
		case strings.HasPrefix(id, "hang-"), strings.HasPrefix(id, "trunc-"):
			out[i] = sample{chunks: [][]uint32{{7}}}
		case strings.HasPrefix(id, "bench-"):
			for range maxNew {
				out[i].chunks = append(out[i].chunks, []uint32{42})
			}
			out[i].finish = "length"
		default:
			out[i] = sample{chunks: [][]uint32{{10 + u}, {20 + u, 30 + u}}, output: []uint32{10 + u, 20 + u, 30 + u},
				finish: "stop", prompt: uint32(prompt), complete: 3, cached: 2}
			if i == 0 {
				out[i].tokenID = 30
			} else {
				out[i].stopStr = "END"
			}
		}
	}
	return out, nil
}

// sglangEngine serves SGLang's scheduler service.
type sglangEngine struct {
	sglangpb.UnimplementedSglangSchedulerServer
	*engine
}

func (s sglangEngine) Generate(req *sglangpb.GenerateRequest, st grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	ctx := st.Context()
	s.sawPeer(ctx)
	s.mu.Lock()
	s.sgReqs = append(s.sgReqs, proto.Clone(req).(*sglangpb.GenerateRequest))
	s.mu.Unlock()
	sp := req.GetSamplingParams()
	samples, err := script(req.GetRequestId(), sp.GetN(), sp.GetMaxNewTokens(), len(req.GetTokenized().GetInputIds()))
	if err != nil {
		return err
	}
	for i, smp := range samples {
		if !req.GetStream() && smp.finish != "" {
			continue
		}
		for _, c := range smp.chunks {
			if err := st.Send(&sglangpb.GenerateResponse{RequestId: req.RequestId, Response: &sglangpb.GenerateResponse_Chunk{Chunk: &sglangpb.GenerateStreamChunk{
				TokenIds: c, Index: uint32(i), PromptTokens: smp.prompt, CompletionTokens: smp.complete, CachedTokens: smp.cached}}}); err != nil {
				return err
			}
		}
	}
	return s.finish(ctx, req.GetRequestId(), func(i int, smp sample) error {
		c := &sglangpb.GenerateComplete{OutputIds: smp.output, FinishReason: smp.finish, PromptTokens: smp.prompt,
			CompletionTokens: smp.complete, CachedTokens: smp.cached, ReasoningTokens: 1, Index: uint32(i)}
		if smp.tokenID != 0 {
			c.MatchedStop = &sglangpb.GenerateComplete_MatchedTokenId{MatchedTokenId: smp.tokenID}
		} else if smp.stopStr != "" {
			c.MatchedStop = &sglangpb.GenerateComplete_MatchedStopStr{MatchedStopStr: smp.stopStr}
		}
		return st.Send(&sglangpb.GenerateResponse{RequestId: req.RequestId, Response: &sglangpb.GenerateResponse_Complete{Complete: c}})
	}, samples)
}

// finish waits (hang-), ends early (trunc-) or sends each sample's complete.
func (e *engine) finish(ctx context.Context, id string, send func(int, sample) error, samples []sample) error {
	switch {
	case strings.HasPrefix(id, "hang-"):
		e.started <- id
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	case strings.HasPrefix(id, "trunc-"):
		return nil
	}
	for i, smp := range samples {
		if err := send(i, smp); err != nil {
			return err
		}
	}
	return nil
}

func (s sglangEngine) HealthCheck(ctx context.Context, _ *sglangpb.HealthCheckRequest) (*sglangpb.HealthCheckResponse, error) {
	s.sawPeer(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unhealthy {
		return &sglangpb.HealthCheckResponse{Healthy: false, Message: "Server is shutting down"}, nil
	}
	return &sglangpb.HealthCheckResponse{Healthy: true, Message: "Health check passed"}, nil
}

func (s sglangEngine) Abort(_ context.Context, req *sglangpb.AbortRequest) (*sglangpb.AbortResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortRPC++
	s.aborts = append(s.aborts, req.GetRequestId())
	return &sglangpb.AbortResponse{Success: true}, nil
}

func (s sglangEngine) GetLoads(context.Context, *sglangpb.GetLoadsRequest) (*sglangpb.GetLoadsResponse, error) {
	return &sglangpb.GetLoadsResponse{Timestamp: "2026-12-05T10:00:00Z", Version: "0.5.9", DpRankCount: 2, Loads: []*sglangpb.SchedulerLoad{
		{DpRank: 0, NumRunningReqs: 3, NumWaitingReqs: 4, NumTotalReqs: 7, NumUsedTokens: 500, MaxTotalNumTokens: 1000, TokenUsage: 0.5,
			GenThroughput: 100, CacheHitRate: 0.25, Utilization: 0.75, MaxRunningRequests: 64, NumWaitingUncachedTokens: 300},
		{DpRank: 1, NumRunningReqs: 1, NumWaitingReqs: 0, NumTotalReqs: 1, NumUsedTokens: 100, MaxTotalNumTokens: 1000, TokenUsage: 0.1,
			GenThroughput: 50, NumWaitingUncachedTokens: 0},
	}}, nil
}

func (s sglangEngine) GetModelInfo(context.Context, *sglangpb.GetModelInfoRequest) (*sglangpb.GetModelInfoResponse, error) {
	return &sglangpb.GetModelInfoResponse{ModelPath: "/models/qwen3", TokenizerPath: "/models/qwen3", IsGeneration: true,
		ServedModelName: "Qwen/Qwen3-8B", MaxContextLength: 40960, VocabSize: 151936, EosTokenIds: []int32{151645, 151643},
		PadTokenId: 151643, BosTokenId: -1, MaxReqInputLen: 40955, ModelType: "qwen3", Architectures: []string{"Qwen3ForCausalLM"},
		DefaultSamplingParamsJson: `{"temperature":0.6}`}, nil
}

func (s sglangEngine) GetServerInfo(context.Context, *sglangpb.GetServerInfoRequest) (*sglangpb.GetServerInfoResponse, error) {
	args, _ := structpb.NewStruct(map[string]any{"dp_size": 2.0})
	return &sglangpb.GetServerInfoResponse{ServerArgs: args, ActiveRequests: 5, UptimeSeconds: 12.5, SglangVersion: "0.5.9",
		ServerType: "grpc", MaxTotalNumTokens: 2000, LastReceiveTimestamp: 1.5}, nil
}

func (s sglangEngine) FlushCache(_ context.Context, req *commonpb.FlushCacheRequest) (*commonpb.FlushCacheResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
	if req.GetTimeoutS() == 0 {
		return &commonpb.FlushCacheResponse{Success: false, Message: "Cache not flushed because there are pending requests"}, nil
	}
	return &commonpb.FlushCacheResponse{Success: true}, nil
}

// vllmEngine serves vLLM's engine service.
type vllmEngine struct {
	vllmpb.UnimplementedVllmEngineServer
	*engine
}

func (s vllmEngine) Generate(req *vllmpb.GenerateRequest, st grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	ctx := st.Context()
	s.sawPeer(ctx)
	s.mu.Lock()
	s.vlReqs = append(s.vlReqs, proto.Clone(req).(*vllmpb.GenerateRequest))
	s.mu.Unlock()
	sp := req.GetSamplingParams()
	samples, err := script(req.GetRequestId(), sp.GetN(), sp.GetMaxTokens(), len(req.GetTokenized().GetInputIds()))
	if err != nil {
		return err
	}
	for i, smp := range samples {
		if !req.GetStream() && smp.finish != "" {
			continue
		}
		for _, c := range smp.chunks {
			if err := st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Chunk{Chunk: &vllmpb.GenerateStreamChunk{
				TokenIds: c, Index: uint32(i), PromptTokens: smp.prompt, CompletionTokens: smp.complete, CachedTokens: smp.cached}}}); err != nil {
				return err
			}
		}
	}
	return s.finish(ctx, req.GetRequestId(), func(i int, smp sample) error {
		kv := `{"remote_host":"p1"}`
		c := &vllmpb.GenerateComplete{OutputIds: smp.output, FinishReason: smp.finish, PromptTokens: smp.prompt,
			CompletionTokens: smp.complete, CachedTokens: smp.cached, Index: uint32(i), KvTransferParamsJson: &kv}
		if smp.tokenID != 0 {
			c.MatchedStop = &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: smp.tokenID}
		} else if smp.stopStr != "" {
			c.MatchedStop = &vllmpb.GenerateComplete_MatchedStopStr{MatchedStopStr: smp.stopStr}
		}
		return st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: c}})
	}, samples)
}

func (s vllmEngine) HealthCheck(ctx context.Context, _ *vllmpb.HealthCheckRequest) (*vllmpb.HealthCheckResponse, error) {
	s.sawPeer(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unhealthy {
		return &vllmpb.HealthCheckResponse{Healthy: false, Message: "engine dead"}, nil
	}
	return &vllmpb.HealthCheckResponse{Healthy: true}, nil
}

func (s vllmEngine) Abort(_ context.Context, req *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortRPC++
	s.aborts = append(s.aborts, req.GetRequestIds()...)
	return &vllmpb.AbortResponse{}, nil
}

func (s vllmEngine) GetLoads(context.Context, *vllmpb.GetLoadsRequest) (*vllmpb.GetLoadsResponse, error) {
	return &vllmpb.GetLoadsResponse{Timestamp: "2026-12-05T10:00:00Z", DpRankCount: 1, Loads: []*vllmpb.SchedulerLoad{
		{DpRank: 0, NumRunningReqs: 2, NumWaitingReqs: 5, NumTotalReqs: 7, NumUsedTokens: 800, MaxTotalNumTokens: 1000, TokenUsage: 0.8, GenThroughput: 30},
	}}, nil
}

func (s vllmEngine) GetModelInfo(context.Context, *vllmpb.GetModelInfoRequest) (*vllmpb.GetModelInfoResponse, error) {
	return &vllmpb.GetModelInfoResponse{ModelPath: "meta-llama/Llama-3.1-8B-Instruct", IsGeneration: true, MaxContextLength: 131072,
		VocabSize: 128256, EosTokenIds: []int32{128009}, BosTokenId: 128000, MaxReqInputLen: 131071}, nil
}

func (s vllmEngine) GetServerInfo(context.Context, *vllmpb.GetServerInfoRequest) (*vllmpb.GetServerInfoResponse, error) {
	return &vllmpb.GetServerInfoResponse{ActiveRequests: 2, ServerType: "vllm-grpc", DataParallelSize: 4, KvConnector: "NixlConnector",
		KvRole: "kv_both", UptimeSeconds: 3}, nil
}

// countingListener counts accepted connections and reports when each one is closed by the
// peer (its Read fails).
type countingListener struct {
	net.Listener
	mu       sync.Mutex
	accepted int
	gone     chan struct{} // one send per connection whose Read failed
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.accepted++
	l.mu.Unlock()
	return &watchedConn{Conn: c, gone: l.gone}, nil
}

func (l *countingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

type watchedConn struct {
	net.Conn
	once sync.Once
	gone chan struct{}
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() { c.gone <- struct{}{} })
	}
	return n, err
}

// testServer is a running engine of one dialect on 127.0.0.1.
type testServer struct {
	addr string
	eng  *engine
	lis  *countingListener
	stop func() // stops the server (idempotent; also run at cleanup)
}

func startServer(t testing.TB, d Dialect, opts ...grpc.ServerOption) *testServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: l, gone: make(chan struct{}, 128)}
	eng := &engine{peers: map[string]int{}, started: make(chan string, 16)}
	srv := grpc.NewServer(opts...)
	switch d {
	case SGLang:
		sglangpb.RegisterSglangSchedulerServer(srv, sglangEngine{engine: eng})
	case VLLM:
		vllmpb.RegisterVllmEngineServer(srv, vllmEngine{engine: eng})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return &testServer{addr: l.Addr().String(), eng: eng, lis: lis, stop: stop}
}

func dial(t testing.TB, ts *testServer, d Dialect, cfg Config) *Client {
	t.Helper()
	c, err := Dial(context.Background(), ts.addr, d, cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var dialects = []Dialect{SGLang, VLLM}
