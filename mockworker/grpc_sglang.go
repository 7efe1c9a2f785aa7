package mockworker

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
)

// sglangService is SGLang's scheduler service over one worker.
type sglangService struct {
	sglangpb.UnimplementedSglangSchedulerServer
	w *Worker
}

func (s *sglangService) Generate(req *sglangpb.GenerateRequest, stream grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	sp := req.GetSamplingParams()
	var maxTokens *uint32
	if sp != nil {
		maxTokens = sp.MaxNewTokens
	}
	r, err := generateRequest(req.GetRequestId(), req.GetTokenized() != nil, req.GetTokenized().GetInputIds(), req.GetStream(), sp, maxTokens, "max_new_tokens")
	if err != nil {
		return err
	}
	if r.pd, err = s.w.sglangPD(req); err != nil {
		return err
	}
	return s.w.rpcGenerate(stream.Context(), r, &sglangSender{id: r.id, stream: stream})
}

// sglangSender builds SGLang's messages, reusing them between sends (Send marshals at once).
type sglangSender struct {
	id     string
	stream grpc.ServerStreamingServer[sglangpb.GenerateResponse]
	tok    [1]uint32
	chunkM sglangpb.GenerateStreamChunk
	chunkR sglangpb.GenerateResponse_Chunk
	resp   sglangpb.GenerateResponse
}

func (s *sglangSender) chunk(index int, id uint32, prompt, completion, cached int) error {
	s.tok[0] = id
	s.chunkM.TokenIds = s.tok[:]
	s.chunkM.PromptTokens, s.chunkM.CompletionTokens, s.chunkM.CachedTokens = uint32(prompt), uint32(completion), uint32(cached)
	s.chunkM.Index = uint32(index)
	s.chunkR.Chunk = &s.chunkM
	s.resp.RequestId, s.resp.Response = s.id, &s.chunkR
	return s.stream.Send(&s.resp)
}

func (s *sglangSender) complete(index int, ids []uint32, p genPlan, finish string, prompt, completion, cached int) error {
	c := &sglangpb.GenerateComplete{
		OutputIds: ids, FinishReason: finish, Index: uint32(index),
		PromptTokens: uint32(prompt), CompletionTokens: uint32(completion), CachedTokens: uint32(cached),
	}
	if finish == "stop" {
		if p.hasMatchedID {
			c.MatchedStop = &sglangpb.GenerateComplete_MatchedTokenId{MatchedTokenId: p.matchedID}
		} else if p.matchedStr != "" {
			c.MatchedStop = &sglangpb.GenerateComplete_MatchedStopStr{MatchedStopStr: p.matchedStr}
		}
	}
	return s.stream.Send(&sglangpb.GenerateResponse{RequestId: s.id, Response: &sglangpb.GenerateResponse_Complete{Complete: c}})
}

func (s *sglangService) HealthCheck(context.Context, *sglangpb.HealthCheckRequest) (*sglangpb.HealthCheckResponse, error) {
	healthy, msg := s.w.health()
	return &sglangpb.HealthCheckResponse{Healthy: healthy, Message: msg}, nil
}

func (s *sglangService) Abort(_ context.Context, req *sglangpb.AbortRequest) (*sglangpb.AbortResponse, error) {
	if s.w.rpc.abort(req.GetRequestId()) == 0 {
		return &sglangpb.AbortResponse{Success: false, Message: "no running request " + req.GetRequestId()}, nil
	}
	return &sglangpb.AbortResponse{Success: true, Message: "aborted"}, nil
}

func (s *sglangService) GetModelInfo(context.Context, *sglangpb.GetModelInfoRequest) (*sglangpb.GetModelInfoResponse, error) {
	w, v := s.w, s.w.rpc.vocab
	return &sglangpb.GetModelInfoResponse{
		ModelPath: w.cfg.Model, TokenizerPath: w.tokenizerPath(), IsGeneration: true,
		WeightVersion: "default", ServedModelName: w.cfg.Model,
		MaxContextLength: int32(w.cfg.KVTokens), VocabSize: int32(v.size), ModelType: "mock",
		EosTokenIds: eosInt32(v.eos), MaxReqInputLen: int32(w.cfg.KVTokens - 1),
		Architectures: []string{"MockForCausalLM"},
	}, nil
}

func (s *sglangService) GetServerInfo(context.Context, *sglangpb.GetServerInfoRequest) (*sglangpb.GetServerInfoResponse, error) {
	w := s.w
	args, err := structpb.NewStruct(map[string]any{
		"model_path": w.cfg.Model, "tokenizer_path": w.tokenizerPath(), "served_model_name": w.cfg.Model,
		"max_running_requests": w.cfg.MaxRunning, "max_total_tokens": w.cfg.KVTokens,
		"page_size": w.cfg.BlockSize, "chunked_prefill_size": w.cfg.PrefillChunk,
		"dp_size": 1, "tp_size": 1, "disaggregation_mode": "null", "grpc_mode": true,
	})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	sched, err := structpb.NewStruct(map[string]any{
		"max_total_num_tokens": w.cfg.KVTokens, "max_req_input_len": w.cfg.KVTokens - 1,
	})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &sglangpb.GetServerInfoResponse{
		ServerArgs: args, SchedulerInfo: sched, ActiveRequests: int32(w.active.Load()),
		UptimeSeconds: time.Since(w.rpc.start).Seconds(), SglangVersion: "mock", ServerType: "grpc",
		StartTime: timestamppb.New(w.rpc.start), MaxTotalNumTokens: int32(w.cfg.KVTokens),
	}, nil
}

func (s *sglangService) GetLoads(_ context.Context, req *sglangpb.GetLoadsRequest) (*sglangpb.GetLoadsResponse, error) {
	resp := &sglangpb.GetLoadsResponse{Timestamp: time.Now().UTC().Format(time.RFC3339), Version: "mock", DpRankCount: 1}
	if req.DpRank != nil && *req.DpRank != 0 {
		return resp, nil // one rank, 0
	}
	l := s.w.load()
	usage, util := float64(l.usedTokens)/float64(l.maxTotalTokens), float64(l.running)/float64(l.maxRunning)
	load := &sglangpb.SchedulerLoad{
		NumRunningReqs: int32(l.running), NumWaitingReqs: int32(l.waiting), NumTotalReqs: int32(l.running + l.waiting),
		NumUsedTokens: int32(l.usedTokens), MaxTotalNumTokens: int32(l.maxTotalTokens), TokenUsage: usage,
		GenThroughput: l.genThroughput, CacheHitRate: l.cacheHitRate, Utilization: util,
		MaxRunningRequests: int32(l.maxRunning), NumWaitingUncachedTokens: int32(l.waitingUncachedToks),
	}
	for _, section := range req.GetInclude() {
		if section == "memory" || section == "all" {
			load.Memory = &sglangpb.MemoryMetrics{TokenCapacity: int32(l.maxTotalTokens)}
		}
		if section == "queues" || section == "all" {
			load.Queues = &sglangpb.QueueMetrics{Waiting: int32(l.waiting)}
		}
	}
	resp.Loads = []*sglangpb.SchedulerLoad{load}
	resp.Aggregate = &sglangpb.AggregateMetrics{
		TotalRunningReqs: int32(l.running), TotalWaitingReqs: int32(l.waiting), TotalReqs: int32(l.running + l.waiting),
		AvgTokenUsage: usage, AvgThroughput: l.genThroughput, AvgUtilization: util,
	}
	return resp, nil
}

func (s *sglangService) FlushCache(ctx context.Context, req *commonpb.FlushCacheRequest) (*commonpb.FlushCacheResponse, error) {
	ok, msg := s.w.flushCache(ctx, time.Duration(float64(req.GetTimeoutS())*float64(time.Second)))
	return &commonpb.FlushCacheResponse{Success: ok, Message: msg}, nil
}

func (s *sglangService) GetTokenizer(_ *commonpb.GetTokenizerRequest, stream grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	return s.w.sendTokenizer(stream)
}

func (s *sglangService) SubscribeKvEvents(req *commonpb.SubscribeKvEventsRequest, stream grpc.ServerStreamingServer[commonpb.KvEventBatch]) error {
	return s.w.subscribeKVEvents(stream.Context(), req.GetStartSequenceNumber(), stream.Send)
}
