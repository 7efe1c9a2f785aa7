package grpcworker

import (
	"context"
	"io"
	"reflect"
	"testing"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"google.golang.org/protobuf/proto"
)

// An empty Sampling sends each engine's own defaults (never proto3 zeros), with
// skip_special_tokens off because the gateway detokenizes.
func TestMappingDefaults(t *testing.T) {
	req := &GenerateRequest{RequestID: "r", InputIDs: []uint32{1, 2}, Text: "hi"}

	wantSG := sglangpb.DefaultSamplingParams()
	wantSG.SkipSpecialTokens = false
	gotSG := sglangRequest(req)
	if !proto.Equal(gotSG.SamplingParams, wantSG) {
		t.Errorf("SGLang sampling\n got %v\nwant %v", gotSG.SamplingParams, wantSG)
	}
	if gotSG.LogprobStartLen != -1 || gotSG.DataParallelRank != 0 || gotSG.DisaggregatedParams != nil || gotSG.Stream ||
		gotSG.RequestId != "r" || gotSG.Tokenized.OriginalText != "hi" || len(gotSG.Tokenized.InputIds) != 2 {
		t.Errorf("SGLang request %v", gotSG)
	}

	wantVL := vllmpb.DefaultSamplingParams()
	wantVL.SkipSpecialTokens = false
	gotVL := vllmRequest(req)
	if !proto.Equal(gotVL.SamplingParams, wantVL) {
		t.Errorf("vLLM sampling\n got %v\nwant %v", gotVL.SamplingParams, wantVL)
	}
	if gotVL.DataParallelRank != nil || gotVL.KvTransferParamsJson != nil || gotVL.GetTokenized().GetOriginalText() != "hi" {
		t.Errorf("vLLM request %v", gotVL)
	}
	if gotVL.SamplingParams.Temperature == nil || *gotVL.SamplingParams.Temperature != 1 || gotVL.SamplingParams.MaxTokens != nil {
		t.Errorf("vLLM temperature must be present (1.0) and max_tokens absent: %v", gotVL.SamplingParams)
	}
}

func f32(v float32) *float32 { return &v }
func u32(v uint32) *uint32   { return &v }
func i32(v int32) *int32     { return &v }

// What the caller sets overrides the defaults, field by field, in each dialect's terms.
func TestMappingOverrides(t *testing.T) {
	req := &GenerateRequest{RequestID: "r", InputIDs: []uint32{5}, Stream: true, DataParallelRank: Some[int32](3),
		Bootstrap: Some(Bootstrap{Host: "10.0.0.1", Port: 8998, Room: 42}), KVTransferParamsJSON: `{"do_remote_prefill":true}`,
		Sampling: Sampling{Temperature: Some[float32](0), TopP: Some[float32](0.9), TopK: Some[int32](40), MinP: Some[float32](0.05),
			FrequencyPenalty: Some[float32](0.5), PresencePenalty: Some[float32](-0.5), RepetitionPenalty: Some[float32](1.1),
			MaxNewTokens: Some[uint32](64), MinNewTokens: 2, Seed: Some[int32](7), Stop: []string{"\n\n"}, StopTokenIDs: []uint32{9},
			IgnoreEOS: true, N: 3, Constraint: JSONSchema, ConstraintValue: `{"type":"string"}`}}

	sg := sglangRequest(req)
	wantSG := &sglangpb.SamplingParams{Temperature: 0, TopP: 0.9, TopK: 40, MinP: 0.05, FrequencyPenalty: 0.5, PresencePenalty: -0.5,
		RepetitionPenalty: 1.1, MaxNewTokens: u32(64), MinNewTokens: 2, Stop: []string{"\n\n"}, StopTokenIds: []uint32{9}, IgnoreEos: true,
		N: 3, SpacesBetweenSpecialTokens: true, Constraint: &sglangpb.SamplingParams_JsonSchema{JsonSchema: `{"type":"string"}`}}
	if !proto.Equal(sg.SamplingParams, wantSG) {
		t.Errorf("SGLang sampling\n got %v\nwant %v", sg.SamplingParams, wantSG)
	}
	if sg.DataParallelRank != 3 || !sg.Stream || !proto.Equal(sg.DisaggregatedParams,
		&sglangpb.DisaggregatedParams{BootstrapHost: "10.0.0.1", BootstrapPort: 8998, BootstrapRoom: 42}) {
		t.Errorf("SGLang request %v", sg)
	}

	vl := vllmRequest(req)
	wantVL := &vllmpb.SamplingParams{Temperature: f32(0), TopP: 0.9, TopK: 40, MinP: 0.05, FrequencyPenalty: 0.5, PresencePenalty: -0.5,
		RepetitionPenalty: 1.1, MaxTokens: u32(64), MinTokens: 2, Seed: i32(7), Stop: []string{"\n\n"}, StopTokenIds: []uint32{9}, IgnoreEos: true,
		N: 3, SpacesBetweenSpecialTokens: true, Constraint: &vllmpb.SamplingParams_JsonSchema{JsonSchema: `{"type":"string"}`}}
	if !proto.Equal(vl.SamplingParams, wantVL) {
		t.Errorf("vLLM sampling\n got %v\nwant %v", vl.SamplingParams, wantVL)
	}
	if vl.GetDataParallelRank() != 3 || vl.DataParallelRank == nil || !vl.Stream || vl.GetKvTransferParamsJson() != `{"do_remote_prefill":true}` {
		t.Errorf("vLLM request %v", vl)
	}
}

func TestMappingTopKAndConstraints(t *testing.T) {
	for _, k := range []int32{0, -1, -5} {
		req := &GenerateRequest{Sampling: Sampling{TopK: Some(k)}}
		if got := sglangRequest(req).SamplingParams.TopK; got != -1 {
			t.Errorf("top_k %d → SGLang %d, want -1 (whole vocabulary)", k, got)
		}
		if got := vllmRequest(req).SamplingParams.TopK; got != 0 {
			t.Errorf("top_k %d → vLLM %d, want 0 (disabled)", k, got)
		}
	}
	for _, tc := range []struct {
		kind ConstraintKind
		sg   any
		vl   any
	}{
		{Regex, &sglangpb.SamplingParams_Regex{Regex: "v"}, &vllmpb.SamplingParams_Regex{Regex: "v"}},
		{Grammar, &sglangpb.SamplingParams_EbnfGrammar{EbnfGrammar: "v"}, &vllmpb.SamplingParams_Grammar{Grammar: "v"}},
		{StructuralTag, &sglangpb.SamplingParams_StructuralTag{StructuralTag: "v"}, &vllmpb.SamplingParams_StructuralTag{StructuralTag: "v"}},
		{JSONObject, &sglangpb.SamplingParams_JsonSchema{JsonSchema: `{"type":"object"}`}, &vllmpb.SamplingParams_JsonObject{JsonObject: true}},
	} {
		req := &GenerateRequest{Sampling: Sampling{Constraint: tc.kind, ConstraintValue: "v"}}
		if got := sglangRequest(req).SamplingParams.Constraint; !reflect.DeepEqual(any(got), tc.sg) {
			t.Errorf("kind %d: SGLang constraint %v, want %v", tc.kind, got, tc.sg)
		}
		if got := vllmRequest(req).SamplingParams.Constraint; !reflect.DeepEqual(any(got), tc.vl) {
			t.Errorf("kind %d: vLLM constraint %v, want %v", tc.kind, got, tc.vl)
		}
	}
}

// The request the engine receives over gRPC is the mapped one.
func TestMappingOverTheWire(t *testing.T) {
	req := &GenerateRequest{RequestID: "w", InputIDs: []uint32{3, 4}, Sampling: Sampling{MaxNewTokens: Some[uint32](5), Stop: []string{"x"}},
		DataParallelRank: Some[int32](1)}
	for _, d := range dialects {
		ts := startServer(t, d)
		c := dial(t, ts, d, DefaultConfig())
		s, err := c.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drain(t, s); err != io.EOF {
			t.Fatal(err)
		}
		s.Close()
		ts.eng.mu.Lock()
		switch d {
		case SGLang:
			if len(ts.eng.sgReqs) != 1 || !proto.Equal(ts.eng.sgReqs[0], sglangRequest(req)) {
				t.Errorf("SGLang engine received %v", ts.eng.sgReqs)
			}
		case VLLM:
			if len(ts.eng.vlReqs) != 1 || !proto.Equal(ts.eng.vlReqs[0], vllmRequest(req)) {
				t.Errorf("vLLM engine received %v", ts.eng.vlReqs)
			}
		}
		ts.eng.mu.Unlock()
	}
}
