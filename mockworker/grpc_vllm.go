package mockworker

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/vllmpb"
)

// vllmService is vLLM's engine service over one worker.
type vllmService struct {
	vllmpb.UnimplementedVllmEngineServer
	w *Worker
}

func (s *vllmService) Generate(req *vllmpb.GenerateRequest, stream grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	sp := req.GetSamplingParams()
	var maxTokens *uint32
	if sp != nil {
		maxTokens = sp.MaxTokens
	}
	tok := req.GetTokenized()
	r, err := generateRequest(req.GetRequestId(), tok != nil, tok.GetInputIds(), req.GetStream(), sp, maxTokens, "max_tokens")
	if err != nil {
		return err
	}
	if r.pd, err = s.w.vllmPD(req.KvTransferParamsJson, tok.GetOriginalText(), r.ids, r.stream, r.maxTokens); err != nil {
		return err
	}
	out := &vllmSender{stream: stream}
	if r.pd != nil && !r.pd.decode {
		kv := string(s.w.appendKVParams(nil, r.pd)) // the decode's kv_transfer_params
		out.kvParams = &kv
	}
	return s.w.rpcGenerate(stream.Context(), r, out)
}

// vllmSender builds vLLM's messages, reusing them between sends (Send marshals at once).
type vllmSender struct {
	stream grpc.ServerStreamingServer[vllmpb.GenerateResponse]
	// kvParams, on a prefill, is the kv_transfer_params its answer hands the decode.
	kvParams *string
	tok      [1]uint32
	chunkM   vllmpb.GenerateStreamChunk
	chunkR   vllmpb.GenerateResponse_Chunk
	resp     vllmpb.GenerateResponse
}

func (s *vllmSender) chunk(index int, id uint32, prompt, completion, cached int) error {
	s.tok[0] = id
	s.chunkM.TokenIds = s.tok[:]
	s.chunkM.PromptTokens, s.chunkM.CompletionTokens, s.chunkM.CachedTokens = uint32(prompt), uint32(completion), uint32(cached)
	s.chunkM.Index = uint32(index)
	s.chunkR.Chunk = &s.chunkM
	s.resp.Response = &s.chunkR
	return s.stream.Send(&s.resp)
}

func (s *vllmSender) complete(index int, ids []uint32, p genPlan, finish string, prompt, completion, cached int) error {
	c := &vllmpb.GenerateComplete{
		OutputIds: ids, FinishReason: finish, Index: uint32(index),
		PromptTokens: uint32(prompt), CompletionTokens: uint32(completion), CachedTokens: uint32(cached),
		KvTransferParamsJson: s.kvParams,
	}
	if finish == "stop" {
		if p.hasMatchedID {
			c.MatchedStop = &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: p.matchedID}
		} else if p.matchedStr != "" {
			c.MatchedStop = &vllmpb.GenerateComplete_MatchedStopStr{MatchedStopStr: p.matchedStr}
		}
	}
	return s.stream.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: c}})
}

func (s *vllmService) HealthCheck(context.Context, *vllmpb.HealthCheckRequest) (*vllmpb.HealthCheckResponse, error) {
	healthy, msg := s.w.health()
	return &vllmpb.HealthCheckResponse{Healthy: healthy, Message: msg}, nil
}

func (s *vllmService) Abort(_ context.Context, req *vllmpb.AbortRequest) (*vllmpb.AbortResponse, error) {
	for _, id := range req.GetRequestIds() {
		s.w.rpc.abort(id)
	}
	return &vllmpb.AbortResponse{}, nil
}

func (s *vllmService) GetModelInfo(context.Context, *vllmpb.GetModelInfoRequest) (*vllmpb.GetModelInfoResponse, error) {
	w, v := s.w, s.w.rpc.vocab
	return &vllmpb.GetModelInfoResponse{
		ModelPath: w.cfg.Model, IsGeneration: true, MaxContextLength: uint32(w.cfg.KVTokens),
		VocabSize: uint32(v.size), ServedModelName: w.cfg.Model, TokenizerPath: w.tokenizerPath(),
		ModelType: "mock", Architectures: []string{"MockForCausalLM"}, EosTokenIds: eosInt32(v.eos),
		MaxReqInputLen: int32(w.cfg.KVTokens - 1),
	}, nil
}

func (s *vllmService) GetServerInfo(context.Context, *vllmpb.GetServerInfoRequest) (*vllmpb.GetServerInfoResponse, error) {
	return &vllmpb.GetServerInfoResponse{
		ActiveRequests: uint32(s.w.active.Load()), UptimeSeconds: time.Since(s.w.rpc.start).Seconds(),
		ServerType: "vllm-grpc", DataParallelSize: 1,
	}, nil
}

// GetLoads answers vLLM's core section only, as vLLM does.
func (s *vllmService) GetLoads(_ context.Context, req *vllmpb.GetLoadsRequest) (*vllmpb.GetLoadsResponse, error) {
	resp := &vllmpb.GetLoadsResponse{Timestamp: time.Now().UTC().Format(time.RFC3339), Version: "mock", DpRankCount: 1}
	if req.DpRank != nil && *req.DpRank != 0 {
		return resp, nil // one rank, 0
	}
	l := s.w.load()
	resp.Loads = []*vllmpb.SchedulerLoad{{
		NumRunningReqs: int32(l.running), NumWaitingReqs: int32(l.waiting), NumTotalReqs: int32(l.running + l.waiting),
		NumUsedTokens: int32(l.usedTokens), MaxTotalNumTokens: int32(l.maxTotalTokens),
		TokenUsage: float64(l.usedTokens) / float64(l.maxTotalTokens), GenThroughput: l.genThroughput,
		CacheHitRate: l.cacheHitRate, Utilization: float64(l.running) / float64(l.maxRunning),
		MaxRunningRequests: int32(l.maxRunning),
	}}
	return resp, nil
}

func (s *vllmService) GetTokenizer(_ *commonpb.GetTokenizerRequest, stream grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	return s.w.sendTokenizer(stream)
}

func (s *vllmService) SubscribeKvEvents(req *commonpb.SubscribeKvEventsRequest, stream grpc.ServerStreamingServer[commonpb.KvEventBatch]) error {
	return s.w.subscribeKVEvents(stream.Context(), req.GetStartSequenceNumber(), stream.Send)
}
