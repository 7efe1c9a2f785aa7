package grpcworker

import (
	"errors"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// genCodec is the codec of Generate calls. Requests are marshaled as grpc-go's proto codec
// does; responses are decoded into the stream's reused sgRecv/vlRecv, so a steady stream of
// chunks allocates nothing in decoding: the oneof wrapper is never built (the client reads
// the case from the field number), the chunk message is reused, its token_ids keep their
// capacity, and GenerateResponse.request_id (SGLang's, the client's own id echoed) is
// skipped instead of copied into a new string.
type genCodec struct{}

var protoCodec = encoding.GetCodecV2(protoenc.Name)

// Name is the content-subtype: "application/grpc+proto", the same codec as the default
// "application/grpc" to every gRPC server.
func (genCodec) Name() string { return protoenc.Name }

func (genCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (genCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData() // nothing of it is kept: proto copies what it decodes
	} else {
		b = data.Materialize()
	}
	switch r := v.(type) {
	case *sgRecv:
		if fastResponse(b, 2, sglangChunkFields, &r.fast) {
			r.kind = kindFast
			return nil
		}
		return decodeOneof(b, 2, 3, &r.kind, &r.chunk, &r.complete, &r.chunk.TokenIds, &r.complete.OutputIds)
	case *vlRecv:
		if fastResponse(b, 1, vllmChunkFields, &r.fast) {
			r.kind = kindFast
			return nil
		}
		return decodeOneof(b, 1, 2, &r.kind, &r.chunk, &r.complete, &r.chunk.TokenIds, &r.complete.OutputIds)
	}
	return protoCodec.Unmarshal(data, v)
}

// Which message of the GenerateResponse oneof the last decode found.
const (
	kindNone uint8 = iota
	kindChunk
	kindComplete
	kindFast // a plain chunk, decoded by fastChunk into fast
)

// sgRecv is the decode target of an SGLang Generate stream.
type sgRecv struct {
	kind     uint8
	fast     fastFields
	chunk    sglangpb.GenerateStreamChunk
	complete sglangpb.GenerateComplete
}

// vlRecv is the decode target of a vLLM Generate stream.
type vlRecv struct {
	kind     uint8
	fast     fastFields
	chunk    vllmpb.GenerateStreamChunk
	complete vllmpb.GenerateComplete
}

var errBadWire = errors.New("malformed GenerateResponse")

var mergeOpts = proto.UnmarshalOptions{Merge: true}

// decodeOneof decodes a GenerateResponse whose oneof fields are chunkNum and completeNum
// into chunk or complete, with protobuf's semantics (the last oneof field seen wins, a
// repeated one merges); other top-level fields (request_id) are skipped. chunkIDs and
// completeIDs are the messages' id fields, whose capacity a reset keeps.
func decodeOneof(b []byte, chunkNum, completeNum protowire.Number, kind *uint8, chunk, complete proto.Message,
	chunkIDs, completeIDs *[]uint32) error {
	*kind = kindNone
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadWire
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == chunkNum || num == completeNum) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errBadWire
			}
			b = b[n:]
			var err error
			if num == chunkNum {
				if *kind != kindChunk {
					resetKeeping(chunk, chunkIDs)
					*kind = kindChunk
				}
				err = mergeOpts.Unmarshal(v, chunk)
			} else {
				if *kind != kindComplete {
					resetKeeping(complete, completeIDs)
					*kind = kindComplete
				}
				err = mergeOpts.Unmarshal(v, complete)
			}
			if err != nil {
				return err
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errBadWire
		}
		b = b[n:]
	}
	return nil
}

// resetKeeping clears m but keeps the capacity of its id field ids (one of m's) for the next
// decode.
func resetKeeping(m proto.Message, ids *[]uint32) {
	keep := (*ids)[:0]
	proto.Reset(m)
	*ids = keep
}

// fastFields is a GenerateStreamChunk with only what a relay reads: the common case, which
// fastChunk decodes without protobuf's reflection (whose packed-field decoding allocates a
// new slice every time).
type fastFields struct {
	ids                                          []uint32
	prompt, completion, cached, reasoning, index uint32
}

// chunkFieldNums are a dialect's GenerateStreamChunk field numbers the fast path knows;
// reasoning 0 is none (no field has number 0).
type chunkFieldNums struct{ ids, prompt, completion, cached, index, reasoning protowire.Number }

var (
	sglangChunkFields = chunkFieldNums{ids: 1, prompt: 2, completion: 3, cached: 4, index: 8, reasoning: 9}
	vllmChunkFields   = chunkFieldNums{ids: 1, prompt: 2, completion: 3, cached: 4, index: 7}
)

// fastResponse decodes b when it is a GenerateResponse holding one chunk (field chunkNum)
// with known fields only, besides fields it skips (request_id); false sends b to the general
// decoder, which gives protobuf's answer for everything else.
func fastResponse(b []byte, chunkNum protowire.Number, nums chunkFieldNums, f *fastFields) bool {
	var chunk []byte
	seen := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == chunkNum {
			if seen || typ != protowire.BytesType {
				return false
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			chunk, seen, b = v, true, b[n:]
			continue
		}
		if num != 1 || typ != protowire.BytesType { // only SGLang's request_id may come beside it
			return false
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return seen && fastChunk(chunk, nums, f)
}

// fastChunk decodes a GenerateStreamChunk into f (reusing f.ids), false when it holds a
// field other than nums or one of an unexpected wire type.
func fastChunk(b []byte, nums chunkFieldNums, f *fastFields) bool {
	*f = fastFields{ids: f.ids[:0]}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == nums.ids {
			switch typ {
			case protowire.BytesType: // packed
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return false
				}
				b = b[n:]
				for len(v) > 0 {
					x, m := protowire.ConsumeVarint(v)
					if m < 0 {
						return false
					}
					f.ids = append(f.ids, uint32(x))
					v = v[m:]
				}
			case protowire.VarintType: // unpacked, also valid proto3
				x, m := protowire.ConsumeVarint(b)
				if m < 0 {
					return false
				}
				f.ids = append(f.ids, uint32(x))
				b = b[m:]
			default:
				return false
			}
			continue
		}
		if typ != protowire.VarintType {
			return false
		}
		var dst *uint32
		switch num {
		case nums.prompt:
			dst = &f.prompt
		case nums.completion:
			dst = &f.completion
		case nums.cached:
			dst = &f.cached
		case nums.index:
			dst = &f.index
		case nums.reasoning:
			dst = &f.reasoning
		default:
			return false
		}
		x, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return false
		}
		*dst = uint32(x)
		b = b[m:]
	}
	return true
}
