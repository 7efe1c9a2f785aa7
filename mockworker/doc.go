// Package mockworker implements mock SGLang and vLLM engines for tests and benchmarks: a
// fleet of workers, each on its own port, that answer the OpenAI and SGLang generation APIs
// with well-formed responses, report their load, and fail on demand. It is the gateway's
// black-box oracle (it imports no gateway package) and the benchmarks' null backend.
//
// # Starting
//
//	f, err := mockworker.Start(mockworker.Config{Count: 3}) // free ports on 127.0.0.1
//	defer f.Close()
//	f.URLs() // ["http://127.0.0.1:41235", ...]; f.Workers()[i].ID(), .Served(), .Configure()
//
// cmd/mockworker wraps this library; it prints one line per worker once listening:
//
//	mockworker: worker 0 listening on http://127.0.0.1:18000 (model M, dialect sglang)
//
// # Routes
//
// Every response carries x-mock-worker-id (the worker's "host:port", or WorkerIDPrefix+index)
// and echoes the request's x-request-id. Unknown paths answer 404, known paths with the wrong
// method 405, both with the OpenAI error envelope {"error":{"message","type","param","code"}}.
//
//	GET  /health, /health_generate  200 (503 when marked unhealthy)
//	GET  /v1/models                 {"object":"list","data":[{"id":M,"object":"model","created":T,"owned_by":"mockworker"}]}
//	POST /v1/chat/completions       "messages"; "max_completion_tokens" or "max_tokens"
//	POST /v1/completions            "prompt" (string, strings, token ids); "max_tokens"
//	POST /generate                  "text" and/or "input_ids"; "sampling_params.max_new_tokens"; "rid"
//	GET  /v1/loads                  the load report below
//	GET, POST /admin/config         runtime faults (below)
//
// A generation produces the requested number of tokens, or Config.OutputTokens (default 16),
// and always stops for "length". Output token i is the word vocabulary[i%10] ("the ", "mock ",
// ...). Non-streamed answers are OpenAI's chat.completion and text_completion objects with
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
// OpenAI does; then "data: [DONE]\n\n". Config.TokenInterval (--token-interval-ms) paces the
// events: token i (from 1) is written at start+i×interval, against absolute deadlines so the
// pacing does not drift; the usage chunk and [DONE] go with the last token.
//
// # Load report
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
// In the instant engine R is the number of generation requests in progress on the worker
// (delayed, hanging or streaming), W, U, T, H and Q are 0, K is Config.KVTokens and M is
// Config.MaxRunning.
//
// # Faults
//
// Per request, the header x-mock-fault holds a comma-separated list: "status=NNN" answers
// NNN (400..599) with an error body of type "mock_fault"; "hang" never answers (the request
// is held until the client hangs up or the fleet closes). An unknown item answers 400.
//
// Per worker, POST /admin/config with a JSON object changes the keys it names and answers the
// whole configuration: {"status":503} fails every generation request with 503 (0 clears it),
// {"delay_ms":N} holds every generation answer N ms before its first byte, {"healthy":false}
// makes /health answer 503. GET /admin/config reads it; Worker.Configure sets it in-process.
// Faults apply to the generation routes only; /health, /v1/models and /v1/loads keep working.
//
// # HTTP servers
//
// Two implementations serve the same handlers (Config.Server, --server): gnet (default) and
// fasthttp. gnet is the cheaper per request (figures below) and also notices a client that
// hangs up during a "hang" fault; fasthttp cannot and holds such a request until Close.
// The gnet server is a small HTTP/1.1 implementation: keep-alive, pipelining (answers in
// order), Content-Length and chunked request bodies, Expect: 100-continue, HTTP/1.0
// clients; header block at most 64 KiB, body at most 64 MiB.
//
// # Concurrency and buffer ownership
//
// A Fleet and its Workers are safe for concurrent use. A worker's runtime configuration is
// an atomic pointer swapped whole; counters are atomics. With gnet, instant answers are
// rendered and written on the event loop that read the request, into a per-connection
// buffer (one write for all pipelined answers of a read); delayed, hanging and paced answers
// run on one goroutine each and write with AsyncWrite, and the connection reads no further
// request until that answer is complete. With fasthttp, fasthttp's per-connection goroutine
// renders the answer and a stream is written from its body-stream writer. In both, request
// views (method, path, headers, body) are valid only during Worker.handle; a stream copies
// what it needs into its own answer. Close closes the listeners, cuts every wait short,
// drops the connections and waits for every goroutine the fleet started.
//
// # Cost
//
// Measured with the mock alone on one core and wrk on the other (docs/benchmarks-mockworker.md,
// mockworker/scripts/nullbench.sh): a small non-streamed chat completion costs 7–10 µs CPU
// with gnet (100k–145k requests per second per core) against 9–12 µs with fasthttp; a 16-token
// instant stream 12.5–14.5 µs against 30–45 µs. Worker.handle, the part that is ours (parse
// and render), takes under 1 µs and allocates nothing (TestHandleAllocs, BenchmarkHandle); the
// rest is system calls.
package mockworker
