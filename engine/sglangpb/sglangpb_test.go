package sglangpb_test

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
)

// upstreamMethods are the full method names SGLang's gRPC server registers
// (sglang_scheduler.proto of smg-grpc-proto).
var upstreamMethods = []string{
	"/sglang.grpc.scheduler.SglangScheduler/Generate",
	"/sglang.grpc.scheduler.SglangScheduler/Embed",
	"/sglang.grpc.scheduler.SglangScheduler/HealthCheck",
	"/sglang.grpc.scheduler.SglangScheduler/Abort",
	"/sglang.grpc.scheduler.SglangScheduler/GetModelInfo",
	"/sglang.grpc.scheduler.SglangScheduler/GetServerInfo",
	"/sglang.grpc.scheduler.SglangScheduler/GetLoads",
	"/sglang.grpc.scheduler.SglangScheduler/FlushCache",
	"/sglang.grpc.scheduler.SglangScheduler/StartProfile",
	"/sglang.grpc.scheduler.SglangScheduler/StopProfile",
	"/sglang.grpc.scheduler.SglangScheduler/GetTokenizer",
	"/sglang.grpc.scheduler.SglangScheduler/SubscribeKvEvents",
	"/sglang.grpc.scheduler.SglangScheduler/LoadLoRAAdapter",
	"/sglang.grpc.scheduler.SglangScheduler/UnloadLoRAAdapter",
	"/sglang.grpc.scheduler.SglangScheduler/ListLoadedLoRAAdapters",
}

// fakeScheduler is a tiny SglangScheduler: a healthy engine serving one model that
// answers Generate with the prompt's ids, one per chunk, reversed.
type fakeScheduler struct {
	sglangpb.UnimplementedSglangSchedulerServer
	aborted chan *sglangpb.AbortRequest
}

func (f *fakeScheduler) HealthCheck(context.Context, *sglangpb.HealthCheckRequest) (*sglangpb.HealthCheckResponse, error) {
	return &sglangpb.HealthCheckResponse{Healthy: true, Message: "ok"}, nil
}

func (f *fakeScheduler) GetModelInfo(context.Context, *sglangpb.GetModelInfoRequest) (*sglangpb.GetModelInfoResponse, error) {
	return modelInfo(), nil
}

func (f *fakeScheduler) Abort(_ context.Context, req *sglangpb.AbortRequest) (*sglangpb.AbortResponse, error) {
	f.aborted <- req
	return &sglangpb.AbortResponse{Success: true}, nil
}

func (f *fakeScheduler) FlushCache(_ context.Context, req *commonpb.FlushCacheRequest) (*commonpb.FlushCacheResponse, error) {
	return &commonpb.FlushCacheResponse{Success: req.GetTimeoutS() > 0, Message: "flushed"}, nil
}

func (f *fakeScheduler) Generate(req *sglangpb.GenerateRequest, stream grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	ids := req.GetTokenized().GetInputIds()
	if req.GetSamplingParams().GetTopP() == 0 {
		return status.Error(codes.InvalidArgument, "top_p must be in (0, 1]")
	}
	out := make([]uint32, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		out = append(out, ids[i])
		if err := stream.Send(&sglangpb.GenerateResponse{
			RequestId: req.GetRequestId(),
			Response: &sglangpb.GenerateResponse_Chunk{Chunk: &sglangpb.GenerateStreamChunk{
				TokenIds:         []uint32{ids[i]},
				PromptTokens:     uint32(len(ids)),
				CompletionTokens: uint32(len(out)),
				CachedTokens:     uint32(req.GetDataParallelRank()),
			}},
		}); err != nil {
			return err
		}
	}
	return stream.Send(&sglangpb.GenerateResponse{
		RequestId: req.GetRequestId(),
		Response: &sglangpb.GenerateResponse_Complete{Complete: &sglangpb.GenerateComplete{
			OutputIds:        out,
			FinishReason:     "stop",
			PromptTokens:     uint32(len(ids)),
			CompletionTokens: uint32(len(out)),
			MatchedStop:      &sglangpb.GenerateComplete_MatchedStopStr{MatchedStopStr: req.GetSamplingParams().GetStop()[0]},
		}},
	})
}

func modelInfo() *sglangpb.GetModelInfoResponse {
	return &sglangpb.GetModelInfoResponse{
		ModelPath:                 "Qwen/Qwen3-0.6B",
		TokenizerPath:             "/models/qwen3",
		IsGeneration:              true,
		ServedModelName:           "qwen3",
		MaxContextLength:          40960,
		VocabSize:                 151936,
		EosTokenIds:               []int32{151645, 151643},
		PadTokenId:                151643,
		BosTokenId:                -1,
		MaxReqInputLen:            40955,
		Architectures:             []string{"Qwen3ForCausalLM"},
		DefaultSamplingParamsJson: `{"temperature":0.6,"top_p":0.95,"top_k":20}`,
	}
}

// serve starts impl on a loopback port and returns a client connected to it; both stop when
// the test ends.
func serve(t *testing.T, impl sglangpb.SglangSchedulerServer) (sglangpb.SglangSchedulerClient, *grpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sglangpb.RegisterSglangSchedulerServer(srv, impl)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sglangpb.NewSglangSchedulerClient(conn), srv
}

func TestServiceOverGRPC(t *testing.T) {
	fake := &fakeScheduler{aborted: make(chan *sglangpb.AbortRequest, 1)}
	client, srv := serve(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The server registered every upstream method under the upstream's names.
	info, ok := srv.GetServiceInfo()["sglang.grpc.scheduler.SglangScheduler"]
	if !ok {
		t.Fatalf("service not registered: %v", srv.GetServiceInfo())
	}
	var registered []string
	for _, m := range info.Methods {
		registered = append(registered, "/sglang.grpc.scheduler.SglangScheduler/"+m.Name)
	}
	if want := slices.Sorted(slices.Values(upstreamMethods)); !slices.Equal(slices.Sorted(slices.Values(registered)), want) {
		t.Errorf("registered methods %v, want %v", registered, want)
	}

	health, err := client.HealthCheck(ctx, &sglangpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !health.GetHealthy() || health.GetMessage() != "ok" {
		t.Errorf("HealthCheck = %v", health)
	}

	mi, err := client.GetModelInfo(ctx, &sglangpb.GetModelInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(mi, modelInfo()) {
		t.Errorf("GetModelInfo = %v, want %v", mi, modelInfo())
	}

	params := sglangpb.DefaultSamplingParams()
	params.MaxNewTokens = proto.Uint32(3)
	params.Stop = []string{"</s>"}
	stream, err := client.Generate(ctx, &sglangpb.GenerateRequest{
		RequestId:        "req-1",
		Tokenized:        &sglangpb.TokenizedInput{OriginalText: "a b c", InputIds: []uint32{10, 20, 4000000000}},
		SamplingParams:   params,
		LogprobStartLen:  -1,
		DataParallelRank: 2,
		Stream:           true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []*sglangpb.GenerateStreamChunk
	var complete *sglangpb.GenerateComplete
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetRequestId() != "req-1" {
			t.Errorf("response request_id %q", resp.GetRequestId())
		}
		switch r := resp.GetResponse().(type) {
		case *sglangpb.GenerateResponse_Chunk:
			chunks = append(chunks, r.Chunk)
		case *sglangpb.GenerateResponse_Complete:
			complete = r.Complete
		default:
			t.Fatalf("response %T", r)
		}
	}
	wantChunks := []*sglangpb.GenerateStreamChunk{
		{TokenIds: []uint32{4000000000}, PromptTokens: 3, CompletionTokens: 1, CachedTokens: 2},
		{TokenIds: []uint32{20}, PromptTokens: 3, CompletionTokens: 2, CachedTokens: 2},
		{TokenIds: []uint32{10}, PromptTokens: 3, CompletionTokens: 3, CachedTokens: 2},
	}
	if len(chunks) != len(wantChunks) {
		t.Fatalf("%d chunks, want %d", len(chunks), len(wantChunks))
	}
	for i := range chunks {
		if !proto.Equal(chunks[i], wantChunks[i]) {
			t.Errorf("chunk %d = %v, want %v", i, chunks[i], wantChunks[i])
		}
	}
	wantComplete := &sglangpb.GenerateComplete{
		OutputIds: []uint32{4000000000, 20, 10}, FinishReason: "stop", PromptTokens: 3, CompletionTokens: 3,
		MatchedStop: &sglangpb.GenerateComplete_MatchedStopStr{MatchedStopStr: "</s>"},
	}
	if !proto.Equal(complete, wantComplete) {
		t.Errorf("complete = %v, want %v", complete, wantComplete)
	}

	// A status error ends the stream with its code.
	bad, err := client.Generate(ctx, &sglangpb.GenerateRequest{RequestId: "req-2", SamplingParams: &sglangpb.SamplingParams{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Generate with top_p 0: %v, want InvalidArgument", err)
	}

	if _, err := client.Abort(ctx, &sglangpb.AbortRequest{RequestId: "req-1", Reason: "client gone"}); err != nil {
		t.Fatal(err)
	}
	if got := <-fake.aborted; got.GetRequestId() != "req-1" || got.GetReason() != "client gone" {
		t.Errorf("Abort received %v", got)
	}

	flushed, err := client.FlushCache(ctx, &commonpb.FlushCacheRequest{TimeoutS: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if !flushed.GetSuccess() || flushed.GetMessage() != "flushed" {
		t.Errorf("FlushCache = %v", flushed)
	}

	// Methods the fake does not implement are still routed (Unimplemented, not unknown).
	_, err = client.GetLoads(ctx, &sglangpb.GetLoadsRequest{DpRank: proto.Int32(0)})
	if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || st.Message() != "method GetLoads not implemented" {
		t.Errorf("GetLoads: %v, want the generated Unimplemented", err)
	}
}

// TestFullMethodNames pins the generated constants to the upstream's names: a client calls
// the real engine by these strings.
func TestFullMethodNames(t *testing.T) {
	got := []string{
		sglangpb.SglangScheduler_Generate_FullMethodName,
		sglangpb.SglangScheduler_Embed_FullMethodName,
		sglangpb.SglangScheduler_HealthCheck_FullMethodName,
		sglangpb.SglangScheduler_Abort_FullMethodName,
		sglangpb.SglangScheduler_GetModelInfo_FullMethodName,
		sglangpb.SglangScheduler_GetServerInfo_FullMethodName,
		sglangpb.SglangScheduler_GetLoads_FullMethodName,
		sglangpb.SglangScheduler_FlushCache_FullMethodName,
		sglangpb.SglangScheduler_StartProfile_FullMethodName,
		sglangpb.SglangScheduler_StopProfile_FullMethodName,
		sglangpb.SglangScheduler_GetTokenizer_FullMethodName,
		sglangpb.SglangScheduler_SubscribeKvEvents_FullMethodName,
		sglangpb.SglangScheduler_LoadLoRAAdapter_FullMethodName,
		sglangpb.SglangScheduler_UnloadLoRAAdapter_FullMethodName,
		sglangpb.SglangScheduler_ListLoadedLoRAAdapters_FullMethodName,
	}
	if !slices.Equal(got, upstreamMethods) {
		t.Errorf("full method names %v, want %v", got, upstreamMethods)
	}
	desc := sglangpb.SglangScheduler_ServiceDesc
	if desc.ServiceName != "sglang.grpc.scheduler.SglangScheduler" {
		t.Errorf("service name %q", desc.ServiceName)
	}
	// Generate, GetTokenizer and SubscribeKvEvents are server streams; nothing streams from
	// the client.
	var streams []string
	for _, s := range desc.Streams {
		if !s.ServerStreams || s.ClientStreams {
			t.Errorf("%s: server streams %v, client streams %v", s.StreamName, s.ServerStreams, s.ClientStreams)
		}
		streams = append(streams, s.StreamName)
	}
	if want := []string{"Generate", "GetTokenizer", "SubscribeKvEvents"}; !slices.Equal(streams, want) {
		t.Errorf("streams %v, want %v", streams, want)
	}
}

// TestWireNumbers decodes bytes written field by field with the upstream's numbers, so a
// renumbered field in the .proto file fails here even though the generated code agrees
// with itself.
func TestWireNumbers(t *testing.T) {
	minusOne := uint64(1<<64 - 1)
	var sp []byte
	sp = protowire.AppendTag(sp, 1, protowire.Fixed32Type) // temperature
	sp = protowire.AppendFixed32(sp, 0x3f000000)           // 0.5
	sp = protowire.AppendTag(sp, 3, protowire.VarintType)  // top_k
	sp = protowire.AppendVarint(sp, minusOne)              // int32 -1: ten bytes, sign-extended
	sp = protowire.AppendTag(sp, 8, protowire.VarintType)  // max_new_tokens
	sp = protowire.AppendVarint(sp, 7)
	sp = protowire.AppendTag(sp, 14, protowire.BytesType) // json_schema
	sp = protowire.AppendString(sp, `{"type":"object"}`)
	sp = protowire.AppendTag(sp, 17, protowire.VarintType) // n
	sp = protowire.AppendVarint(sp, 2)

	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType) // request_id
	b = protowire.AppendString(b, "r")
	b = protowire.AppendTag(b, 2, protowire.BytesType) // tokenized
	b = protowire.AppendBytes(b, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
		protowire.AppendVarint(protowire.AppendVarint(nil, 5), 300))) // input_ids, packed
	b = protowire.AppendTag(b, 4, protowire.BytesType) // sampling_params
	b = protowire.AppendBytes(b, sp)
	b = protowire.AppendTag(b, 6, protowire.VarintType) // logprob_start_len
	b = protowire.AppendVarint(b, minusOne)
	b = protowire.AppendTag(b, 10, protowire.BytesType) // disaggregated_params
	b = protowire.AppendBytes(b, protowire.AppendVarint(protowire.AppendTag(
		protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "10.0.0.1"), 3, protowire.VarintType), 42))
	b = protowire.AppendTag(b, 16, protowire.VarintType) // data_parallel_rank
	b = protowire.AppendVarint(b, 3)
	b = protowire.AppendTag(b, 17, protowire.VarintType) // stream
	b = protowire.AppendVarint(b, 1)

	var req sglangpb.GenerateRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	want := &sglangpb.GenerateRequest{
		RequestId: "r",
		Tokenized: &sglangpb.TokenizedInput{InputIds: []uint32{5, 300}},
		SamplingParams: &sglangpb.SamplingParams{
			Temperature: 0.5, TopK: -1, MaxNewTokens: proto.Uint32(7), N: 2,
			Constraint: &sglangpb.SamplingParams_JsonSchema{JsonSchema: `{"type":"object"}`},
		},
		LogprobStartLen:     -1,
		DisaggregatedParams: &sglangpb.DisaggregatedParams{BootstrapHost: "10.0.0.1", BootstrapRoom: 42},
		DataParallelRank:    3,
		Stream:              true,
	}
	if !proto.Equal(&req, want) {
		t.Errorf("decoded %v, want %v", &req, want)
	}
	if len(req.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("unknown fields %x", req.ProtoReflect().GetUnknown())
	}

	// The response side: chunk is 2, complete 3 (4, the old error, is reserved).
	var resp []byte
	resp = protowire.AppendTag(resp, 3, protowire.BytesType)
	resp = protowire.AppendBytes(resp, protowire.AppendVarint(protowire.AppendTag(
		protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "length"), 11, protowire.VarintType), 1))
	var gr sglangpb.GenerateResponse
	if err := proto.Unmarshal(resp, &gr); err != nil {
		t.Fatal(err)
	}
	if c := gr.GetComplete(); c.GetFinishReason() != "length" || c.GetIndex() != 1 {
		t.Errorf("decoded complete %v", c)
	}
	fields := gr.ProtoReflect().Descriptor().Fields()
	if fields.ByName("chunk").Number() != 2 || fields.ByName("complete").Number() != 3 || fields.ByNumber(4) != nil {
		t.Errorf("GenerateResponse fields: chunk %d, complete %d", fields.ByName("chunk").Number(), fields.ByName("complete").Number())
	}
}

func TestDefaultSamplingParams(t *testing.T) {
	p := sglangpb.DefaultSamplingParams()
	if p.GetTemperature() != 1 || p.GetTopP() != 1 || p.GetTopK() != -1 || p.GetMinP() != 0 ||
		p.GetFrequencyPenalty() != 0 || p.GetPresencePenalty() != 0 || p.GetRepetitionPenalty() != 1 ||
		p.GetN() != 1 || p.GetMinNewTokens() != 0 || !p.GetSkipSpecialTokens() || !p.GetSpacesBetweenSpecialTokens() ||
		p.GetIgnoreEos() || p.GetNoStopTrim() || p.MaxNewTokens != nil || p.StreamInterval != nil || p.GetConstraint() != nil {
		t.Errorf("DefaultSamplingParams() = %v", p)
	}
	// Exactly the fields whose zero is not SGLang's default go on the wire.
	var set []string
	p.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set = append(set, string(fd.Name()))
		return true
	})
	want := []string{"temperature", "top_p", "top_k", "repetition_penalty", "skip_special_tokens", "spaces_between_special_tokens", "n"}
	slices.Sort(set)
	slices.Sort(want)
	if !slices.Equal(set, want) {
		t.Errorf("fields set %v, want %v", set, want)
	}
	// The defaults survive the wire, and every call is a fresh message.
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back sglangpb.SamplingParams
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, p) {
		t.Errorf("round trip %v, want %v", &back, p)
	}
	p.TopK = 5
	if q := sglangpb.DefaultSamplingParams(); q.GetTopK() != -1 {
		t.Errorf("a caller's change leaked into the next DefaultSamplingParams: %v", q)
	}
}
