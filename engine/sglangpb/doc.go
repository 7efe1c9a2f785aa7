// Package sglangpb is the generated Go code of
// engine/proto/sglang/grpc/scheduler/sglang_scheduler.proto: SGLang's scheduler service,
// sglang.grpc.scheduler.SglangScheduler, which an SGLang engine serves in gRPC mode. The
// gateway tokenizes and sends token ids; the engine streams token ids back.
//
// Methods (full names /sglang.grpc.scheduler.SglangScheduler/<Method>):
//
//	Generate                server stream of GenerateResponse: chunks, then one
//	                        GenerateComplete per sample (index), or a gRPC status
//	Embed                   embeddings of tokenized input
//	HealthCheck             whether the engine can serve
//	Abort                   stop a request by request_id
//	GetModelInfo            model path, tokenizer path, EOS ids, context and prompt limits,
//	                        the model's sampling defaults
//	GetServerInfo           server arguments, scheduler state, version
//	GetLoads                per-DP-rank running and waiting requests, KV usage, queues
//	FlushCache              empty the prefix cache (commonpb messages)
//	StartProfile            start the engine's profiler (commonpb messages)
//	StopProfile             stop it and write the trace (commonpb messages)
//	GetTokenizer            server stream of the tokenizer files as a zip (commonpb)
//	SubscribeKvEvents       server stream of KV-cache block events (commonpb)
//	LoadLoRAAdapter         load an adapter from a directory the engine reads
//	UnloadLoRAAdapter       unload it
//	ListLoadedLoRAAdapters  the adapters loaded
//
// The .proto file follows sglang_scheduler.proto of github.com/lightseekorg/smg
// (crates/grpc_client/proto, commit 73da68ca9472bbc0ff5f63d31a8a21fbb8696359), the definitions
// SGLang's gRPC server imports (the smg-grpc-proto package), wire for wire. Do not edit the
// .pb.go files: change the .proto file and run `make proto` (after `make tools`); package
// engine's TestGeneratedCodeIsCurrent fails when the committed code is not what the .proto
// files generate.
//
// # Sampling defaults
//
// SGLang's gRPC server passes every SamplingParams scalar to the engine as received, and the
// proto3 zero is not SGLang's default: temperature 0 is greedy, top_p 0, top_k 0 and
// repetition_penalty 0 are rejected. A request's SamplingParams starts from
// DefaultSamplingParams and takes the client's values over it. Unset max_new_tokens lets a
// request run to the context length (SGLang's HTTP default of 128 does not apply), so the
// gateway sets it from the client's max_tokens. On GenerateRequest itself, logprob_start_len
// -1 (SGLang's default) asks for no prompt logprobs; 0 asks for all of them. docs/grpc.md
// tabulates both engines' defaults.
package sglangpb
