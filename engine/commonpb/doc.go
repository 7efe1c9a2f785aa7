// Package commonpb is the generated Go code of engine/proto/smg/grpc/common/common.proto
// (protobuf package smg.grpc.common): the messages SGLang's and vLLM's gRPC services share.
//
//   - GetTokenizerRequest / GetTokenizerChunk: the GetTokenizer stream, a zip archive of the
//     model's tokenizer files in chunks, the last one carrying the archive's sha256.
//   - SubscribeKvEventsRequest / KvEventBatch: the SubscribeKvEvents stream of KV-cache block
//     stores, removals and clears, numbered so that a subscriber can resume.
//   - FlushCacheRequest / FlushCacheResponse (SGLang's FlushCache), StartProfileRequest,
//     StopProfileRequest, ProfileResponse.
//   - ShmHandle, RemoteTensorHandle and Modality for multimodal tensors.
//
// The .proto file follows common.proto of github.com/lightseekorg/smg (crates/grpc_client/proto,
// commit 73da68ca9472bbc0ff5f63d31a8a21fbb8696359), wire for wire. Do not edit the .pb.go
// files: change the .proto file and run `make proto` (package engine describes the tools and
// the check that the committed code is current).
package commonpb
