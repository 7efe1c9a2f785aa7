package kvindex

import (
	"fmt"
	"runtime"
	"testing"
)

const (
	benchBlock   = 16   // vLLM's default block size
	benchPrompt  = 1024 // tokens of a 4 KB prompt (about 4 bytes of text per token)
	benchWorkers = 8
)

// fill stores chains of 64 blocks (a 4 KB prompt each), spread over the workers, until the
// index holds n (worker, block) pairs. Chain c's tokens are unique to it.
func fill(b testing.TB, x *Index, n int) [][]uint32 {
	var chains [][]uint32
	for c := 0; x.Stats().Blocks < n; c++ {
		toks := make([]uint32, benchPrompt)
		for i := range toks {
			toks[i] = uint32(c*benchPrompt + i)
		}
		h := x.Holder(fmt.Sprint(c % benchWorkers))
		blocks := min(benchPrompt/benchBlock, n-x.Stats().Blocks)
		ph := PrefixHashes(nil, toks, benchBlock)
		ev := StoredBlocks{Tokens: toks[:blocks*benchBlock], BlockSize: benchBlock}
		for _, p := range ph[:blocks] {
			ev.EngineHashes = append(ev.EngineHashes, engineHash(p))
		}
		if !x.ApplyStored(h, ev) {
			b.Fatal("store refused")
		}
		chains = append(chains, toks)
	}
	return chains
}

// BenchmarkIndexMemory reports the bytes per (worker, block) pair at 1,000,000 pairs: the
// tables' own size (table-B/block) and the heap growth while filling (heap-B/block).
func BenchmarkIndexMemory(b *testing.B) {
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x, _ := New(DefaultConfig())
		chains := fill(b, x, 1_000_000)
		chains = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := x.Stats()
		b.ReportMetric(float64(st.Bytes)/float64(st.Blocks), "table-B/block")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Blocks), "heap-B/block")
		runtime.KeepAlive(x)
		_ = chains
	}
}

// BenchmarkIndexApply applies one stored event of one block (extending a chain, as an engine
// reports a sequence's next block) and one removed event per op, at 1,000,000 pairs, so
// the index stays the same size: events/s counts both.
func BenchmarkIndexApply(b *testing.B) {
	x, _ := New(DefaultConfig())
	fill(b, x, 1_000_000)
	h := x.Holder("writer")
	toks := make([]uint32, benchBlock)
	root := StoredBlocks{EngineHashes: []uint64{1}, Tokens: toks, BlockSize: benchBlock}
	x.ApplyStored(h, root)
	ev := StoredBlocks{EngineHashes: []uint64{0}, HasParent: true, ParentHash: 1, Tokens: toks, BlockSize: benchBlock}
	removed := []uint64{0}
	b.ResetTimer()
	for i := range b.N {
		toks[0] = uint32(i)
		ev.EngineHashes[0] = uint64(i) + 2
		x.Update(func(tx Tx) {
			tx.Stored(h, ev)
			removed[0] = uint64(i) + 1
			if i > 0 {
				tx.Removed(h, removed)
			}
		})
	}
	b.ReportMetric(2*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkIndexMatch4KB matches a 4 KB prompt (64 blocks of 16 tokens) that one worker holds
// whole, at 1,000,000 pairs: every block is hashed and probed.
func BenchmarkIndexMatch4KB(b *testing.B) {
	x, _ := New(DefaultConfig())
	chains := fill(b, x, 1_000_000)
	toks := chains[len(chains)/2]
	depth := make([]uint32, x.Slots())
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if x.Match(toks, depth) != benchPrompt/benchBlock {
			b.Fatal("the prompt did not match whole")
		}
	}
}

// BenchmarkIndexMatchMiss matches a 4 KB prompt no worker holds: one block is hashed.
func BenchmarkIndexMatchMiss(b *testing.B) {
	x, _ := New(DefaultConfig())
	fill(b, x, 1_000_000)
	toks := make([]uint32, benchPrompt)
	for i := range toks {
		toks[i] = 1 << 31
	}
	depth := make([]uint32, x.Slots())
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if x.Match(toks, depth) != 0 {
			b.Fatal("matched")
		}
	}
}
