// Package mockworker implements mock SGLang and vLLM engines for tests and benchmarks: a
// fleet of workers, each on its own port, that answer the OpenAI and SGLang generation APIs
// with well-formed responses, report their load, and fail on demand. It is the gateway's
// black-box oracle (it imports no gateway package) and the benchmarks' null backend.
//
// # Starting
//
//	cfg := mockworker.DefaultConfig() // every field set: a zero field means zero
//	cfg.Count = 3                     // free ports on 127.0.0.1
//	f, err := mockworker.Start(cfg)
//	defer f.Close()
//	f.URLs() // ["http://127.0.0.1:41235", ...]; f.Workers()[i].ID(), .Served(), .Configure()
//
// cmd/mockworker wraps this library (flags named after the Config fields: --host, --port,
// --count, --model, --dialect, --mode, --output-tokens, --token-interval-ms, --kv-tokens,
// --block-size, --max-running, --prefill-tps, --chunked-prefill-size, --decode-base-ms,
// --decode-per-req-ms, --decode-factors, --time-scale, --seed, --server, --event-loops, --worker-id-prefix,
// --role, --bootstrap-port, --kv-engine-id, --kv-transfer-timeout-ms, --request-log,
// --protocol, --tokenizer-path).
// It prints one line per worker once listening (a PD role adds ", role R, bootstrap port P"):
//
//	mockworker: worker 0 listening on http://127.0.0.1:18000 (model M, dialect sglang)
//
// # Modes
//
// Instant mode (the default) is the null backend: every answer is ready at once, or, with
// Config.TokenInterval (--token-interval-ms), a stream's token i (from 1) is written at
// start + i×interval. Engine mode (--mode engine) runs a model of a continuous-batching
// engine per worker (engine.go, kvcache.go):
//
//   - At most MaxRunning sequences run; the rest wait in a first-come-first-served queue.
//     Admission also needs KV-cache room for the prompt plus the maximum output (reserved
//     whole, so nothing is ever preempted); a request that could never fit gets 400.
//   - Each step computes up to PrefillChunk uncached prompt tokens (chunked prefill, oldest
//     first) and one token for every sequence past its prefill, and lasts
//     DecodeBase + DecodePerReq × (sequences producing a token) + prefill tokens / PrefillTPS,
//     so inter-token latency grows with the batch. A sequence's first token comes at the end
//     of the step that completes its prefill.
//   - The KV cache holds KVTokens tokens in blocks of BlockSize. A full block of prompt tokens
//     is named by a hash chained over every token before it (vLLM's scheme), so a prompt
//     reuses exactly the blocks of a previously served prompt with the same prefix; those
//     tokens are not computed again and are reported as cached_tokens. A fully cached prompt
//     still computes its last token. Unreferenced blocks stay cached until evicted, least
//     recently released first.
//   - Prompt tokens are the prompt text cut into 4-byte pieces followed by the token ids
//     given instead of text; output tokens are words (below).
//   - Steps follow one another on absolute deadlines (a step starts when the previous one
//     ended in model time however late the goroutine woke), so the pacing does not drift.
//     TimeScale (--time-scale) runs model time that many times faster than the wall clock.
//     The engine itself is a pure state machine over model time, tested on a fake clock.
//   - DecodeFactors (--decode-factors 6=2,7=2) makes a heterogeneous fleet: worker i's
//     DecodeBase and DecodePerReq are multiplied by its factor (a slower accelerator's
//     decode step); prefill is unchanged.
//   - RequestLog (--request-log FILE) is a debug output for routing studies of real runs: one
//     JSON line per finished sequence (worker, arrival on the wall clock, prompt and cached
//     tokens, the engine's running, waiting and awaiting-first-token state at its arrival,
//     TTFT) and per /v1/loads answer (requestlog.go has the fields). smgbench keeps it per
//     routing-quality row with --quality-request-logs DIR.
//
// # Routes
//
// Every response carries x-mock-worker-id (the worker's "host:port", or WorkerIDPrefix+index)
// and echoes the request's x-request-id. Unknown paths answer 404, known paths with the wrong
// method 405, both with the OpenAI error envelope {"error":{"message","type","param","code"}}.
//
//	GET  /health                    200 (503 when unhealthy)
//	GET  /health_generate           the same (dialect sglang only: vLLM has no such route)
//	GET  /v1/models                 {"object":"list","data":[{"id":M,"object":"model","created":T,"owned_by":"mockworker","max_model_len":K}]}
//	GET  /model_info, /get_model_info  SGLang's {"model_path":M,"tokenizer_path":M,"is_generation":true,...}
//	POST /v1/chat/completions       "messages"; "max_completion_tokens" or "max_tokens"
//	POST /v1/completions            "prompt" (string, strings, token ids); "max_tokens"
//	POST /generate                  "text" and/or "input_ids"; "sampling_params.max_new_tokens"; "rid"
//	GET  /v1/loads                  the load report below (dialect sglang only)
//	GET  /metrics                   Prometheus text, the dialect's names (below)
//	GET, POST /admin/config         runtime faults (below)
//	GET  /admin/trace               {"last_traceparent":"..."}: the traceparent header of the
//	                                last generation request that had one ("" before any)
//	GET  /get_server_info           SGLang's {"server_args":{...},"scheduler_info":{...},...}
//	POST /flush_cache               200 "Cache flushed." (engine mode: empties the prefix cache; 400 while requests run)
//	POST /v1/embeddings, /v1/rerank, /rerank, /v1/classify, /classify, /v1/tokenize,
//	     /tokenize, /v1/detokenize, /detokenize, /v1/responses, /v1/messages
//	                                small answers of each API's shape carrying "mock_route"
//	                                (the path served) and "model"; "stream": true on
//	                                /v1/responses and /v1/messages answers a short SSE stream;
//	                                x-mock-fault status=NNN applies (passthrough.go)
//
// Both dialects serve the three generation routes, streamed and not. A generation produces
// the requested number of tokens, or Config.OutputTokens (default 16), and always stops for
// "length". Output token i is the word vocabulary[i%10] ("the ", "mock ", ...). Non-streamed
// answers are OpenAI's chat.completion and text_completion objects with
// usage{prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details.cached_tokens},
// and SGLang's {"text", "meta_info":{"id","prompt_tokens","completion_tokens","cached_tokens",
// "finish_reason":{"type":"length","length":N}}}. A body that is not a JSON object, lacks the
// prompt field or asks for fewer than 1 or more than 2^20 tokens gets 400.
//
// Prompt tokens are counted as the UTF-8 bytes of the prompt text divided by 4, rounded up
// (chat: every message's text content in order; completions: "prompt"; /generate: "text"),
// plus one per token id given instead of text. No chat template is added.
//
// # Streaming
//
// With "stream": true the answer is text/event-stream in HTTP chunked encoding, one
// "data: {json}\n\n" event per token: chat.completion.chunk events with delta.content (the
// first also has delta.role), text_completion events with choices[0].text, and /generate
// events with the cumulative text so far and meta_info (finish_reason null until the last).
// The last token's event carries finish_reason "length"; on the OpenAI routes a usage chunk
// ("choices":[] and usage) follows when the request set stream_options.include_usage, as
// OpenAI does; then "data: [DONE]\n\n". A stream's headers are sent at once when its first
// token has to wait (gnet; fasthttp sends them with the first token).
//
// # Load report and metrics
//
// GET /v1/loads answers SGLang's shape, which is what the gateway's load monitor parses:
//
//	{"timestamp":"2026-01-02T15:04:05Z","version":"mock","dp_rank_count":1,
//	 "loads":[{"dp_rank":0,"num_running_reqs":R,"num_waiting_reqs":W,"num_total_reqs":R+W,
//	   "num_used_tokens":U,"max_total_num_tokens":K,"token_usage":U/K,"gen_throughput":T,
//	   "cache_hit_rate":H,"utilization":R/M,"max_running_requests":M,
//	   "num_waiting_uncached_tokens":Q}],
//	 "aggregate":{"total_running_reqs":R,"total_waiting_reqs":W,"total_reqs":R+W,
//	   "avg_token_usage":U/K,"avg_throughput":T,"avg_utilization":R/M}}
//
// In engine mode R and W are the batch and the queue, U the KV tokens held by running
// sequences (reserved blocks × BlockSize), T the output tokens per second over the last
// second of model time, H the cumulative share of prompt tokens found in the prefix cache,
// and Q the waiting prompts' tokens not in the cache. In instant mode R is the generation
// requests in progress (delayed, hanging, streaming) and W, U, T, H, Q are 0.
//
// GET /metrics serves, each series labelled model_name: for sglang, sglang:num_queue_reqs,
// sglang:num_running_reqs, sglang:token_usage, sglang:gen_throughput, sglang:cache_hit_rate;
// for vllm, vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc
// (a fraction, as in vLLM), vllm:prefix_cache_hits_total and vllm:prefix_cache_queries_total
// (tokens), and the histograms vllm:time_to_first_token_seconds and
// vllm:inter_token_latency_seconds with vLLM's buckets, in wall-clock seconds (model time
// divided by TimeScale), filled in engine mode.
//
// # Prefill-decode roles
//
// Config.Role (--role) makes a fleet the prefill or the decode half of prefill-decode
// disaggregation (PD), in either dialect and mode, so that a gateway's PD mode can be tested:
// a gateway bug shows as an error at the mock, never as a silent success. The default role
// "" is a unified engine that ignores every PD field (its path is unchanged and allocation
// free). The prefill publishes a record of the KV it computed (a fingerprint of the prompt's
// text and token ids, its prompt token count and, for vLLM, its engine id and block ids) on
// its fleet's KV rendezvous; the decode claims it there before generating.
//
//   - Config.BootstrapPort (--bootstrap-port; the command's default is 8998, SGLang's
//     --disaggregation-bootstrap-port; the library's 0 picks a free port, read it from
//     Fleet.BootstrapPort): a prefill fleet's rendezvous listens on Host:BootstrapPort, one
//     listener shared by its workers. A decode asks this port when a request's
//     bootstrap_port is null.
//   - Config.KVEngineID (--kv-engine-id): the remote_engine_id a vLLM prefill reports;
//     default the worker id (with Count > 1 and an id given, worker i reports "<id>-<i>").
//   - Config.KVTransferTimeout (--kv-transfer-timeout-ms, default 10 s): how long a decode
//     waits for its record, and how long a rendezvous keeps a record, claimed or not (a
//     sweeper drops it then: Fleet.KVEntries counts what is held).
//
// SGLang dialect, all three generation routes. The gateway sends the same body to both
// workers at once, with "bootstrap_host" (the prefill worker's host), "bootstrap_port" (an
// integer or null) and "bootstrap_room" (an integer in 0..2^63-1). Both roles answer 400
// when one is missing or mistyped. The prefill also answers 400 when bootstrap_host is not
// its listening host, bootstrap_port is neither null nor its rendezvous port, or the room was
// already published; otherwise it computes the prompt (engine mode: its prefill in the
// engine model; instant: nothing), publishes the record under the room at its first token,
// and answers that one token like any request (streamed if asked). The decode asks
// bootstrap_host:(bootstrap_port, or its own BootstrapPort when null) for the room, waiting
// up to KVTransferTimeout for the prefill (it may come first), then generates the answer
// with the prompt counted as computed (engine mode: no prefill cost, the whole prompt
// reported as cached_tokens). A decode's failure is a 500 with the error type
// "kv_transfer_error": "KV transfer mismatch for bootstrap_room N: the prefill worker ...
// saw a different prompt", "... already claimed by another decode" (a room serves one
// request), "KV transfer for bootstrap_room N timed out after 10s: no prefill arrived",
// "... cannot reach the prefill's bootstrap server at H:P" (refused, or not a rendezvous).
//
// vLLM dialect, /v1/chat/completions and /v1/completions, the sequential protocol of vLLM's
// NixlConnector proxy. The prefill request carries "kv_transfer_params" with
// "do_remote_decode": true, "stream" false (or absent) and max tokens 1 (chat: whichever of
// max_completion_tokens and max_tokens the mock reads first, so send both as 1) and no
// stream_options (vLLM refuses them without stream; its proxy deletes them); anything else
// is a 400 naming the problem. The prefill answers one token plus a top-level
//
//	"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,
//	  "remote_engine_id":E,"remote_block_ids":[...],"remote_host":H,"remote_port":P,
//	  "remote_request_id":X,"tp_size":1}
//
// with H the worker's host, P its rendezvous port, X a fresh transfer id and one block id per
// BlockSize prompt tokens. The decode request is the client's own (streamed or not, its own
// maximum) with that object as its kv_transfer_params, unchanged; the decode needs
// do_remote_prefill true and every remote_* field, fetches X from H:P and also checks
// remote_engine_id and remote_block_ids against the record. Errors as for SGLang, naming
// "remote_request_id X". Each dialect speaks only its own protocol: the other's fields
// alone are a 400 that says so.
//
// Encode role (EPD: encode-prefill-decode). Config.Role "encode" (--role encode) is the
// encoder of a multimodal request, run by the gateway before the PD legs; it refuses (400) a
// request without media (a chat content part of type image_url, input_audio, video_url,
// audio_url, image, audio, video or input_image, or SGLang's image_data, audio_data,
// video_data). SGLang: the request carries the encode worker's own bootstrap_host,
// bootstrap_port and bootstrap_room (checked like a prefill's); it publishes an embedding
// record (the prompt's fingerprint) on its fleet's rendezvous under the room and answers one
// token. The prefill request then also carries "encode_bootstrap_host",
// "encode_bootstrap_port" (null: 8998) and "encode_bootstrap_room"; the prefill claims that
// record before it computes (waiting up to its KVTransferTimeout) and publishes its own KV
// only then, failing the request with a 500 of type "encoder_transfer_error" when the
// record never comes, describes another prompt or cannot be fetched. Config.RequireEncode
// (--require-encode) makes a prefill a language-only one: a multimodal request without the
// handshake is a 400. vLLM: the encode request is the client's with "stream" false and max
// tokens 1 and without kv_transfer_params (400 otherwise), answered with one token; vLLM's
// encoder cache travels through its EC connector, which the mock does not model, so the PD
// legs carry nothing more. An EPD prefill's claims are in Worker.PDTransfers under keys
// "encode:ROOM".
//
// Each PD worker counts its requests in Worker.PDStats and in /metrics as
// mockworker_pd_requests_total{model_name,role,result} with result ok, rejected (400),
// timeout, mismatch or unreachable; a decode also remembers its last 1024 fetches (key,
// rendezvous address, result) in Worker.PDTransfers.
//
// The rendezvous protocol (rendezvous.go has the grammar). A decode fleet keeps one TCP
// connection per rendezvous address, opened as an HTTP/1.1 upgrade (GET /kv with
// Upgrade: mockworker-kv/1, answered 101), then multiplexes every claim over it as lines:
// "claim ID WAIT_MS KEY" answered "ID ok RECORD" (the record as JSON; the key is claimed),
// "ID timeout" when none came within WAIT_MS, "ID claimed" when already claimed, "ID closing"
// when the prefill fleet closed meanwhile (the decode reports that as unreachable, "the
// prefill fleet is closing"); "cancel ID" withdraws a claim whose decode gave up. Claims are
// pipelined and answered in any order, and each side writes everything queued in one system
// call; a waiting claim costs the rendezvous a runtime timer, not a goroutine. Anything that
// does not answer the upgrade with 101 (a worker's HTTP port, say) is reported as "not a
// mockworker KV rendezvous", a refused or lost connection as unreachable, and a rendezvous
// that leaves a claim unanswered 2 s past its wait as a timeout. Against one HTTP request per
// claim (the first cut) this halved each mock's CPU per PD request and took the instant pair
// from ~7,500 to ~13,500 requests per second on one core (docs/benchmarks-mockworker.md,
// "PD pair").
// A decode waits on its own goroutine (the gnet event loop never blocks), and a decode
// waiting when its fleet closes, or whose client hangs up, gives up at once.
//
// # Faults
//
// Per request, the header x-mock-fault holds a comma-separated list: "status=NNN" answers
// NNN (400..599) with an error body of type "mock_fault"; "reset" closes the connection at
// once with a TCP reset; "hang" never answers (the request is held until the client hangs up
// or the fleet closes); "abort-after=N" closes the connection after N tokens (a stream gets
// N events and no end, a non-streamed request no answer; N past the end completes normally);
// "slow-ttft=MS" holds the first token MS ms longer (a stream's headers go at once);
// "body-sha256" answers 200 {"body_sha256":"<hex>","body_bytes":N} for the body as received,
// without generating (a gateway's forwarding of a large body is checked with it). An
// unknown item answers 400.
//
// Per worker, POST /admin/config with a JSON object changes the keys it names and answers the
// whole configuration (GET reads it; Worker.Configure sets it in-process):
//
//	"status": N            fail every generation request with N (0 clears it)
//	"delay_ms": N          hold every generation answer N ms before its first byte
//	"healthy": false       /health answers 503
//	"failure_rate": F      fail that fraction of generation requests (repeatable: the draw
//	                       hashes Config.Seed, the worker and the request's number)
//	"failure_status": N    the status of those failures (default 503)
//	"prefill_multiplier": F, "decode_multiplier": F
//	                       stretch the engine's prefill and decode times (instant mode: the
//	                       wait for a paced stream's first token and the gaps after it)
//	"health_flap_ms": N    /health alternates healthy and unhealthy every N ms
//	"kv_events_drop": N    keep the next N KV-event batches off the PUB stream (they stay in
//	                       the replay buffer): a subscriber sees a gap (one-shot)
//	"abort_after": N       cut every gRPC Generate stream after N tokens with no end
//	"kv_events_restart": true
//	                       restart the event sequence at 0 with an empty replay buffer and
//	                       end open SubscribeKvEvents streams, as a restarted engine (one-shot)
//	"lose_prefix_cache": true
//	                       engine mode: empty the prefix cache now, even while requests run
//	                       (AllBlocksCleared); with kv_events_restart, an engine restart as
//	                       a gateway sees it (one-shot)
//
// Faults apply to the generation routes; /health (but for its own keys), /v1/models,
// /v1/loads and /metrics keep answering. Fault delays are wall-clock time (not scaled).
//
// # KV-cache events
//
// With Config.KVEvents (--kv-events-port P, engine mode), worker i publishes its cache's
// changes as vLLM and SGLang do with KV events on (kvevents.go): a ZMQ PUB socket on P+i
// sends [topic "", 8-byte big-endian sequence from 0, msgpack batch] once per engine step
// that stored or evicted blocks; a ROUTER socket on P+Count+i answers a replay request (the
// first sequence wanted, 8 bytes big-endian) with every buffered batch from it and the end
// marker -1 (Config.KVEventsReplay batches, default 10000). Batches are tagged maps
// ({"ts","events","data_parallel_rank"}, newer vLLM, the default) or tagged arrays ([ts,
// events], SGLang; --kv-events-encoding array). A newly computed prompt block is a
// BlockStored (block hashes: the mock's chained block hashes; parent: the block before it;
// token_ids: the block's tokens, text as 4-byte little-endian pieces; block_size), an
// evicted one a BlockRemoved, a flush (POST /flush_cache, gRPC FlushCache) AllBlocksCleared.
// With --protocol grpc the same batches stream on SubscribeKvEvents (from the batch after
// start_sequence_number, 0: live; a start the buffer no longer holds is OutOfRange); without
// KV events the RPC is Unimplemented.
//
// # gRPC
//
// Config.Protocol "grpc" (--protocol grpc) serves the engine's own gRPC service instead of
// HTTP, on the same ports and over the same model (instant or engine mode, with its
// continuous batching, chunked prefill, prefix cache, load report and admin configuration):
// SGLang's sglang.grpc.scheduler.SglangScheduler (--dialect sglang) or vLLM's
// vllm.grpc.engine.VllmEngine (--dialect vllm), generated in engine/sglangpb and
// engine/vllmpb (the mock shares the wire with the gateway: it imports those packages and
// package tokenizer, nothing else of the gateway's). Worker.URL is "grpc://host:port", and
// the command's ready line names it. Plaintext only. The prefill and decode roles work as on HTTP, with the PD fields where each
// engine's proto carries them (grpc_pd.go); there is no gRPC encode role. The
// port also answers HTTP/1.1 (a connection is gRPC when it opens with the HTTP/2 preface) on
// the routes that configure and observe a worker: /admin/config, /health, /health_generate,
// /v1/models, /model_info, /get_model_info, /v1/loads, /metrics, /get_server_info,
// /flush_cache; any other path, generation included, is a 404 that names gRPC.
//
//	Generate       a server stream. The prompt is the request's token ids (tokenized input;
//	               text input is refused); the prefix cache keys on them in blocks of
//	               BlockSize. max_new_tokens / max_tokens is the maximum (unset: OutputTokens;
//	               0 is refused). With stream set, one chunk per token as the model produces
//	               it (token_ids with that one id, prompt_tokens, cumulative
//	               completion_tokens, cached_tokens, index), then a complete with no
//	               output_ids; without, one complete with every output id. The complete has
//	               finish_reason "length", "stop" (matched_token_id for EOS and stop_token_ids,
//	               matched_stop_str for stop strings) or "abort", and the counts. n samples (at
//	               most 64) run as n sequences and end with one complete each, by index.
//	HealthCheck    healthy, false while the admin configuration says unhealthy.
//	Abort          ends the request's stream with a complete "abort" and frees its sequence
//	               and KV in the engine model at once (vLLM: every id listed; SGLang's answer
//	               says whether the id was running).
//	GetModelInfo   model path and served name (Model), tokenizer path, max context length and
//	               max_total_num_tokens (KVTokens), max_req_input_len (KVTokens - 1), vocabulary
//	               size and EOS ids.
//	GetServerInfo  SGLang: server_args and scheduler_info structs, active requests, uptime,
//	               server type "grpc"; vLLM: active requests, uptime, "vllm-grpc".
//	GetLoads       the load report of /v1/loads from the engine's live state (running, waiting,
//	               KV tokens used, throughput, cache hit rate, waiting uncached tokens); SGLang
//	               adds the aggregate and, when included ("memory", "queues", "all"), those
//	               sections; vLLM answers the core section only.
//	FlushCache     SGLang: empties the prefix cache once nothing runs (timeout_s 0 fails at
//	               once while requests run, as SGLang does; else it waits up to timeout_s).
//	GetTokenizer   a zip of TokenizerPath's files in 64 KiB pieces, sha256 on the last;
//	               Unimplemented without a tokenizer.
//	others         Unimplemented (SubscribeKvEvents, Embed, profiling, LoRA).
//
// Output ids are deterministic. Without a tokenizer, output token i is
// PositionTokenBase + i%10 (the id of vocabulary word i%10; GetModelInfo reports no EOS) and
// a sample runs to its maximum. With Config.TokenizerPath (--tokenizer-path DIR, a model
// directory) package tokenizer encodes AnswerText ("the mock cat sat on a mat and ran off ")
// once at start: the answer is those ids, then the first of the model's EOS ids (finish
// "stop"), unless the maximum comes first ("length"); with ignore_eos the ids repeat up to the
// maximum. stop_token_ids stop at the first output id listed; stop strings at the first token
// whose decoded output contains one; the stopping token is part of the output, and a stop on
// the last allowed token is a stop (vLLM checks stops before the length).
//
// Faults map onto gRPC: the x-mock-fault metadata key takes the header's items. status=NNN
// ends the call with the code an engine would use (503 and 502 UNAVAILABLE, 429
// RESOURCE_EXHAUSTED, 400 INVALID_ARGUMENT, 500 INTERNAL, 504 DEADLINE_EXCEEDED, ...);
// "abort-after=N" sends N chunks and ends the stream with INTERNAL (a stream cut mid-way; N
// past the end completes); "hang" sends nothing until the client cancels or the fleet closes;
// "reset" is UNAVAILABLE at once; "slow-ttft=MS" waits MS before the request enters the
// engine; body-sha256 is refused. The admin configuration (POST /admin/config on the same
// port, or Worker.Configure) applies as on HTTP: status, failure_rate, delay, healthy, multipliers, kv_usage. Every call that ends, by
// fault, abort or cancellation, leaves the engine and the worker's Active count.
//
// # HTTP servers
//
// Two implementations serve the same handlers (Config.Server, --server): gnet (default) and
// fasthttp. gnet is the cheaper per request (below) and notices a client that hangs up while
// its answer waits (hang, delay, slow-ttft, engine queue), which then leaves the engine;
// fasthttp notices only when it next writes to it. The gnet server is a small HTTP/1.1
// implementation: keep-alive, pipelining (answers in order), Content-Length and chunked
// request bodies, Expect: 100-continue, HTTP/1.0 clients; header block at most 64 KiB, body
// at most 64 MiB.
//
// # Concurrency and buffer ownership
//
// A Fleet and its Workers are safe for concurrent use. A worker's runtime configuration is
// an atomic pointer swapped whole; counters are atomics. In engine mode one goroutine per
// worker drives its engine under a mutex shared with submissions, cancellations and load
// reports, and publishes tokens to a per-request sink the writer of the answer waits on.
// With gnet, instant answers are rendered and written on the event loop that read the
// request, into a per-connection buffer (one write for all pipelined answers of a read);
// answers that wait run on one goroutine each and write with AsyncWrite, and the connection
// reads no further request until that answer is complete. With fasthttp, fasthttp's
// per-connection goroutine renders the answer and a stream is written from its body-stream
// writer (a cut stream from a hijacked connection). In both, request views (method, path,
// headers, body) are valid only during Worker.handle; an answer that waits copies what it
// needs. Close closes the listeners, cuts every wait short, drops the connections and waits
// for every goroutine the fleet started.
//
// # Cost
//
// Measured with the mock alone on one core and wrk on the other (docs/benchmarks-mockworker.md,
// mockworker/scripts/nullbench.sh): a small non-streamed chat completion costs 7–10 µs CPU
// with gnet (100k–145k requests per second per core) against 9–12 µs with fasthttp; a 16-token
// instant stream 12.5–14.5 µs against 30–45 µs. Worker.handle, the part that is ours (parse
// and render), takes under 1 µs and allocates nothing (TestHandleAllocs, BenchmarkHandle); the
// rest is system calls. The engine mode leaves that path untouched (measured against the first
// cut in one run). An engine step costs about 12 ns per sequence; at real time the clients of
// 1, 16 and 64 concurrent streams saw inter-token latencies of 8.11, 9.74 and 14.39 ms against
// the model's 8.10, 9.60 and 14.40 ms (BenchmarkEngineStreams). A streamed 128-token gRPC
// Generate (1024-token prompt, instant mode) costs the mock process 260-420 µs CPU, about
// 2-3 µs per chunk (cmd/mockworker BenchmarkGRPCProcessStream; BenchmarkGRPCStream measures
// client and server in one process: 470-690 µs and 2,100 allocations for both ends; measured
// on a shared 2-core machine at load 10, so the spread is the neighbours).
package mockworker
