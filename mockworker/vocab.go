package mockworker

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// AnswerText is the text a gRPC worker's answer decodes to with its tokenizer
// (Config.TokenizerPath): the HTTP answer's ten words, encoded once at start. The answer is
// these ids followed by the first EOS id; with ignore_eos the ids repeat until the maximum.
var AnswerText = strings.Join(vocabulary[:], "")

// PositionTokenBase is the first of the ids a gRPC worker without a tokenizer answers: output
// token i is PositionTokenBase + i%10, the id of vocabulary word i%10, and it never ends
// before its maximum (no EOS), like the HTTP answer.
const PositionTokenBase = 1000

// textCodec is the part of a tokenizer a gRPC worker uses (package tokenizer's Tokenizer).
type textCodec interface {
	Encode(dst []uint32, text string, addSpecial bool) []uint32
	Decode(dst []byte, ids []uint32, skipSpecial bool) []byte
	EOSTokenIDs() []uint32
	VocabSize() int
}

// vocab is a gRPC fleet's vocabulary: the answer's ids, the EOS ids and the decoding of ids
// (stop strings are matched on the decoded answer, as engines match them). Read-only.
type vocab struct {
	answer []uint32 // nil: position ids
	eos    []uint32
	size   int       // vocabulary size reported by GetModelInfo
	dir    string    // Config.TokenizerPath
	codec  textCodec // nil without a tokenizer
}

// loadVocab builds the fleet's vocabulary: position ids without a tokenizer directory, else
// the answer text encoded by the real tokenizer and the model's EOS ids.
func loadVocab(dir string) (*vocab, error) {
	if dir == "" {
		return &vocab{size: PositionTokenBase + len(vocabulary)}, nil
	}
	codec, err := openTokenizer(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot load the tokenizer (--tokenizer-path %s): %w", dir, err)
	}
	v := &vocab{answer: codec.Encode(nil, AnswerText, false), eos: codec.EOSTokenIDs(), size: codec.VocabSize(), dir: dir, codec: codec}
	switch {
	case len(v.answer) == 0:
		return nil, fmt.Errorf("--tokenizer-path %s: the tokenizer encodes the answer text to no ids", dir)
	case len(v.eos) == 0:
		return nil, fmt.Errorf("--tokenizer-path %s: no EOS id (neither generation_config.json's eos_token_id nor tokenizer_config.json's eos_token)", dir)
	}
	return v, nil
}

// period is the length after which the output ids repeat.
func (v *vocab) period() int {
	if v.answer == nil {
		return len(vocabulary)
	}
	return len(v.answer)
}

// id is output token i (from 0).
func (v *vocab) id(i int, ignoreEOS bool) uint32 {
	if v.answer == nil {
		return PositionTokenBase + uint32(i%len(vocabulary))
	}
	if !ignoreEOS && i == len(v.answer) && len(v.eos) > 0 {
		return v.eos[0]
	}
	return v.answer[i%len(v.answer)]
}

// text appends the text of ids, special tokens skipped.
func (v *vocab) text(dst []byte, ids []uint32) []byte {
	if v.codec != nil {
		return v.codec.Decode(dst, ids, true)
	}
	for _, id := range ids {
		if i := int(id) - PositionTokenBase; i >= 0 && i < len(vocabulary) {
			dst = append(dst, vocabulary[i]...)
		}
	}
	return dst
}

// genPlan is how a sample ends, known when it starts (the output is deterministic).
type genPlan struct {
	length       int
	finish       string // "length" or "stop"
	matchedID    uint32
	hasMatchedID bool
	matchedStr   string // a stop string matched, when not ""
}

// plan decides a sample's length and finish: the EOS after the answer (unless ignoreEOS), the
// first output id in stopIDs, the first output whose decoded text contains a stop string,
// whichever comes first, else maxTokens for "length". A stop on the last allowed token is a
// stop, as vLLM checks stops before the length. The stopping token is part of the output.
func (v *vocab) plan(maxTokens int, ignoreEOS bool, stopIDs []uint32, stops []string) genPlan {
	p := genPlan{length: maxTokens, finish: "length"}
	if v.answer != nil && !ignoreEOS && len(v.eos) > 0 && len(v.answer)+1 <= maxTokens {
		p = genPlan{length: len(v.answer) + 1, finish: "stop", matchedID: v.eos[0], hasMatchedID: true}
	}
	if len(stopIDs) > 0 {
		// The ids repeat with the period, so one period (and the EOS) shows every id.
		for i := range min(p.length, v.period()+1) {
			if id := v.id(i, ignoreEOS); slices.Contains(stopIDs, id) {
				p = genPlan{length: i + 1, finish: "stop", matchedID: id, hasMatchedID: true}
				break
			}
		}
	}
	longest := 0
	for _, s := range stops {
		longest = max(longest, len(s))
	}
	if longest == 0 {
		return p
	}
	// The text repeats with the period too: a match, if any, ends within two periods plus
	// the longest stop string (every token is at least one byte).
	scan := min(p.length, 2*v.period()+longest+1)
	ids := make([]uint32, 0, scan)
	var text []byte
	for i := range scan {
		ids = append(ids, v.id(i, ignoreEOS))
		text = v.text(text[:0], ids)
		for _, s := range stops {
			if s != "" && bytes.Contains(text, []byte(s)) {
				return genPlan{length: i + 1, finish: "stop", matchedStr: s}
			}
		}
	}
	return p
}
