package main

import (
	"slices"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/fastpath"
)

// TestModelsLearnTheEnginesLimits: the longest prompt is the smallest any engine of the
// model takes, EOS ids join the tokenizer's, and the only tokenizer loaded is known under
// the engine's model id too; an engine's model with no tokenizer is not invented.
func TestModelsLearnTheEnginesLimits(t *testing.T) {
	var ms models
	ms.learn(grpcworker.ModelInfo{ModelID: "Qwen/Qwen3-8B", MaxReqInputLen: 100})
	if _, ok := ms.lookup("Qwen/Qwen3-8B"); ok {
		t.Fatal("a model without a tokenizer became known")
	}
	only := fastpath.GRPCModel{ID: "qwen3", EOSTokenIDs: []uint32{7}}
	byID := map[string]fastpath.GRPCModel{"qwen3": only}
	ms.byID.Store(&byID)
	ms.only.Store(&only)

	ms.learn(grpcworker.ModelInfo{ModelID: "Qwen/Qwen3-8B", MaxReqInputLen: 4000, EOSTokenIDs: []uint32{7, 9}})
	ms.learn(grpcworker.ModelInfo{ModelID: "Qwen/Qwen3-8B", MaxReqInputLen: 0, MaxContextLength: 3000})
	ms.learn(grpcworker.ModelInfo{ModelID: "Qwen/Qwen3-8B", MaxReqInputLen: 5000})
	m, ok := ms.lookup("Qwen/Qwen3-8B")
	if !ok || m.ID != "Qwen/Qwen3-8B" || m.MaxPromptTokens != 3000 || !slices.Equal(m.EOSTokenIDs, []uint32{7, 9}) {
		t.Fatalf("learned model: %+v %v, want Qwen/Qwen3-8B with 3000 tokens and EOS [7 9]", m, ok)
	}
	for _, name := range []string{"", "qwen3"} {
		if m, _ := ms.lookup(name); m.MaxPromptTokens != 3000 || m.ID != "qwen3" {
			t.Fatalf("a request naming %q: %+v, want the only tokenizer with the learned limit", name, m)
		}
	}
	if !slices.Equal(only.EOSTokenIDs, []uint32{7}) {
		t.Fatalf("learning changed a published model's EOS ids in place: %v", only.EOSTokenIDs)
	}
}
