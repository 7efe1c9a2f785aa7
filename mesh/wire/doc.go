// Package wire holds the mesh's messages and their binary encoding, registered with gRPC as
// the codec "smg-mesh".
//
// # The format: protobuf, encoded with protowire
//
// Every message is a protobuf message (proto3 encoding: tagged fields, zero values omitted,
// lists as repeated fields), written and read with google.golang.org/protobuf/encoding/protowire.
// protoc is not available where this project builds, and generated code written by hand would
// be a second source of truth that nothing checks; so the field numbers are constants in
// codec.go, and schema_test.go writes the same schema as protobuf descriptors and checks that
// protobuf's own decoder reads what the codec writes and the other way round. The gRPC service
// descriptors that would otherwise be generated live in package mesh (grpc.go) and name this
// codec with grpc.ForceServerCodecV2 and grpc.ForceCodecV2, so nothing else in the process is
// affected. The message type is the gRPC method's: no type tag travels.
//
// # Evolution
//
// A mesh is upgraded one router at a time, so two versions talk to each other for a while.
// The decoder skips fields it does not know (a newer router's), of any wire type, at any
// depth; a missing field reads as its zero value (an older router's). So a new field takes a
// new number, and a number is never reused or retyped. Status and TreeKind values are closed
// sets (a router cannot guess a new status's precedence): an unknown value rejects the
// message, so a new one needs a new field. Token paths (TreeTokens) are 4-byte little-endian
// token ids (AppendTokens, Tokens), whatever the host's byte order.
//
// # Rejection
//
// Decode never panics on any input (a fuzz target proves it): a truncated field, a length
// beyond the message, a known field with the wrong wire type, a string over MaxString bytes,
// an unknown Status or TreeKind or a bool other than 0 or 1 are errors. Messages larger than
// Limits.MaxMessage are rejected before decoding. The codec counts every rejection
// (Codec.Rejected), which the mesh exports as smg_mesh_rejected_messages_total.
//
// # Concurrency and ownership
//
// Encode and Decode are safe for concurrent use. Decoded strings and byte slices are copies:
// a message owns its memory and does not alias the gRPC receive buffer, which gRPC recycles.
package wire
