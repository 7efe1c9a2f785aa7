package main

import (
	"bytes"
	"io"
	"sort"
	"strings"
)

// metricHelp is the HELP text of every series family the gateway exports. VictoriaMetrics
// writes each family's "# HELP name" and "# TYPE name kind" lines (metrics.ExposeMetadata)
// but keeps no text; writeWithHelp adds it.
var metricHelp = map[string]string{
	// Requests (telemetry: one record per generation request).
	"smg_router_requests_total":              "Generation requests by router type (http, grpc), backend (regular, pd), model, endpoint and streaming.",
	"smg_router_request_duration_seconds":    "Generation requests' end-to-end latency at the gateway, from the request read to the answer's last byte.",
	"smg_router_request_errors_total":        "Failed generation requests by error_type (no_workers, timeout, backend_error, validation_error, internal_error, rate_limited, client_closed).",
	"smg_router_ttft_seconds":                "Time to first token of streamed answers: from the request read to the first body chunk relayed to the client.",
	"smg_router_tpot_seconds":                "Time per output token of streamed answers: (end - first token) / (completion tokens - 1).",
	"smg_router_generation_duration_seconds": "Streamed answers' time from the first token to the last.",
	"smg_router_tokens_total":                "Prompt (token_type=input) and completion (output) tokens, from the engines' usage or counted by the gateway on gRPC workers.",
	"smg_worker_retries_total":               "Generation requests tried again on another worker, by worker type and endpoint.",
	"smg_admission_rejections_total":         "Generation requests admission refused, by reason (queue_full, queue_timeout, rate_limited).",
	"smg_worker_retries_exhausted_total":     "Generation requests that failed with no retry left (every retry used, or no other worker to try), by worker type and endpoint.",
	"smg_worker_retry_backoff_seconds":       "Pauses taken before a retry, by attempt (1: the pause before the first retry).",
	"smg_http_rate_limit_total":              "Admission decisions on generation requests when --max-concurrent-requests or --rate-limit-tokens-per-second limits them: result allowed or rejected.",
	"smg_telemetry_records_dropped_total":    "Request records dropped because the telemetry queue was full (their metrics and log lines are missing).",
	"smg_http_requests_total":                "HTTP requests by path and status code (a status appears once a request got it).",
	"smg_http_request_duration_seconds":      "HTTP requests' duration at the gateway, by path.",
	"smg_router_upstream_responses_total":    "Workers' answers by worker and outcome class.",
	"smg_grpc_prompt_tokens_total":           "Prompt tokens of the gRPC engines' answers.",
	"smg_grpc_cached_prompt_tokens_total":    "Prompt tokens the gRPC engines found in their prefix caches.",
	"smg_build_info":                         "Always 1; the labels are smg --version's fields.",
	// Workers.
	"smg_worker_requests_active":               "Requests in flight per worker.",
	"smg_worker_pool_size":                     "Registered workers by type, connection mode and model.",
	"smg_worker_health":                        "1 when the worker is healthy, 0 otherwise.",
	"smg_worker_health_checks_total":           "Health probes by worker type and result.",
	"smg_worker_cb_state":                      "Circuit breaker state per worker: 0 closed, 1 open, 2 half-open.",
	"smg_worker_cb_transitions_total":          "Circuit breaker transitions per worker, by from and to state.",
	"smg_worker_stalls_total":                  "Workers found stalled (accepting requests, answering none).",
	"smg_worker_selection_total":               "Picks by worker type, connection mode, model and policy.",
	"smg_registry_events_dropped_total":        "Registry events dropped because its queue was full.",
	"smg_load_monitor_polls_total":             "Load polls by source and outcome.",
	"smg_engine_metrics_dropped_samples_total": "Engine samples not re-exported because of the --engine-metrics series bound.",
	// Policies.
	"smg_router_picker_build_failures_total":                   "Route pickers that could not be built from a snapshot.",
	"smg_cache_aware_policy_branch_total":                      "cache_aware decisions by branch.",
	"smg_prefix_hash_policy_branch_total":                      "prefix_hash decisions by branch.",
	"smg_consistent_hashing_policy_branch_total":               "consistent_hashing decisions by branch.",
	"smg_manual_policy_branch_total":                           "manual policy decisions by branch.",
	"smg_manual_policy_cache_entries":                          "Routing keys the manual policy remembers.",
	"smg_routing_key_source_total":                             "Keyed requests by where the key came from (rid, header).",
	"smg_cache_tree_chars":                                     "Characters in cache_aware's approximate tree, per model.",
	"smg_cache_tree_tokens":                                    "Tokens in cache_aware's token tree, per model.",
	"smg_cache_tree_tenants":                                   "Workers holding prefixes in cache_aware's tree, per model.",
	"smg_cache_placement_entries":                              "Entries of cache_aware's placement map (--cache-index hash), per model.",
	"smg_cache_aware_event_mode_picks_total":                   "cache_aware picks made on the engines' KV events.",
	"smg_cache_aware_event_mode_predicted_cached_tokens_total": "Prompt tokens the KV events foretold cached on the picked worker.",
	"smg_cache_aware_event_mode_prompt_tokens_total":           "Prompt tokens of the picks made in event mode.",
	"smg_cache_aware_tree_predicted_cached_tokens_total":       "Prompt tokens the token tree foretold cached on the picked worker.",
	"smg_cache_aware_tree_prompt_tokens_total":                 "Prompt tokens of the picks made on the token tree.",
	// KV events.
	"smg_kv_events_received_total":   "KV-cache event batches received, per worker.",
	"smg_kv_events_applied_total":    "KV-cache events applied to the block index, per worker.",
	"smg_kv_events_dropped_total":    "KV-cache events dropped, per worker.",
	"smg_kv_events_gaps_total":       "Gaps in a worker's KV event sequence.",
	"smg_kv_events_replayed_total":   "KV-cache event batches replayed after a gap.",
	"smg_kv_events_reconnects_total": "KV event stream reconnections, per worker.",
	"smg_kv_events_cleared_total":    "Times a worker's blocks were cleared (restarted engine, lost sequence).",
	"smg_kv_index_blocks":            "Blocks in the KV block index, per model.",
	"smg_kv_index_bytes":             "Bytes the KV block index holds.",
	"smg_kv_index_evicted_total":     "Blocks evicted from the KV block index at its bound.",
	"smg_kv_index_ignored_total":     "KV events the index ignored.",
	// Discovery.
	"smg_discovery_workers_discovered":    "Workers discovery currently desires.",
	"smg_discovery_registrations_total":   "Workers discovery registered.",
	"smg_discovery_deregistrations_total": "Workers discovery removed.",
	"smg_discovery_sync_duration_seconds": "Duration of discovery's reconcile passes.",
	// Mesh.
	"router_mesh_peer_connections":             "Open mesh sync streams.",
	"router_mesh_peer_reconnects_total":        "Mesh sync stream reconnections.",
	"router_mesh_sync_round_duration_seconds":  "Duration of mesh sync rounds.",
	"smg_mesh_member_status_changes_total":     "Mesh member status changes, by status.",
	"smg_mesh_rejected_connections_total":      "Mesh connections refused.",
	"smg_mesh_rejected_messages_total":         "Mesh messages refused.",
	"smg_mesh_stale_entries_total":             "Mesh entries dropped as older than their floor.",
	"smg_mesh_tombstones_collected_total":      "Mesh tombstones collected.",
	"smg_mesh_tree_deltas_applied_total":       "Cache tree deltas applied from peers.",
	"smg_mesh_tree_deltas_dropped_total":       "Cache tree deltas dropped.",
	"smg_mesh_tree_deltas_unknown_total":       "Cache tree deltas for unknown trees.",
	"smg_mesh_tree_repairs_total":              "Cache tree repairs started.",
	"smg_mesh_tree_repairs_folded_total":       "Cache tree repairs folded into one already running.",
	"smg_mesh_tree_repair_pages_served_total":  "Cache tree repair pages served to peers.",
	"smg_mesh_tree_repair_pages_applied_total": "Cache tree repair pages applied.",
}

// writeWithHelp writes the exposition text b to w, with the HELP text of metricHelp on
// every "# HELP name" line that has none.
func writeWithHelp(w io.Writer, b []byte) error {
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/8)
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i+1], b[i+1:]
		} else {
			b = nil
		}
		name, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte("# HELP "))
		if text := metricHelp[string(name)]; ok && text != "" {
			out.WriteString("# HELP ")
			out.Write(name)
			out.WriteByte(' ')
			out.WriteString(text)
			out.WriteByte('\n')
			continue
		}
		out.Write(line)
	}
	_, err := out.WriteTo(w)
	return err
}

// familiesWithoutHelp lists the families of the exposition text b whose HELP line has no text.
func familiesWithoutHelp(b string) []string {
	var missing []string
	for _, line := range strings.Split(b, "\n") {
		if name, ok := strings.CutPrefix(line, "# HELP "); ok && !strings.Contains(name, " ") {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}
