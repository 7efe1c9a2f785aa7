package kvevents

import (
	"runtime"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/kvevents/kvindex"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/policytest"
)

// BenchmarkEventModePick is cache_aware's whole pick in event mode for a 4 KB prompt (1,024
// token ids, 64 blocks of 16) over 8 workers, against an index of 1,000,000 (worker, block)
// pairs: hashing the prompt's blocks, the index's match, the lookup of blocks sent but not
// yet reported, the choice, and the record of the blocks sent. path=hit: one worker reported
// the whole prompt; path=miss: nobody holds it (load decides).
func BenchmarkEventModePick(b *testing.B) {
	const workers, block, promptTokens, pairs = 8, 16, 1024, 1_000_000
	fleet := policytest.NewFleet(b, workers, "m")
	idx, _ := kvindex.New(kvindex.DefaultConfig())
	var chains [][]uint32
	for c := 0; idx.Stats().Blocks < pairs; c++ {
		toks := make([]uint32, promptTokens)
		for i := range toks {
			toks[i] = uint32(c*promptTokens + i)
		}
		ev := kvindex.StoredBlocks{Tokens: toks, BlockSize: block}
		for _, p := range kvindex.PrefixHashes(nil, toks, block) {
			ev.EngineHashes = append(ev.EngineHashes, p^0x5bd1e995) // any engine hash
		}
		if !idx.ApplyStored(idx.Holder(fleet.Workers[c%workers].URL), ev) {
			b.Fatal("store refused")
		}
		chains = append(chains, toks)
	}
	cfg := cacheaware.DefaultConfig()
	cfg.Events, cfg.Metrics = indexSource{idx}, metrics.NewSet()
	picker := cacheaware.New(cfg, testutil.NewRand(1)).Build(fleet.Group("m"))
	for _, path := range []string{"hit", "miss"} {
		b.Run("path="+path, func(b *testing.B) {
			reqs := make([]policy.Request, 256)
			for i := range reqs {
				toks := chains[i*len(chains)/len(reqs)]
				if path == "miss" {
					toks = make([]uint32, promptTokens)
					for j := range toks {
						toks[j] = 1<<31 + uint32(i*promptTokens+j)
					}
				}
				reqs[i].Tokens = toks
			}
			if _, err := picker.Pick(&reqs[0]); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			stop := policytest.CPUPerOp(b)
			for b.Loop() {
				if _, err := picker.Pick(&reqs[i&255]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			stop()
		})
	}
}
