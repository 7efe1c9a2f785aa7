// Package engine is the home of the inference engines' own gRPC interfaces, which the gateway
// speaks to grpc:// workers: the .proto files under engine/proto and the Go packages generated
// from them.
//
//   - engine/sglangpb: SGLang's scheduler service, sglang.grpc.scheduler.SglangScheduler.
//   - engine/vllmpb: vLLM's engine service, vllm.grpc.engine.VllmEngine.
//   - engine/commonpb: the messages both share (package smg.grpc.common): the tokenizer
//     download, KV-cache events, cache flushing, profiling, tensor transports.
//
// The .proto files follow the definitions the engines' gRPC servers import (the smg-grpc-proto
// package of github.com/lightseekorg/smg; each file's header names the upstream commit) with
// the same package, service, method, message and field names, numbers and types, so the
// generated clients interoperate with the real engines.
//
// # Generation
//
// `make tools` installs protoc (Debian's protobuf-compiler) and builds the pinned
// protoc-gen-go and protoc-gen-go-grpc (hack/proto/tools.sh); `make proto` regenerates the
// packages (hack/proto/gen.sh). The generated code is committed; TestGeneratedCodeIsCurrent
// regenerates it into a temporary directory and fails when anything differs, so an edit to a
// .proto file without `make proto`, or an edit to generated code, does not pass `make test`.
//
// # Sampling defaults
//
// A proto3 scalar left at zero is sent as nothing and read as 0, which is not what the engines
// default to (SGLang rejects top_p 0; vLLM keeps special tokens when skip_special_tokens is
// false). Requests start from sglangpb.DefaultSamplingParams or vllmpb.DefaultSamplingParams
// and override what the client set; docs/grpc.md tabulates the defaults.
package engine
