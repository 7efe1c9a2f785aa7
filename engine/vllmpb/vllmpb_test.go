package vllmpb_test

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
	"github.com/smg-go/smg/engine/vllmpb"
)

// upstreamMethods are the full method names vLLM's gRPC server registers (vllm_engine.proto
// of smg-grpc-proto).
var upstreamMethods = []string{
	"/vllm.grpc.engine.VllmEngine/Generate",
	"/vllm.grpc.engine.VllmEngine/Embed",
	"/vllm.grpc.engine.VllmEngine/HealthCheck",
	"/vllm.grpc.engine.VllmEngine/Abort",
	"/vllm.grpc.engine.VllmEngine/GetModelInfo",
	"/vllm.grpc.engine.VllmEngine/GetServerInfo",
	"/vllm.grpc.engine.VllmEngine/GetLoads",
	"/vllm.grpc.engine.VllmEngine/GetTokenizer",
	"/vllm.grpc.engine.VllmEngine/SubscribeKvEvents",
}

// fakeEngine is a tiny VllmEngine: a healthy engine serving one model that answers
// Generate with the prompt's ids, one per chunk, reversed.
type fakeEngine struct {
	vllmpb.UnimplementedVllmEngineServer
	aborted chan *vllmpb.AbortRequest
}

func (f *fakeEngine) HealthCheck(context.Context, *vllmpb.HealthCheckRequest) (*vllmpb.HealthCheckResponse, error) {
	return &vllmpb.HealthCheckResponse{Healthy: true, Message: "ok"}, nil
}

func (f *fakeEngine) GetModelInfo(context.Context, *vllmpb.GetModelInfoRequest) (*vllmpb.GetModelInfoResponse, error) {
	return modelInfo(), nil
}

func (f *fakeEngine) Abort(_ context.Context, req *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	f.aborted <- req
	return &vllmpb.AbortResponse{}, nil
}

func (f *fakeEngine) GetTokenizer(_ *commonpb.GetTokenizerRequest, stream grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	if err := stream.Send(&commonpb.GetTokenizerChunk{Data: []byte("PK\x03\x04")}); err != nil {
		return err
	}
	return stream.Send(&commonpb.GetTokenizerChunk{Data: []byte("rest"), Sha256: "abc"})
}

func (f *fakeEngine) Generate(req *vllmpb.GenerateRequest, stream grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	ids := req.GetTokenized().GetInputIds()
	if req.GetText() != "" {
		return status.Error(codes.InvalidArgument, "text prompts are not served here")
	}
	out := make([]uint32, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		out = append(out, ids[i])
		if err := stream.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Chunk{Chunk: &vllmpb.GenerateStreamChunk{
			TokenIds:         []uint32{ids[i]},
			PromptTokens:     uint32(len(ids)),
			CompletionTokens: uint32(len(out)),
			CachedTokens:     uint32(req.GetDataParallelRank()),
			Index:            req.GetSamplingParams().GetN() - 1,
		}}}); err != nil {
			return err
		}
	}
	return stream.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: &vllmpb.GenerateComplete{
		OutputIds:            out,
		FinishReason:         "stop",
		PromptTokens:         uint32(len(ids)),
		CompletionTokens:     uint32(len(out)),
		MatchedStop:          &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: req.GetSamplingParams().GetStopTokenIds()[0]},
		KvTransferParamsJson: req.KvTransferParamsJson,
	}}})
}

func modelInfo() *vllmpb.GetModelInfoResponse {
	return &vllmpb.GetModelInfoResponse{
		ModelPath:                 "meta-llama/Llama-3.1-8B-Instruct",
		IsGeneration:              true,
		MaxContextLength:          131072,
		VocabSize:                 128256,
		ServedModelName:           "llama",
		TokenizerPath:             "/models/llama",
		ModelType:                 "llama",
		Architectures:             []string{"LlamaForCausalLM"},
		EosTokenIds:               []int32{128001, 128008, 128009},
		PadTokenId:                -1,
		BosTokenId:                128000,
		MaxReqInputLen:            131072,
		DefaultSamplingParamsJson: `{"temperature":0.6,"top_p":0.9}`,
	}
}

// serve starts impl on a loopback port and returns a client connected to it; both stop when
// the test ends.
func serve(t *testing.T, impl vllmpb.VllmEngineServer) (vllmpb.VllmEngineClient, *grpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	vllmpb.RegisterVllmEngineServer(srv, impl)
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
	return vllmpb.NewVllmEngineClient(conn), srv
}

func TestServiceOverGRPC(t *testing.T) {
	fake := &fakeEngine{aborted: make(chan *vllmpb.AbortRequest, 1)}
	client, srv := serve(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	info, ok := srv.GetServiceInfo()["vllm.grpc.engine.VllmEngine"]
	if !ok {
		t.Fatalf("service not registered: %v", srv.GetServiceInfo())
	}
	var registered []string
	for _, m := range info.Methods {
		registered = append(registered, "/vllm.grpc.engine.VllmEngine/"+m.Name)
	}
	if want := slices.Sorted(slices.Values(upstreamMethods)); !slices.Equal(slices.Sorted(slices.Values(registered)), want) {
		t.Errorf("registered methods %v, want %v", registered, want)
	}

	health, err := client.HealthCheck(ctx, &vllmpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !health.GetHealthy() || health.GetMessage() != "ok" {
		t.Errorf("HealthCheck = %v", health)
	}

	mi, err := client.GetModelInfo(ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(mi, modelInfo()) {
		t.Errorf("GetModelInfo = %v, want %v", mi, modelInfo())
	}

	params := vllmpb.DefaultSamplingParams()
	params.MaxTokens = proto.Uint32(3)
	params.StopTokenIds = []uint32{128009}
	params.N = 1
	kv := `{"do_remote_prefill":true,"remote_host":"10.0.0.1"}`
	stream, err := client.Generate(ctx, &vllmpb.GenerateRequest{
		RequestId:            "req-1",
		Input:                &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: []uint32{10, 20, 4000000000}}},
		SamplingParams:       params,
		Stream:               true,
		KvTransferParamsJson: &kv,
		DataParallelRank:     proto.Int32(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []*vllmpb.GenerateStreamChunk
	var complete *vllmpb.GenerateComplete
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch r := resp.GetResponse().(type) {
		case *vllmpb.GenerateResponse_Chunk:
			chunks = append(chunks, r.Chunk)
		case *vllmpb.GenerateResponse_Complete:
			complete = r.Complete
		default:
			t.Fatalf("response %T", r)
		}
	}
	wantChunks := []*vllmpb.GenerateStreamChunk{
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
	wantComplete := &vllmpb.GenerateComplete{
		OutputIds: []uint32{4000000000, 20, 10}, FinishReason: "stop", PromptTokens: 3, CompletionTokens: 3,
		MatchedStop:          &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: 128009},
		KvTransferParamsJson: &kv,
	}
	if !proto.Equal(complete, wantComplete) {
		t.Errorf("complete = %v, want %v", complete, wantComplete)
	}

	// A status error ends the stream with its code.
	bad, err := client.Generate(ctx, &vllmpb.GenerateRequest{RequestId: "req-2", Input: &vllmpb.GenerateRequest_Text{Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Generate with text: %v, want InvalidArgument", err)
	}

	if _, err := client.Abort(ctx, &vllmpb.AbortRequest{RequestIds: []string{"req-1", "req-2"}}); err != nil {
		t.Fatal(err)
	}
	if got := <-fake.aborted; !slices.Equal(got.GetRequestIds(), []string{"req-1", "req-2"}) {
		t.Errorf("Abort received %v", got)
	}

	tok, err := client.GetTokenizer(ctx, &commonpb.GetTokenizerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var zip []byte
	var sum string
	for {
		c, err := tok.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		zip = append(zip, c.GetData()...)
		sum = c.GetSha256()
	}
	if string(zip) != "PK\x03\x04rest" || sum != "abc" {
		t.Errorf("GetTokenizer: %q, sha256 %q", zip, sum)
	}

	// Methods the fake does not implement are still routed (Unimplemented, not unknown).
	_, err = client.GetLoads(ctx, &vllmpb.GetLoadsRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || st.Message() != "method GetLoads not implemented" {
		t.Errorf("GetLoads: %v, want the generated Unimplemented", err)
	}
}

// TestFullMethodNames pins the generated constants to the upstream's names: a client calls
// the real engine by these strings.
func TestFullMethodNames(t *testing.T) {
	got := []string{
		vllmpb.VllmEngine_Generate_FullMethodName,
		vllmpb.VllmEngine_Embed_FullMethodName,
		vllmpb.VllmEngine_HealthCheck_FullMethodName,
		vllmpb.VllmEngine_Abort_FullMethodName,
		vllmpb.VllmEngine_GetModelInfo_FullMethodName,
		vllmpb.VllmEngine_GetServerInfo_FullMethodName,
		vllmpb.VllmEngine_GetLoads_FullMethodName,
		vllmpb.VllmEngine_GetTokenizer_FullMethodName,
		vllmpb.VllmEngine_SubscribeKvEvents_FullMethodName,
	}
	if !slices.Equal(got, upstreamMethods) {
		t.Errorf("full method names %v, want %v", got, upstreamMethods)
	}
	desc := vllmpb.VllmEngine_ServiceDesc
	if desc.ServiceName != "vllm.grpc.engine.VllmEngine" {
		t.Errorf("service name %q", desc.ServiceName)
	}
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
	var sp []byte
	sp = protowire.AppendTag(sp, 1, protowire.Fixed32Type) // temperature, present though 0
	sp = protowire.AppendFixed32(sp, 0)
	sp = protowire.AppendTag(sp, 3, protowire.VarintType) // top_k
	sp = protowire.AppendVarint(sp, 40)
	sp = protowire.AppendTag(sp, 8, protowire.VarintType) // max_tokens
	sp = protowire.AppendVarint(sp, 7)
	sp = protowire.AppendTag(sp, 12, protowire.VarintType) // skip_special_tokens
	sp = protowire.AppendVarint(sp, 1)
	sp = protowire.AppendTag(sp, 15, protowire.VarintType) // n
	sp = protowire.AppendVarint(sp, 2)
	sp = protowire.AppendTag(sp, 17, protowire.BytesType) // regex
	sp = protowire.AppendString(sp, "[a-z]+")
	sp = protowire.AppendTag(sp, 24, protowire.VarintType) // seed
	sp = protowire.AppendVarint(sp, 9)

	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType) // request_id
	b = protowire.AppendString(b, "r")
	b = protowire.AppendTag(b, 2, protowire.BytesType) // tokenized
	b = protowire.AppendBytes(b, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
		protowire.AppendVarint(protowire.AppendVarint(nil, 5), 300))) // input_ids, packed
	b = protowire.AppendTag(b, 4, protowire.BytesType) // sampling_params
	b = protowire.AppendBytes(b, sp)
	b = protowire.AppendTag(b, 5, protowire.VarintType) // stream
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 8, protowire.BytesType) // kv_transfer_params_json
	b = protowire.AppendString(b, "{}")
	b = protowire.AppendTag(b, 9, protowire.VarintType) // data_parallel_rank, present though 0
	b = protowire.AppendVarint(b, 0)

	var req vllmpb.GenerateRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	want := &vllmpb.GenerateRequest{
		RequestId: "r",
		Input:     &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: []uint32{5, 300}}},
		SamplingParams: &vllmpb.SamplingParams{
			Temperature: proto.Float32(0), TopK: 40, MaxTokens: proto.Uint32(7), SkipSpecialTokens: true, N: 2,
			Seed: proto.Int32(9), Constraint: &vllmpb.SamplingParams_Regex{Regex: "[a-z]+"},
		},
		Stream:               true,
		KvTransferParamsJson: proto.String("{}"),
		DataParallelRank:     proto.Int32(0),
	}
	if !proto.Equal(&req, want) {
		t.Errorf("decoded %v, want %v", &req, want)
	}
	if len(req.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("unknown fields %x", req.ProtoReflect().GetUnknown())
	}

	// The response side: chunk is 1, complete 2 (no request_id, unlike SGLang's).
	var resp []byte
	resp = protowire.AppendTag(resp, 2, protowire.BytesType)
	resp = protowire.AppendBytes(resp, protowire.AppendVarint(protowire.AppendTag(
		protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "length"), 8, protowire.VarintType), 1))
	var gr vllmpb.GenerateResponse
	if err := proto.Unmarshal(resp, &gr); err != nil {
		t.Fatal(err)
	}
	if c := gr.GetComplete(); c.GetFinishReason() != "length" || c.GetIndex() != 1 {
		t.Errorf("decoded complete %v", c)
	}
}

func TestDefaultSamplingParams(t *testing.T) {
	p := vllmpb.DefaultSamplingParams()
	if p.Temperature == nil || p.GetTemperature() != 1 || p.GetTopP() != 1 || p.GetTopK() != 0 || p.GetMinP() != 0 ||
		p.GetFrequencyPenalty() != 0 || p.GetPresencePenalty() != 0 || p.GetRepetitionPenalty() != 1 ||
		p.GetN() != 1 || p.GetMinTokens() != 0 || !p.GetSkipSpecialTokens() || !p.GetSpacesBetweenSpecialTokens() ||
		p.GetIgnoreEos() || p.GetIncludeStopStrInOutput() || p.MaxTokens != nil || p.Seed != nil ||
		p.Logprobs != nil || p.PromptLogprobs != nil || p.TruncatePromptTokens != nil || p.GetConstraint() != nil {
		t.Errorf("DefaultSamplingParams() = %v", p)
	}
	// Exactly the fields whose zero or absence is not vLLM's default go on the wire.
	var set []string
	p.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set = append(set, string(fd.Name()))
		return true
	})
	want := []string{"temperature", "top_p", "repetition_penalty", "skip_special_tokens", "spaces_between_special_tokens", "n"}
	slices.Sort(set)
	slices.Sort(want)
	if !slices.Equal(set, want) {
		t.Errorf("fields set %v, want %v", set, want)
	}
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back vllmpb.SamplingParams
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, p) {
		t.Errorf("round trip %v, want %v", &back, p)
	}
	*p.Temperature = 0
	if q := vllmpb.DefaultSamplingParams(); q.GetTemperature() != 1 {
		t.Errorf("a caller's change leaked into the next DefaultSamplingParams: %v", q)
	}
}
