package mockworker

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
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
	r := rpcRequest{id: req.GetRequestId(), ids: req.GetTokenized().GetInputIds(), stream: req.GetStream()}
	if req.GetTokenized() == nil {
		return status.Error(codes.InvalidArgument, "tokenized is missing: the scheduler runs token ids")
	}
	if sp := req.GetSamplingParams(); sp != nil {
		if sp.MaxNewTokens != nil {
			if *sp.MaxNewTokens == 0 {
				return status.Error(codes.InvalidArgument, "max_new_tokens 0: the mock generates at least 1 token")
			}
			r.maxTokens = int(*sp.MaxNewTokens)
		}
		r.ignoreEOS, r.stopIDs, r.stops, r.n = sp.GetIgnoreEos(), sp.GetStopTokenIds(), sp.GetStop(), int(sp.GetN())
	}
	var err error
	if r.pd, err = s.w.sglangPD(req); err != nil {
		return err
	}
	return s.w.rpcGenerate(stream.Context(), &r, &sglangSender{id: r.id, stream: stream})
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
	if !s.w.healthyNow() {
		return &sglangpb.HealthCheckResponse{Healthy: false, Message: "unhealthy"}, nil
	}
	return &sglangpb.HealthCheckResponse{Healthy: true, Message: "OK"}, nil
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

// tokenizerPath is the tokenizer_path reported: the directory given, else the model name.
func (w *Worker) tokenizerPath() string {
	if w.rpc.vocab.dir != "" {
		return w.rpc.vocab.dir
	}
	return w.cfg.Model
}

func eosInt32(ids []uint32) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// flushCache empties the prefix cache once no request runs, as SGLang does: with timeout 0 it
// fails at once while requests run, else it waits up to timeout for them to drain.
func (w *Worker) flushCache(ctx context.Context, timeout time.Duration) (bool, string) {
	if w.engine == nil {
		return true, "Cache flushed."
	}
	deadline := time.Now().Add(timeout)
	for {
		if w.engine.flush() {
			return true, "Cache flushed."
		}
		if !time.Now().Before(deadline) {
			return false, "Cache not flushed: requests are running"
		}
		if !sleepUntilOr(w.done, ctx.Done(), time.Now().Add(10*time.Millisecond)) {
			return false, "Cache not flushed: cancelled"
		}
	}
}

// tokenizerChunk is the size of GetTokenizer's pieces.
const tokenizerChunk = 64 << 10

// sendTokenizer streams a zip of the tokenizer directory's regular files, sha256 (hex) on the
// last piece; without --tokenizer-path there is nothing to send.
func (w *Worker) sendTokenizer(stream grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	dir := w.rpc.vocab.dir
	if dir == "" {
		return status.Error(codes.Unimplemented, "mockworker serves a tokenizer only with --tokenizer-path")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		f, err := zw.Create(e.Name())
		if err == nil {
			_, err = f.Write(data)
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	if err := zw.Close(); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	archive := buf.Bytes()
	sum := sha256.Sum256(archive)
	for len(archive) > 0 {
		n := min(len(archive), tokenizerChunk)
		c := &commonpb.GetTokenizerChunk{Data: archive[:n]}
		if n == len(archive) {
			c.Sha256 = hex.EncodeToString(sum[:])
		}
		if err := stream.Send(c); err != nil {
			return err
		}
		archive = archive[n:]
	}
	return nil
}

// SubscribeKvEvents streams the worker's KV-cache events (Config.KVEvents); without them the
// worker answers Unimplemented, as an engine started without KV events.
func (s *sglangService) SubscribeKvEvents(req *commonpb.SubscribeKvEventsRequest, stream grpc.ServerStreamingServer[commonpb.KvEventBatch]) error {
	if s.w.kvpub == nil {
		return status.Error(codes.Unimplemented, "this worker publishes no KV events: start mockworker with --mode engine --kv-events-port")
	}
	return s.w.kvpub.subscribe(stream.Context(), req.GetStartSequenceNumber(), s.w.done, stream.Send)
}
