package grpcworker

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// decodeBoth decodes b as the dialect's GenerateResponse with genCodec into the reused
// target (as a stream does) and with proto.Unmarshal into a fresh message, and returns both
// Chunks; refOK is false when protobuf rejects b.
func decodeBoth(d Dialect, s *stream, b []byte) (got Chunk, gotErr error, want Chunk, refOK bool) {
	ref := &stream{done: s.done}
	switch d {
	case SGLang:
		if gotErr = (genCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &s.sgMsg); gotErr == nil {
			gotErr = s.fromSGLang(&s.sgMsg)
		}
		var m sglangpb.GenerateResponse
		if proto.Unmarshal(b, &m) != nil {
			return s.chunk, gotErr, Chunk{}, false
		}
		r := &sgRecv{}
		switch x := m.Response.(type) {
		case *sglangpb.GenerateResponse_Chunk:
			r.kind = kindChunk
			proto.Merge(&r.chunk, x.Chunk)
		case *sglangpb.GenerateResponse_Complete:
			r.kind = kindComplete
			proto.Merge(&r.complete, x.Complete)
		}
		if ref.fromSGLang(r) != nil {
			return s.chunk, gotErr, Chunk{}, false
		}
	case VLLM:
		if gotErr = (genCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &s.vlMsg); gotErr == nil {
			gotErr = s.fromVLLM(&s.vlMsg)
		}
		var m vllmpb.GenerateResponse
		if proto.Unmarshal(b, &m) != nil {
			return s.chunk, gotErr, Chunk{}, false
		}
		r := &vlRecv{}
		switch x := m.Response.(type) {
		case *vllmpb.GenerateResponse_Chunk:
			r.kind = kindChunk
			proto.Merge(&r.chunk, x.Chunk)
		case *vllmpb.GenerateResponse_Complete:
			r.kind = kindComplete
			proto.Merge(&r.complete, x.Complete)
		}
		if ref.fromVLLM(r) != nil {
			return s.chunk, gotErr, Chunk{}, false
		}
	}
	return s.chunk, gotErr, ref.chunk, true
}

func sameChunk(a, b Chunk) bool {
	if len(a.TokenIDs) == 0 && len(b.TokenIDs) == 0 {
		a.TokenIDs, b.TokenIDs = nil, nil
	}
	if len(a.OutputIDs) == 0 && len(b.OutputIDs) == 0 {
		a.OutputIDs, b.OutputIDs = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

func randomResponse(r *rand.Rand, d Dialect) []byte {
	ids := make([]uint32, r.IntN(5))
	for i := range ids {
		ids[i] = r.Uint32() >> r.IntN(32)
	}
	var m proto.Message
	switch d {
	case SGLang:
		x := &sglangpb.GenerateResponse{RequestId: "req-1"}
		if r.IntN(3) == 0 {
			c := &sglangpb.GenerateComplete{OutputIds: ids, FinishReason: "stop", PromptTokens: r.Uint32(), Index: uint32(r.IntN(2))}
			if r.IntN(2) == 0 {
				c.MatchedStop = &sglangpb.GenerateComplete_MatchedStopStr{MatchedStopStr: "\n"}
			}
			x.Response = &sglangpb.GenerateResponse_Complete{Complete: c}
		} else {
			c := &sglangpb.GenerateStreamChunk{TokenIds: ids, PromptTokens: r.Uint32(), CompletionTokens: uint32(r.IntN(100)),
				CachedTokens: uint32(r.IntN(3)), ReasoningTokens: uint32(r.IntN(2)), Index: uint32(r.IntN(2))}
			if r.IntN(4) == 0 {
				c.OutputLogprobs = &sglangpb.OutputLogProbs{TokenLogprobs: []float32{-0.5}} // not on the fast path
			}
			x.Response = &sglangpb.GenerateResponse_Chunk{Chunk: c}
		}
		m = x
	case VLLM:
		x := &vllmpb.GenerateResponse{}
		if r.IntN(3) == 0 {
			x.Response = &vllmpb.GenerateResponse_Complete{Complete: &vllmpb.GenerateComplete{OutputIds: ids, FinishReason: "length",
				Index: uint32(r.IntN(2)), MatchedStop: &vllmpb.GenerateComplete_MatchedTokenId{MatchedTokenId: 2}}}
		} else {
			x.Response = &vllmpb.GenerateResponse_Chunk{Chunk: &vllmpb.GenerateStreamChunk{TokenIds: ids, PromptTokens: r.Uint32(),
				CachedTokens: uint32(r.IntN(3)), Index: uint32(r.IntN(2))}}
		}
		m = x
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// The stream's decoder, fast path and general path, reusing its target from message to
// message, gives what protobuf gives each message decoded alone.
func TestCodecMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range dialects {
		s := &stream{done: make([]bool, 2)}
		for i := range 2000 {
			b := randomResponse(r, d)
			got, err, want, ok := decodeBoth(d, s, b)
			if !ok || err != nil || !sameChunk(got, want) {
				t.Fatalf("%v message %d: got %+v, %v; protobuf %+v (ok %v)", d, i, got, err, want, ok)
			}
		}
	}
}

// Unpacked token ids, a chunk split over two fields and unknown fields decode as protobuf
// decodes them.
func TestCodecWireVariants(t *testing.T) {
	var unpacked []byte
	for _, id := range []uint32{5, 6} {
		unpacked = protowire.AppendTag(unpacked, 1, protowire.VarintType)
		unpacked = protowire.AppendVarint(unpacked, uint64(id))
	}
	half := func(index uint32) []byte {
		var c []byte
		c = protowire.AppendTag(c, 8, protowire.VarintType)
		return protowire.AppendVarint(c, uint64(index))
	}
	msg := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendBytes(b, p)
		}
		return b
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), unpacked...), 99, protowire.VarintType), 1)
	for name, b := range map[string][]byte{"unpacked": msg(unpacked), "split": msg(unpacked, half(1)), "unknown field": msg(unknown)} {
		s := &stream{done: make([]bool, 2)}
		got, err, want, ok := decodeBoth(SGLang, s, b)
		if !ok || err != nil || !sameChunk(got, want) || len(got.TokenIDs) != 2 {
			t.Errorf("%s: got %+v, %v; protobuf %+v", name, got, err, want)
		}
	}
}

// FuzzDecodeGenerateResponse: whatever protobuf accepts, the stream's decoder accepts with
// the same result, also after decoding another message into the same target.
func FuzzDecodeGenerateResponse(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 16 {
		f.Add(randomResponse(r, SGLang), randomResponse(r, VLLM), true)
		f.Add(randomResponse(r, VLLM), randomResponse(r, SGLang), false)
	}
	f.Fuzz(func(t *testing.T, first, second []byte, sglang bool) {
		d := VLLM
		if sglang {
			d = SGLang
		}
		s := &stream{done: make([]bool, 1<<10)}
		for _, b := range [][]byte{first, second} {
			got, err, want, ok := decodeBoth(d, s, b)
			if ok && (err != nil || !sameChunk(got, want)) {
				t.Fatalf("%v %x: got %+v, %v; protobuf %+v", d, b, got, err, want)
			}
		}
	})
}

// Decoding a plain chunk into the stream's reused target and mapping it to a Chunk allocates
// nothing once the token slice has grown (grpc-go's transport still allocates per message;
// BenchmarkRecv measures the whole Recv).
func TestDecodeChunkAllocs(t *testing.T) {
	for _, d := range dialects {
		var m proto.Message = &vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Chunk{Chunk: &vllmpb.GenerateStreamChunk{
			TokenIds: []uint32{151643, 9}, PromptTokens: 4000, CompletionTokens: 17, CachedTokens: 3000}}}
		if d == SGLang {
			m = &sglangpb.GenerateResponse{RequestId: "chatcmpl-0123456789", Response: &sglangpb.GenerateResponse_Chunk{
				Chunk: &sglangpb.GenerateStreamChunk{TokenIds: []uint32{151643, 9}, PromptTokens: 4000, CompletionTokens: 17, CachedTokens: 3000}}}
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		data := mem.BufferSlice{mem.SliceBuffer(b)}
		s := &stream{done: make([]bool, 1)}
		decode := func() {
			var err error
			if d == SGLang {
				if err = (genCodec{}).Unmarshal(data, &s.sgMsg); err == nil {
					err = s.fromSGLang(&s.sgMsg)
				}
			} else if err = (genCodec{}).Unmarshal(data, &s.vlMsg); err == nil {
				err = s.fromVLLM(&s.vlMsg)
			}
			if err != nil || len(s.chunk.TokenIDs) != 2 || s.chunk.CachedTokens != 3000 {
				t.Fatalf("%v: %+v, %v", d, s.chunk, err)
			}
		}
		decode()
		if n := testing.AllocsPerRun(100, decode); n != 0 {
			t.Errorf("%v: %v allocations per decoded chunk, want 0", d, n)
		}
	}
}
