// Package vllmpb is the generated Go code of engine/proto/vllm/grpc/engine/vllm_engine.proto:
// vLLM's engine service, vllm.grpc.engine.VllmEngine, which a vLLM engine's gRPC server
// serves. The gateway sends token ids (or text) and the engine streams token ids back.
//
// Methods (full names /vllm.grpc.engine.VllmEngine/<Method>):
//
//	Generate           server stream of GenerateResponse: chunks, then one GenerateComplete
//	                   per sample (index), or a gRPC status
//	Embed              embeddings of tokenized input
//	HealthCheck        whether the engine can serve
//	Abort              stop requests by request_ids
//	GetModelInfo       model path, tokenizer path, EOS ids, context and prompt limits, the
//	                   model's sampling defaults
//	GetServerInfo      server state, KV transfer configuration, data-parallel size
//	GetLoads           per-DP-rank running and waiting requests, KV usage
//	GetTokenizer       server stream of the tokenizer files as a zip (commonpb)
//	SubscribeKvEvents  server stream of KV-cache block events (commonpb)
//
// vLLM's service has no FlushCache, StartProfile or StopProfile (SGLang's has).
//
// The .proto file follows vllm_engine.proto of github.com/lightseekorg/smg
// (crates/grpc_client/proto, commit 73da68ca9472bbc0ff5f63d31a8a21fbb8696359), the definitions
// vLLM's gRPC server imports (the smg-grpc-proto package), wire for wire. Do not edit the
// .pb.go files: change the .proto file and run `make proto` (after `make tools`); package
// engine's TestGeneratedCodeIsCurrent fails when the committed code is not what the .proto
// files generate.
//
// # Sampling defaults
//
// vLLM's gRPC server maps an unset temperature to 1.0 and a zero top_p, repetition_penalty or
// n to 1, but passes skip_special_tokens and spaces_between_special_tokens as received (false
// unless sent), and an unset max_tokens lets a request run to the context length (vLLM's
// Python default of 16 does not apply). A request's SamplingParams starts from
// DefaultSamplingParams, which sends every engine default explicitly, and takes the client's
// values over it. docs/grpc.md tabulates both engines' defaults.
package vllmpb
