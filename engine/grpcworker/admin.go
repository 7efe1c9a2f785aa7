package grpcworker

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
)

// AdminCall answers one of the engines' HTTP admin routes from their gRPC service, in the
// shape the HTTP route has, so the gateway's admin routes (GET /get_loads, POST
// /flush_cache, GET /get_model_info, /get_server_info, /health_generate) treat gRPC workers
// as HTTP ones. rank is the worker's data-parallel rank (-1: the whole engine): /v1/loads
// then reports that rank only. A route without a gRPC counterpart answers 404.
//
//	GET  /v1/loads         GetLoads, SGLang's /v1/loads document
//	POST /flush_cache      FlushCache, 200 "Cache flushed."
//	GET  /get_model_info   GetModelInfo, SGLang's /get_model_info fields
//	GET  /get_server_info  GetServerInfo: SGLang's server arguments and scheduler info, with
//	                       its version and token capacity
//	GET  /health_generate  HealthCheck (the engines' gRPC health check runs a generation)
func (c *Client) AdminCall(ctx context.Context, rank int, method, path string) (status int, body []byte, contentType string, err error) {
	route := method + " " + path
	var doc any
	switch route {
	case "GET /v1/loads":
		l, err := c.GetLoads(ctx)
		if err != nil {
			return 0, nil, "", err
		}
		doc = loadsDocument(l, rank)
	case "POST /flush_cache":
		if err := c.FlushCache(ctx, 0); err != nil {
			if errors.Is(err, ErrUnsupported) {
				return http.StatusNotImplemented, []byte(err.Error()), "text/plain; charset=utf-8", nil
			}
			return 0, nil, "", err
		}
		return http.StatusOK, []byte("Cache flushed."), "text/plain; charset=utf-8", nil
	case "GET /get_model_info":
		mi, err := c.GetModelInfo(ctx)
		if err != nil {
			return 0, nil, "", err
		}
		doc = map[string]any{
			"model_path": mi.ModelPath, "tokenizer_path": mi.TokenizerPath, "is_generation": mi.IsGeneration,
			"model_type": mi.ModelType, "architectures": mi.Architectures, "has_image_understanding": mi.SupportsVision,
			"served_model_name": mi.ModelID, "max_context_length": mi.MaxContextLength, "max_req_input_len": mi.MaxReqInputLen,
			"eos_token_ids": mi.EOSTokenIDs, "vocab_size": mi.VocabSize,
		}
	case "GET /get_server_info":
		si, err := c.GetServerInfo(ctx)
		if err != nil {
			return 0, nil, "", err
		}
		info := map[string]any{}
		maps.Copy(info, si.ServerArgs)
		maps.Copy(info, si.SchedulerInfo)
		info["version"], info["server_type"] = si.Version, si.ServerType
		info["max_total_num_tokens"], info["dp_size"] = si.MaxTotalNumTokens, max(si.DataParallelSize, 1)
		info["active_requests"], info["is_paused"], info["uptime_seconds"] = si.ActiveRequests, si.IsPaused, si.UptimeSeconds
		if si.KVConnector != "" {
			info["kv_connector"], info["kv_role"] = si.KVConnector, si.KVRole
		}
		doc = info
	case "GET /health_generate":
		if err := c.HealthCheck(ctx); err != nil {
			if errors.Is(err, ErrUnhealthy) {
				return http.StatusServiceUnavailable, []byte(err.Error()), "text/plain; charset=utf-8", nil
			}
			return 0, nil, "", err
		}
		return http.StatusOK, nil, "text/plain; charset=utf-8", nil
	default:
		return http.StatusNotFound, []byte(route + " has no counterpart in the engine's gRPC service"), "text/plain; charset=utf-8", nil
	}
	body, err = json.Marshal(doc)
	return http.StatusOK, body, "application/json", err
}

// loadsDocument is l as SGLang's GET /v1/loads document: every rank, or only rank when it is
// not negative.
func loadsDocument(l Loads, rank int) map[string]any {
	ranks := []map[string]any{}
	for _, r := range l.Ranks {
		if rank >= 0 && r.DPRank != rank {
			continue
		}
		x := map[string]any{
			"dp_rank": r.DPRank, "num_running_reqs": r.RunningRequests, "num_waiting_reqs": r.WaitingRequests,
			"num_total_reqs": r.TotalRequests, "num_used_tokens": r.UsedTokens, "max_total_num_tokens": r.MaxTotalTokens,
			"token_usage": r.TokenUsage, "gen_throughput": r.GenThroughput, "cache_hit_rate": r.CacheHitRate,
			"utilization": r.Utilization, "max_running_requests": r.MaxRunning,
		}
		if r.WaitingTokens >= 0 {
			x["num_waiting_uncached_tokens"] = r.WaitingTokens
		}
		ranks = append(ranks, x)
	}
	return map[string]any{"timestamp": l.Timestamp, "version": l.Version, "dp_rank_count": l.DPRankCount, "loads": ranks}
}
