package grpcworker

import "testing"

// TestLoadsDocumentOfOneRank: a DP rank's worker reports its own rank; the engine's worker
// every rank; a rank without the waiting-tokens figure (vLLM) leaves it out.
func TestLoadsDocumentOfOneRank(t *testing.T) {
	l := Loads{DPRankCount: 2, Ranks: []RankLoad{{DPRank: 0, UsedTokens: 10, WaitingTokens: -1}, {DPRank: 1, UsedTokens: 20, WaitingTokens: 5}}}
	one := loadsDocument(l, 1)["loads"].([]map[string]any)
	if len(one) != 1 || one[0]["num_used_tokens"] != int64(20) || one[0]["num_waiting_uncached_tokens"] != int64(5) {
		t.Fatalf("rank 1: %v", one)
	}
	all := loadsDocument(l, -1)["loads"].([]map[string]any)
	if len(all) != 2 {
		t.Fatalf("every rank: %v", all)
	}
	if _, ok := all[0]["num_waiting_uncached_tokens"]; ok {
		t.Fatalf("rank 0 reported waiting tokens it does not have: %v", all[0])
	}
}
