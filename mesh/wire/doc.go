// Package wire holds the mesh's messages and their binary encoding, registered with gRPC as
// the codec "smg-mesh".
//
// # Why a hand-written codec
//
// protoc is not available where this project builds, and generated protobuf code written by
// hand would be a second source of truth that nothing checks. The messages are few and flat,
// so they are encoded directly: every message starts with a one-byte type tag, followed by its
// fields in a fixed order as unsigned varints, length-prefixed byte strings and
// count-prefixed lists. The gRPC service descriptors that would otherwise be generated live in
// package mesh (grpc.go) and name this codec with grpc.ForceServerCodecV2 and
// grpc.ForceCodecV2, so nothing else in the process is affected.
//
// # Rejection
//
// Decode never panics on any input (a fuzz target proves it): a truncated field, a count or
// length beyond what the rest of the message could hold, a string over MaxString bytes, an
// unknown tag or trailing bytes are errors. Messages larger than Limits.MaxMessage are rejected
// before decoding. The codec counts every rejection (Codec.Rejected), which the mesh exports as
// smg_mesh_rejected_messages_total.
//
// # Concurrency and ownership
//
// Encode and Decode are safe for concurrent use. Decoded strings and byte slices are copies:
// a message owns its memory and does not alias the gRPC receive buffer, which gRPC recycles.
package wire
