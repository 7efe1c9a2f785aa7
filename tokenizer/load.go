package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Load reads tokenizer.json, tokenizer_config.json and, if present,
// generation_config.json from dir. tokenizer_config.json may be absent.
func Load(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	cfg, err := readOptional(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	gen, err := readOptional(filepath.Join(dir, "generation_config.json"))
	if err != nil {
		return nil, err
	}
	return LoadJSON(tj, cfg, gen)
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	return b, nil
}

// LoadJSON builds a Tokenizer from the contents of tokenizer.json and,
// optionally (nil), tokenizer_config.json and generation_config.json.
// Every error starts with "cannot load tokenizer: " and names the component.
func LoadJSON(tokenizerJSON, configJSON, generationJSON []byte) (*Tokenizer, error) {
	t, err := build(tokenizerJSON, configJSON, generationJSON)
	if err != nil {
		return nil, fmt.Errorf("cannot load tokenizer: %w", err)
	}
	return t, nil
}

type fileJSON struct {
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type addedJSON struct {
	ID         *uint32 `json:"id"`
	Content    string  `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized bool    `json:"normalized"`
	Special    bool    `json:"special"`
}

func isNull(raw json.RawMessage) bool {
	r := bytes.TrimSpace(raw)
	return len(r) == 0 || string(r) == "null"
}

// componentType returns the "type" field of a component object.
func componentType(what string, raw json.RawMessage) (string, error) {
	var h struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("%s: %v", what, err)
	}
	if h.Type == nil {
		return "", fmt.Errorf("%s has no type", what)
	}
	return *h.Type, nil
}

func unsupported(what, typ string) error {
	return fmt.Errorf("%s type %q is not supported", what, typ)
}

// parseComponent parses a normalizer, pre_tokenizer or decoder (what): null is none, a
// Sequence joins the steps of the components it lists, in order, and any other type is
// ofType's. A Sequence's steps are never nil: an empty Sequence is a component that does
// nothing, which for the decoder differs from having none.
func parseComponent[S any](what string, raw json.RawMessage, ofType func(typ string, raw json.RawMessage) ([]S, error)) ([]S, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(what, raw)
	if err != nil {
		return nil, err
	}
	if typ != "Sequence" {
		return ofType(typ, raw)
	}
	items, err := sequenceItems(what, raw)
	if err != nil {
		return nil, err
	}
	out := []S{}
	for _, item := range items {
		steps, err := parseComponent(what, item, ofType)
		if err != nil {
			return nil, err
		}
		out = append(out, steps...)
	}
	return out, nil
}

// sequenceKeys is the key under which tokenizer.json lists a Sequence's components, by section.
var sequenceKeys = map[string]string{"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "decoder": "decoders"}

// sequenceItems returns the components a Sequence of section what lists. Other members are
// ignored, as Hugging Face's reader ignores them; a missing list is an empty Sequence.
func sequenceItems(what string, raw json.RawMessage) ([]json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("%s Sequence: %v", what, err)
	}
	var items []json.RawMessage
	if list, ok := members[sequenceKeys[what]]; ok {
		if err := json.Unmarshal(list, &items); err != nil {
			return nil, fmt.Errorf("%s Sequence: %s: %v", what, sequenceKeys[what], err)
		}
	}
	return items, nil
}

// oneStep is the step list of a component that parses to one step.
func oneStep[S any](step S, err error) ([]S, error) {
	if err != nil {
		return nil, err
	}
	return []S{step}, nil
}

func build(tj, cfgJSON, genJSON []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(tj, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %v", err)
	}
	if !isNull(f.Truncation) {
		return nil, errors.New("truncation is not supported")
	}
	if !isNull(f.Padding) {
		return nil, errors.New("padding is not supported")
	}
	t := &Tokenizer{}
	var err error
	if t.model, err = parseModel(f.Model); err != nil {
		return nil, err
	}
	if t.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err = t.validatePre(); err != nil {
		return nil, err
	}
	t.spaceSplit = len(t.pre) == 0 && canSplitAtSpaces(t.model.vocab)
	if err = t.buildAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	post, err := parsePost(f.PostProcessor)
	if err != nil {
		return nil, err
	}
	t.prefix, t.suffix = post.prefix, post.suffix
	if t.dec, err = parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	t.buildDecodeTable()
	if err = t.parseConfig(cfgJSON, genJSON); err != nil {
		return nil, err
	}
	t.cache = newWordCache()
	return t, nil
}

// ---- model ----

// modelJSON is a BPE model. The options this package does not implement
// (dropout, continuing_subword_prefix, end_of_word_suffix) are read only to
// refuse a value other than their zero (or null).
type modelJSON struct {
	Dropout                 float64           `json:"dropout"`
	ContinuingSubwordPrefix string            `json:"continuing_subword_prefix"`
	EndOfWordSuffix         string            `json:"end_of_word_suffix"`
	UnkToken                *string           `json:"unk_token"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]uint32 `json:"vocab"`
	Merges                  json.RawMessage   `json:"merges"`
}

func parseModel(raw json.RawMessage) (*bpe, error) {
	if isNull(raw) {
		return nil, errors.New("model is missing")
	}
	// The type first: another model's fields need not decode as BPE's.
	var h struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if h.Type != nil && *h.Type != "BPE" {
		return nil, unsupported("model", *h.Type)
	}
	var m modelJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if h.Type == nil && m.Merges == nil {
		return nil, errors.New("model has no type")
	}
	if m.Dropout != 0 {
		return nil, errors.New("model BPE option dropout is not supported")
	}
	if m.ContinuingSubwordPrefix != "" {
		return nil, errors.New("model BPE option continuing_subword_prefix is not supported")
	}
	if m.EndOfWordSuffix != "" {
		return nil, errors.New("model BPE option end_of_word_suffix is not supported")
	}
	var pairs [][2]string
	if !isNull(m.Merges) {
		var legacy []string
		if err := json.Unmarshal(m.Merges, &legacy); err == nil {
			pairs = make([][2]string, len(legacy))
			for i, s := range legacy {
				a, b, ok := strings.Cut(s, " ")
				if !ok {
					return nil, fmt.Errorf("model BPE merge %d %q is not two tokens", i, s)
				}
				pairs[i] = [2]string{a, b}
			}
		} else if err := json.Unmarshal(m.Merges, &pairs); err != nil {
			return nil, fmt.Errorf("model BPE merges: %v", err)
		}
	}
	return newBPE(m.Vocab, pairs, m.UnkToken, m.FuseUnk, m.ByteFallback, m.IgnoreMerges)
}

// ---- normalizer ----

func parseNormalizer(raw json.RawMessage) ([]normStep, error) {
	return parseComponent("normalizer", raw, normalizerOfType)
}

// plainNormalizers are the normalizer types without settings.
var plainNormalizers = map[string]normKind{"NFC": normNFC, "NFKC": normNFKC, "NFD": normNFD, "NFKD": normNFKD}

// normalizerOfType parses a normalizer of type typ, not a Sequence.
func normalizerOfType(typ string, raw json.RawMessage) ([]normStep, error) {
	if kind, ok := plainNormalizers[typ]; ok {
		return []normStep{{kind: kind}}, nil
	}
	switch typ {
	case "Prepend":
		var p struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("normalizer Prepend: %v", err)
		}
		return []normStep{{kind: normPrepend, a: p.Prepend}}, nil
	case "Replace":
		pattern, content, err := parseReplace("normalizer", raw)
		if err != nil {
			return nil, err
		}
		return []normStep{{kind: normReplace, a: pattern, b: content}}, nil
	}
	return nil, unsupported("normalizer", typ)
}

// parseReplace parses a Replace normalizer or decoder (what says which):
// a non-empty literal pattern and its replacement.
func parseReplace(what string, raw json.RawMessage) (pattern, content string, err error) {
	var p struct {
		Pattern patternJSON `json:"pattern"`
		Content string      `json:"content"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", "", fmt.Errorf("%s Replace: %v", what, err)
	}
	if pattern, err = p.Pattern.literal(what + " Replace"); err != nil {
		return "", "", err
	}
	if pattern == "" {
		return "", "", fmt.Errorf("%s Replace pattern is empty", what)
	}
	return pattern, p.Content, nil
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// literal returns the pattern as a literal string; a Regex without
// metacharacters counts as one.
func (p patternJSON) literal(what string) (string, error) {
	if p.String != nil {
		return *p.String, nil
	}
	if p.Regex != nil {
		if regexp.QuoteMeta(*p.Regex) == *p.Regex {
			return *p.Regex, nil
		}
		return "", fmt.Errorf("%s Regex pattern %q is not supported", what, *p.Regex)
	}
	return "", fmt.Errorf("%s has no pattern", what)
}

// ---- pre-tokenizer ----

func parsePreTokenizer(raw json.RawMessage) ([]preStep, error) {
	return parseComponent("pre_tokenizer", raw, preTokenizerOfType)
}

// preTokenizerOfType parses a pre_tokenizer of type typ, not a Sequence.
func preTokenizerOfType(typ string, raw json.RawMessage) ([]preStep, error) {
	switch typ {
	case "Split":
		return oneStep(parseSplit(raw))
	case "ByteLevel":
		return oneStep(parseByteLevel(raw))
	case "Metaspace":
		return oneStep(parseMetaspace(raw))
	}
	return nil, unsupported("pre_tokenizer", typ)
}

// parseSplit parses a Split pre-tokenizer: Isolated, not inverted, with a
// string or one of the patterns package split implements.
func parseSplit(raw json.RawMessage) (preStep, error) {
	var p struct {
		Pattern  patternJSON `json:"pattern"`
		Behavior string      `json:"behavior"`
		Invert   bool        `json:"invert"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return preStep{}, fmt.Errorf("pre_tokenizer Split: %v", err)
	}
	if p.Behavior != "Isolated" {
		return preStep{}, fmt.Errorf("pre_tokenizer Split behavior %q is not supported", p.Behavior)
	}
	if p.Invert {
		return preStep{}, errors.New("pre_tokenizer Split invert true is not supported")
	}
	st := preStep{kind: preSplit}
	switch {
	case p.Pattern.String != nil:
		if *p.Pattern.String == "" {
			return preStep{}, errors.New("pre_tokenizer Split pattern is empty")
		}
		st.sc = literalScanner(*p.Pattern.String)
	case p.Pattern.Regex != nil:
		var err error
		if st.sc, err = compileSplit(*p.Pattern.Regex); err != nil {
			return preStep{}, fmt.Errorf("pre_tokenizer Split pattern %q is not supported: %v", *p.Pattern.Regex, err)
		}
	default:
		return preStep{}, errors.New("pre_tokenizer Split has no pattern")
	}
	return st, nil
}

// parseByteLevel parses a ByteLevel pre-tokenizer; use_regex (the GPT-2
// pattern) defaults to true.
func parseByteLevel(raw json.RawMessage) (preStep, error) {
	p := struct {
		AddPrefixSpace bool `json:"add_prefix_space"`
		UseRegex       bool `json:"use_regex"`
	}{UseRegex: true}
	if err := json.Unmarshal(raw, &p); err != nil {
		return preStep{}, fmt.Errorf("pre_tokenizer ByteLevel: %v", err)
	}
	st := preStep{kind: preByteLevel, prefixSpace: p.AddPrefixSpace}
	if p.UseRegex {
		var err error
		if st.sc, err = compileSplit(gpt2Pattern); err != nil {
			return preStep{}, fmt.Errorf("pre_tokenizer ByteLevel use_regex: %v", err)
		}
	}
	return st, nil
}

// parseMetaspace parses a Metaspace pre-tokenizer; split defaults to true.
func parseMetaspace(raw json.RawMessage) (preStep, error) {
	p := struct {
		Replacement    string  `json:"replacement"`
		PrependScheme  *string `json:"prepend_scheme"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		Split          *bool   `json:"split"`
	}{}
	if err := json.Unmarshal(raw, &p); err != nil {
		return preStep{}, fmt.Errorf("pre_tokenizer Metaspace: %v", err)
	}
	st, err := metaspaceStep("pre_tokenizer", p.Replacement, p.PrependScheme, p.AddPrefixSpace)
	if err != nil {
		return preStep{}, err
	}
	st.split = p.Split == nil || *p.Split
	return st, nil
}

// prependSchemes are Metaspace's prepend_scheme values.
var prependSchemes = map[string]int{"always": prependAlways, "first": prependFirst, "never": prependNever}

func metaspaceStep(what, repl string, scheme *string, addPrefix *bool) (preStep, error) {
	st := preStep{kind: preMetaspace}
	r, n := utf8.DecodeRuneInString(repl)
	if n == 0 || n != len(repl) || r == utf8.RuneError {
		return st, fmt.Errorf("%s Metaspace replacement %q is not one character", what, repl)
	}
	st.repl = repl
	switch {
	case scheme != nil:
		var ok bool
		if st.prepend, ok = prependSchemes[*scheme]; !ok {
			return st, fmt.Errorf("%s Metaspace prepend_scheme %q is not supported", what, *scheme)
		}
	case addPrefix != nil && !*addPrefix:
		st.prepend = prependNever
	default:
		st.prepend = prependAlways
	}
	return st, nil
}

// validatePre refuses chains where something follows a ByteLevel step:
// the byte-level alphabet is applied when a piece reaches the model.
func (t *Tokenizer) validatePre() error {
	for i, st := range t.pre {
		if st.kind == preByteLevel {
			if i != len(t.pre)-1 {
				return errors.New("pre_tokenizer ByteLevel followed by another pre_tokenizer is not supported")
			}
			t.byteLevel = true
		}
	}
	return nil
}

// ---- added tokens ----

func (t *Tokenizer) buildAdded(list []addedJSON) error {
	t.added = make(map[string]uint32, len(list))
	t.special = make(map[uint32]bool)
	t.addedByID = make(map[uint32]string, len(list))
	var raw, norm []addedToken
	for i, a := range list {
		if a.ID == nil {
			return fmt.Errorf("added_tokens[%d] has no id", i)
		}
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d] has empty content", i)
		}
		id := *a.ID
		t.added[a.Content] = id
		t.addedByID[id] = a.Content
		if a.Special {
			t.special[id] = true
		}
		tok := addedToken{id: id, content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip}
		if a.Normalized && len(t.norm) > 0 {
			tok.content = t.normalizeString(a.Content)
			if tok.content == "" {
				continue
			}
			norm = append(norm, tok)
		} else if a.Normalized {
			norm = append(norm, tok)
		} else {
			raw = append(raw, tok)
		}
	}
	t.rawAdded = newAddedMatcher(raw)
	t.normAdded = newAddedMatcher(norm)
	return nil
}

// ---- post-processor ----

type postJSON struct {
	prefix, suffix []uint32
}

func parsePost(raw json.RawMessage) (postJSON, error) {
	if isNull(raw) {
		return postJSON{}, nil
	}
	typ, err := componentType("post_processor", raw)
	if err != nil {
		return postJSON{}, err
	}
	switch typ {
	case "ByteLevel":
		return postJSON{}, nil
	case "Sequence":
		return parsePostSequence(raw)
	case "RobertaProcessing", "BertProcessing":
		return parseClsSep(typ, raw)
	case "TemplateProcessing":
		return parseTemplateProcessing(raw)
	}
	return postJSON{}, unsupported("post_processor", typ)
}

// parsePostSequence parses a Sequence of post-processors: each one's
// prefix goes before the previous ones', its suffix after.
func parsePostSequence(raw json.RawMessage) (postJSON, error) {
	var s struct {
		Processors []json.RawMessage `json:"processors"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return postJSON{}, fmt.Errorf("post_processor Sequence: %v", err)
	}
	var p postJSON
	for _, r := range s.Processors {
		q, err := parsePost(r)
		if err != nil {
			return postJSON{}, err
		}
		p.prefix = append(append([]uint32(nil), q.prefix...), p.prefix...)
		p.suffix = append(p.suffix, q.suffix...)
	}
	return p, nil
}

// parseClsSep parses RobertaProcessing and BertProcessing: cls before the
// sequence, sep after it.
func parseClsSep(typ string, raw json.RawMessage) (postJSON, error) {
	var s struct {
		Sep [2]json.RawMessage `json:"sep"`
		Cls [2]json.RawMessage `json:"cls"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return postJSON{}, fmt.Errorf("post_processor %s: %v", typ, err)
	}
	var sep, cls uint32
	if err := json.Unmarshal(s.Sep[1], &sep); err != nil {
		return postJSON{}, fmt.Errorf("post_processor %s sep: %v", typ, err)
	}
	if err := json.Unmarshal(s.Cls[1], &cls); err != nil {
		return postJSON{}, fmt.Errorf("post_processor %s cls: %v", typ, err)
	}
	return postJSON{prefix: []uint32{cls}, suffix: []uint32{sep}}, nil
}

// parseTemplateProcessing parses TemplateProcessing's single template:
// special tokens around sequence A, which it must hold once.
func parseTemplateProcessing(raw json.RawMessage) (postJSON, error) {
	var s struct {
		Single []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []uint32 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return postJSON{}, fmt.Errorf("post_processor TemplateProcessing: %v", err)
	}
	errNoA := errors.New("post_processor TemplateProcessing single must hold sequence A once")
	var p postJSON
	seen := false
	for _, it := range s.Single {
		switch {
		case it.Sequence != nil:
			if seen || it.Sequence.ID != "A" {
				return postJSON{}, errNoA
			}
			seen = true
		case it.SpecialToken != nil:
			st, ok := s.SpecialTokens[it.SpecialToken.ID]
			if !ok {
				return postJSON{}, fmt.Errorf("post_processor TemplateProcessing special token %q is not defined", it.SpecialToken.ID)
			}
			if seen {
				p.suffix = append(p.suffix, st.IDs...)
			} else {
				p.prefix = append(p.prefix, st.IDs...)
			}
		default:
			return postJSON{}, errors.New("post_processor TemplateProcessing single has an unknown item")
		}
	}
	if !seen {
		return postJSON{}, errNoA
	}
	return p, nil
}

// ---- decoder ----

func parseDecoder(raw json.RawMessage) ([]decStep, error) {
	return parseComponent("decoder", raw, decoderOfType)
}

// plainDecoders are the decoder types without settings.
var plainDecoders = map[string]decKind{"ByteLevel": decByteLevel, "ByteFallback": decByteFallback, "Fuse": decFuse}

// decoderOfType parses a decoder of type typ, not a Sequence.
func decoderOfType(typ string, raw json.RawMessage) ([]decStep, error) {
	if kind, ok := plainDecoders[typ]; ok {
		return []decStep{{kind: kind}}, nil
	}
	switch typ {
	case "Replace":
		pattern, content, err := parseReplace("decoder", raw)
		if err != nil {
			return nil, err
		}
		return []decStep{{kind: decReplace, a: pattern, b: content}}, nil
	case "Strip":
		var p struct {
			Content string `json:"content"`
			Start   int    `json:"start"`
			Stop    int    `json:"stop"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("decoder Strip: %v", err)
		}
		r, n := utf8.DecodeRuneInString(p.Content)
		if n == 0 || n != len(p.Content) || p.Start < 0 || p.Stop < 0 {
			return nil, fmt.Errorf("decoder Strip content %q is not one character", p.Content)
		}
		return []decStep{{kind: decStrip, r: r, start: p.Start, stop: p.Stop}}, nil
	case "Metaspace":
		p := struct {
			Replacement    string  `json:"replacement"`
			PrependScheme  *string `json:"prepend_scheme"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
		}{}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("decoder Metaspace: %v", err)
		}
		st, err := metaspaceStep("decoder", p.Replacement, p.PrependScheme, p.AddPrefixSpace)
		if err != nil {
			return nil, err
		}
		r, _ := utf8.DecodeRuneInString(st.repl)
		return []decStep{{kind: decMetaspace, r: r, prependFirst: st.prepend != prependNever}}, nil
	}
	return nil, unsupported("decoder", typ)
}

// ---- tokenizer_config.json / generation_config.json ----

func (t *Tokenizer) parseConfig(cfgJSON, genJSON []byte) error {
	if len(cfgJSON) > 0 {
		var c struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
			BOS          json.RawMessage `json:"bos_token"`
			EOS          json.RawMessage `json:"eos_token"`
			AddBOS       *bool           `json:"add_bos_token"`
		}
		if err := json.Unmarshal(cfgJSON, &c); err != nil {
			return fmt.Errorf("tokenizer_config.json: %v", err)
		}
		var err error
		if t.chatTemplate, err = chatTemplate(c.ChatTemplate); err != nil {
			return err
		}
		if t.bos, err = tokenString("bos_token", c.BOS); err != nil {
			return err
		}
		if t.eos, err = tokenString("eos_token", c.EOS); err != nil {
			return err
		}
		t.addBOS = c.AddBOS != nil && *c.AddBOS
	}
	if len(genJSON) > 0 {
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(genJSON, &g); err != nil {
			return fmt.Errorf("generation_config.json: %v", err)
		}
		if !isNull(g.EOS) {
			var one uint32
			var many []uint32
			if err := json.Unmarshal(g.EOS, &one); err == nil {
				many = []uint32{one}
			} else if err := json.Unmarshal(g.EOS, &many); err != nil {
				return fmt.Errorf("generation_config.json eos_token_id: %v", err)
			}
			t.eosIDs = append(t.eosIDs, many...)
		}
	}
	if t.eos != "" {
		if id, ok := t.TokenID(t.eos); ok {
			t.eosIDs = append(t.eosIDs, id)
		}
	}
	sort.Slice(t.eosIDs, func(i, j int) bool { return t.eosIDs[i] < t.eosIDs[j] })
	out := t.eosIDs[:0]
	for i, id := range t.eosIDs {
		if i == 0 || id != t.eosIDs[i-1] {
			out = append(out, id)
		}
	}
	t.eosIDs = out
	return nil
}

func chatTemplate(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("tokenizer_config.json chat_template: %v", err)
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	return "", nil
}

func tokenString(what string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("tokenizer_config.json %s: %v", what, err)
	}
	return o.Content, nil
}
