// Package grpcworker is the gateway's client of one gRPC engine worker (grpc://host:port),
// speaking either engine's own service: SGLang's sglang.grpc.scheduler.SglangScheduler or
// vLLM's vllm.grpc.engine.VllmEngine (engine/sglangpb, engine/vllmpb). It hides the dialect
// behind one request/response model, so the data plane, the health checker and the load
// monitor each use one API for both engines.
//
//   - Dial opens a fixed pool of Config.Conns HTTP/2 connections (grpc.ClientConn) to the
//     worker and waits until they are ready; calls go round robin over them. Close closes
//     them all. ParseWorkerURL turns grpc://host:port[@RANK] into the dial address and the
//     data-parallel rank.
//   - Generate maps a GenerateRequest onto the dialect's proto, starting from the engine's
//     own sampling defaults (sglangpb/vllmpb DefaultSamplingParams: proto3 zeros are not
//     the engines' defaults) and overriding what the caller set, and returns a Stream of
//     dialect-neutral Chunks: new token ids per sample index, then one final chunk per
//     sample with its finish reason, matched stop, and token counts.
//   - HealthCheck, GetLoads (mapped onto the fields the HTTP load monitor reads, with
//     Loads.Report filling a worker.LoadReport), GetModelInfo, GetServerInfo, FlushCache
//     (SGLang only; vLLM's service has none: ErrUnsupported) and Abort.
//   - Classify maps every error to a Class that says what the gateway does with it.
//
// # Aborts
//
// An engine keeps generating for a caller that went away until it is told otherwise. When
// the context given to Generate ends (the call then ends CANCELED or DEADLINE_EXCEEDED,
// whichever side reports it first), or Stream.Close is called, before every sample completed
// and before the engine ended the call with another status, the client sends the engine
// exactly one Abort for the request id, on its own goroutine, detached from the ended context and
// bounded by Config.AbortTimeout. Client.Close waits for those Aborts before closing the
// connections.
//
// # Concurrency
//
// A Client is safe for concurrent use. A Stream is used by one goroutine (the relay), except
// that Close may be called from anywhere. Every call blocks on the network: the event loops
// never call them directly (docs/architecture.md); grpc-go's own goroutines and the caller's
// goroutine do the work. Generate does not queue: past Config.MaxStreams open streams it
// fails at once with ErrStreamLimit, so the gateway can choose another worker.
//
// # Buffers
//
// The client reads a GenerateRequest only during Generate (its slices are not kept). A
// Chunk returned by Recv, and every slice in it (TokenIDs, OutputIDs), belongs to the Stream
// and is valid until the next Recv or Close: the Stream decodes every message into the same
// reused buffers and lends them without copying. Results of the unary calls belong to the
// caller.
//
// Generate calls use their own codec (codec.go): a plain chunk (token ids, counts, index) is
// decoded by hand into the reused buffers, anything else by protobuf into reused messages,
// with protobuf's result in every case (TestCodecMatchesProto, FuzzDecodeGenerateResponse).
// Decoding and mapping a chunk allocate nothing (TestDecodeChunkAllocs); what a Recv still
// allocates is grpc-go's transport, 3 small objects per message (BenchmarkRecv).
//
// # Errors
//
// Classify gives the class; Class.HTTPStatus, Retryable and Fault what to do with it;
// Message the text a client may see (for ClientError, the engine's own message).
//
//	class         gRPC codes and client errors                        HTTP  retry  breaker fault
//	Unavailable   UNAVAILABLE; ErrConnect, ErrClosed, ErrUnhealthy     503   yes    yes
//	Backpressure  RESOURCE_EXHAUSTED; ErrStreamLimit                    429   yes    no
//	ClientError   INVALID_ARGUMENT, OUT_OF_RANGE, FAILED_PRECONDITION,  400   no     no
//	              NOT_FOUND, ALREADY_EXISTS; ErrBadRequest
//	Canceled      CANCELED; context.Canceled                            499   no     no
//	Timeout       DEADLINE_EXCEEDED; context.DeadlineExceeded           504   no     yes
//	Unsupported   UNIMPLEMENTED; ErrUnsupported                         501   no     no
//	Internal      INTERNAL, UNKNOWN, DATA_LOSS, ABORTED,                502   no     yes
//	              PERMISSION_DENIED, UNAUTHENTICATED, any other error;
//	              ErrTruncated, ErrBadResponse
//
// "retry" means on another worker, and only before the first token reached the client.
//
// # Dialect differences
//
//   - SGLang's data_parallel_rank is a plain int32: an unset rank is sent as 0, as every
//     SGLang client sends it; vLLM's is optional and left unset.
//   - SGLang takes one request id per Abort call, vLLM several.
//   - Sampling.Seed exists only in vLLM's proto; SGLang's gRPC SamplingParams has no seed.
//   - JSONObject is vLLM's json_object; for SGLang the schema {"type":"object"}.
//   - skip_special_tokens is sent false to both: the gateway detokenizes with the client's
//     setting.
//   - SGLang's GetLoads reports num_waiting_uncached_tokens; vLLM's does not
//     (RankLoad.WaitingTokens -1, as the HTTP monitor's "not reported").
//
// # Fleet
//
// A Fleet holds the gateway's clients: one per engine address and service, shared by the
// data-parallel ranks registered there (grpc://host:port@rank), dialled on first use and
// closed by Sync once no registered worker names the address. Its Probe, Loads, Admin,
// ProbeAddress and DiscoverModels are what the health checker, load monitor, admin routes
// and discovery call for gRPC workers.
package grpcworker
