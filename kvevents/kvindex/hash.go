package kvindex

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Seed is the XXH3 seed of both hashes, the spec product's (its kv_index crate).
const Seed = 1337

// nativeLE reports whether []uint32 is laid out as little-endian bytes in memory, so that a
// block's tokens hash in place without a copy.
var nativeLE = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// ContentHash is the position-independent hash of one block's tokens: XXH3-64 with Seed over
// the token ids as consecutive 4-byte little-endian integers, as the spec product computes it
// (compute_content_hash), so the gateway names a request's blocks as the index does.
func ContentHash(tokens []uint32) uint64 {
	if len(tokens) == 0 {
		return xxh3.HashSeed(nil, Seed)
	}
	if nativeLE {
		return xxh3.HashSeed(unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens)), Seed)
	}
	return contentHashPortable(tokens)
}

// contentHashPortable is ContentHash for any byte order (it allocates for long blocks).
func contentHashPortable(tokens []uint32) uint64 {
	var stack [256]byte
	buf := stack[:0]
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, t)
	}
	return xxh3.HashSeed(buf, Seed)
}

// PrefixHash chains a block's content hash onto the prefix hash of the blocks before it:
// XXH3-64 with Seed over prev and content as 8-byte little-endian integers. The first block's
// prefix hash is its content hash. A prefix hash therefore names a block together with every
// block before it, so one map lookup per block answers "does this worker hold the prompt up
// to here" without positions.
func PrefixHash(prev, content uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], prev)
	binary.LittleEndian.PutUint64(b[8:], content)
	return xxh3.HashSeed(b[:], Seed)
}

// PrefixHashes appends the prefix hash of every full block of tokens to dst. A partial last
// block is left out: engines cache whole blocks only.
func PrefixHashes(dst []uint64, tokens []uint32, blockSize int) []uint64 {
	if blockSize <= 0 {
		return dst
	}
	var prev uint64
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		c := ContentHash(tokens[i : i+blockSize])
		if i == 0 {
			prev = c
		} else {
			prev = PrefixHash(prev, c)
		}
		dst = append(dst, prev)
	}
	return dst
}
