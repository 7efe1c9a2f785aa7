// Package loadgen drives load against OpenAI-compatible endpoints and reports serving
// statistics the way SGLang's bench_serving and vLLM's benchmark_serving do.
//
// It is a black-box client: it imports no gateway package, so it can judge the gateway, a
// mock engine or a staging cluster alike.
//
// # Use
//
//	cfg := loadgen.DefaultConfig()
//	cfg.BaseURL, cfg.Model = "http://127.0.0.1:30000/v1", "m"
//	cfg.Workload, cfg.MaxConcurrency, cfg.NumRequests = loadgen.WorkloadRaw, 64, 100000
//	res, err := loadgen.Run(ctx, cfg)
//	regressions := loadgen.Compare(baseline, res, 0.05)
//	loadgen.WriteDiffTable(os.Stdout, loadgen.Diff(baseline, res, 0.05)) // every metric side by side
//
// # Workloads
//
// random (bench_serving's random dataset), shared-prefix (its generated-shared-prefix),
// multi-turn (users × rounds; each turn carries the whole conversation so far, including the
// server's previous answers; MultiTurnConfig.Stagger shortens the users' first conversations so
// that they are not in step), mixed-size (distinct prompts of two sizes: by default 10% of
// them 7,680 tokens, 30× the others' 256, so a few requests cost an engine 30× the prefill;
// no shared prefix, so where a request lands matters more than cache affinity) and raw (one
// tiny fixed chat request, for measuring proxy overhead). Prompt text, lengths, order and open-loop arrival gaps are deterministic in
// Config.Seed; only the server's answers and timing vary between runs. Prompts are words from
// a small vocabulary of single-token English words, so a prompt of n words is about n tokens.
//
// Every item has a session: its conversation (multi-turn), prefix group (shared-prefix) or
// prompt (random, mixed-size). With Config.SessionHeader set (e.g. "X-SMG-Routing-Key"), requests carry
// it, so sticky routing can be benchmarked; Config.Headers adds fixed headers.
//
// # Prefill-decode disaggregation (PD)
//
// With Config.PD (--pd-prefill, --pd-decode, --pd-bootstrap-port) loadgen plays SGLang's
// mini load balancer instead of calling BaseURL: the baseline a gateway's PD mode is
// measured against. Per request it takes the next prefill and the next decode worker (round
// robin over each list), adds SGLang's "bootstrap_host" (the prefill URL's host),
// "bootstrap_port" (PDConfig.BootstrapPort, or null) and "bootstrap_room" (random, below
// 2^63) to the body, and sends it to both at once. The decode's answer is measured like any
// other; the prefill's is read whole and checked, and a failed prefill fails the request as
// "prefill_error" in Result.StatusCounts (Result.Workers counts decode workers only). Each
// client state keeps a goroutine for its prefill leg for the whole run, so a request costs
// two channel hand-offs, not a goroutine; the body with the bootstrap fields is spliced
// into a per-client buffer (the workload's body up to its closing brace, the fields, '}')
// and shared by both requests: PD mode allocates nothing more per request either (a test).
// Only SGLang's protocol is spoken (vLLM's sequential kv_transfer_params handover is not).
//
// # Load
//
// Closed loop (RequestRate 0): MaxConcurrency clients, each sending its next request when the
// previous one ended. Open loop: requests start at Poisson or constant arrival times at
// RequestRate, whatever the server does, with at most MaxConcurrency in flight. The run ends
// after NumRequests, after Duration, or at whichever comes first.
//
// # Measurements
//
// TTFT is the time to the first event that carries generated text (role-only chat chunks do
// not count); ITL the gaps between such events; TPOT (e2e − TTFT) / (output tokens − 1) per
// request; end-to-end latency from sending to the last byte. Without streaming, TTFT equals
// end-to-end latency and ITL and TPOT are empty. Token counts come from the server's usage
// report (chat/completions: usage, asked for in streams with stream_options.include_usage;
// /generate: meta_info); without one, prompt tokens fall back to the workload's word count and
// output tokens to the number of content events. Percentiles interpolate linearly (numpy's
// default); see Summary.
//
// # Concurrency
//
// Run owns everything it creates. Each client goroutine owns one clientState (request,
// response, JSON parser, SSE reader and a recorder of samples) and uses it for one request at
// a time; recorders are merged after all clients stopped, so recording takes no lock. Shared
// per-run state is a few atomics (request budget, progress counters) and the multi-turn
// ready queue (a channel).
//
// # Buffers
//
// Request bodies are built once per workload item before the run (multi-turn: once per
// turn), shared read-only by all clients and sent with fasthttp's SetBodyRaw without a copy.
// Response bytes are read into per-client buffers reused across requests; the SSE reader's
// events and the parser's strings are views valid until the next event. In steady state a
// non-streamed closed-loop request allocates nothing, and a streamed one only fasthttp's
// per-response body-stream wrapper (4 objects), nothing per event: both are tests with
// testing.AllocsPerRun. The open loop adds a channel hand-off per request.
package loadgen
