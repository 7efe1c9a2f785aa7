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

	"github.com/smg-go/smg/tokenizer/split"
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
	post, err := t.parsePost(f.PostProcessor)
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

type modelJSON struct {
	Type                    *string           `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
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
	if m.Type == nil {
		if m.Merges == nil {
			return nil, errors.New("model has no type")
		}
	} else if *m.Type != "BPE" {
		return nil, unsupported("model", *m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, errors.New("model BPE option dropout is not supported")
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return nil, errors.New("model BPE option continuing_subword_prefix is not supported")
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
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
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType("normalizer", raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var s struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("normalizer Sequence: %v", err)
		}
		var out []normStep
		for _, r := range s.Normalizers {
			steps, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			out = append(out, steps...)
		}
		return out, nil
	case "NFC":
		return []normStep{{kind: normNFC}}, nil
	case "NFKC":
		return []normStep{{kind: normNFKC}}, nil
	case "NFD":
		return []normStep{{kind: normNFD}}, nil
	case "NFKD":
		return []normStep{{kind: normNFKD}}, nil
	case "Prepend":
		var p struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("normalizer Prepend: %v", err)
		}
		return []normStep{{kind: normPrepend, a: p.Prepend}}, nil
	case "Replace":
		var p struct {
			Pattern patternJSON `json:"pattern"`
			Content string      `json:"content"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("normalizer Replace: %v", err)
		}
		lit, err := p.Pattern.literal("normalizer Replace")
		if err != nil {
			return nil, err
		}
		if lit == "" {
			return nil, errors.New("normalizer Replace pattern is empty")
		}
		return []normStep{{kind: normReplace, a: lit, b: p.Content}}, nil
	}
	return nil, unsupported("normalizer", typ)
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
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType("pre_tokenizer", raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var s struct {
			Pretokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Sequence: %v", err)
		}
		var out []preStep
		for _, r := range s.Pretokenizers {
			steps, err := parsePreTokenizer(r)
			if err != nil {
				return nil, err
			}
			out = append(out, steps...)
		}
		return out, nil
	case "Split":
		var p struct {
			Pattern  patternJSON `json:"pattern"`
			Behavior string      `json:"behavior"`
			Invert   bool        `json:"invert"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %v", err)
		}
		if p.Behavior != "Isolated" {
			return nil, fmt.Errorf("pre_tokenizer Split behavior %q is not supported", p.Behavior)
		}
		if p.Invert {
			return nil, errors.New("pre_tokenizer Split invert true is not supported")
		}
		var sc split.Scanner
		switch {
		case p.Pattern.String != nil:
			if *p.Pattern.String == "" {
				return nil, errors.New("pre_tokenizer Split pattern is empty")
			}
			sc = literalScanner(*p.Pattern.String)
		case p.Pattern.Regex != nil:
			if sc, err = compileSplit(*p.Pattern.Regex); err != nil {
				return nil, fmt.Errorf("pre_tokenizer Split pattern %q is not supported: %v", *p.Pattern.Regex, err)
			}
		default:
			return nil, errors.New("pre_tokenizer Split has no pattern")
		}
		return []preStep{{kind: preSplit, sc: sc}}, nil
	case "ByteLevel":
		p := struct {
			AddPrefixSpace bool `json:"add_prefix_space"`
			UseRegex       bool `json:"use_regex"`
		}{UseRegex: true}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("pre_tokenizer ByteLevel: %v", err)
		}
		st := preStep{kind: preByteLevel, prefixSpace: p.AddPrefixSpace}
		if p.UseRegex {
			if st.sc, err = compileSplit(gpt2Pattern); err != nil {
				return nil, fmt.Errorf("pre_tokenizer ByteLevel use_regex: %v", err)
			}
		}
		return []preStep{st}, nil
	case "Metaspace":
		p := struct {
			Replacement    string  `json:"replacement"`
			PrependScheme  *string `json:"prepend_scheme"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			Split          *bool   `json:"split"`
		}{}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: %v", err)
		}
		st, err := metaspaceStep("pre_tokenizer", p.Replacement, p.PrependScheme, p.AddPrefixSpace)
		if err != nil {
			return nil, err
		}
		st.split = p.Split == nil || *p.Split
		return []preStep{st}, nil
	}
	return nil, unsupported("pre_tokenizer", typ)
}

func metaspaceStep(what, repl string, scheme *string, addPrefix *bool) (preStep, error) {
	st := preStep{kind: preMetaspace}
	r, n := utf8.DecodeRuneInString(repl)
	if n == 0 || n != len(repl) || r == utf8.RuneError {
		return st, fmt.Errorf("%s Metaspace replacement %q is not one character", what, repl)
	}
	st.repl = repl
	switch {
	case scheme != nil:
		switch *scheme {
		case "always":
			st.prepend = prependAlways
		case "first":
			st.prepend = prependFirst
		case "never":
			st.prepend = prependNever
		default:
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

func (t *Tokenizer) parsePost(raw json.RawMessage) (postJSON, error) {
	var p postJSON
	if isNull(raw) {
		return p, nil
	}
	typ, err := componentType("post_processor", raw)
	if err != nil {
		return p, err
	}
	switch typ {
	case "ByteLevel":
		return p, nil
	case "Sequence":
		var s struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return p, fmt.Errorf("post_processor Sequence: %v", err)
		}
		for _, r := range s.Processors {
			q, err := t.parsePost(r)
			if err != nil {
				return p, err
			}
			p.prefix = append(append([]uint32(nil), q.prefix...), p.prefix...)
			p.suffix = append(p.suffix, q.suffix...)
		}
		return p, nil
	case "RobertaProcessing", "BertProcessing":
		var s struct {
			Sep [2]json.RawMessage `json:"sep"`
			Cls [2]json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return p, fmt.Errorf("post_processor %s: %v", typ, err)
		}
		var sep, cls uint32
		if err := json.Unmarshal(s.Sep[1], &sep); err != nil {
			return p, fmt.Errorf("post_processor %s sep: %v", typ, err)
		}
		if err := json.Unmarshal(s.Cls[1], &cls); err != nil {
			return p, fmt.Errorf("post_processor %s cls: %v", typ, err)
		}
		p.prefix, p.suffix = []uint32{cls}, []uint32{sep}
		return p, nil
	case "TemplateProcessing":
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
			return p, fmt.Errorf("post_processor TemplateProcessing: %v", err)
		}
		seen := false
		for _, it := range s.Single {
			switch {
			case it.Sequence != nil:
				if seen || it.Sequence.ID != "A" {
					return p, errors.New("post_processor TemplateProcessing single must hold sequence A once")
				}
				seen = true
			case it.SpecialToken != nil:
				st, ok := s.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return p, fmt.Errorf("post_processor TemplateProcessing special token %q is not defined", it.SpecialToken.ID)
				}
				if seen {
					p.suffix = append(p.suffix, st.IDs...)
				} else {
					p.prefix = append(p.prefix, st.IDs...)
				}
			default:
				return p, errors.New("post_processor TemplateProcessing single has an unknown item")
			}
		}
		if !seen {
			return p, errors.New("post_processor TemplateProcessing single must hold sequence A once")
		}
		return p, nil
	}
	return p, unsupported("post_processor", typ)
}

// ---- decoder ----

func parseDecoder(raw json.RawMessage) ([]decStep, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType("decoder", raw)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		var s struct {
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("decoder Sequence: %v", err)
		}
		out := []decStep{}
		for _, r := range s.Decoders {
			steps, err := parseDecoder(r)
			if err != nil {
				return nil, err
			}
			out = append(out, steps...)
		}
		return out, nil
	case "ByteLevel":
		return []decStep{{kind: decByteLevel}}, nil
	case "ByteFallback":
		return []decStep{{kind: decByteFallback}}, nil
	case "Fuse":
		return []decStep{{kind: decFuse}}, nil
	case "Replace":
		var p struct {
			Pattern patternJSON `json:"pattern"`
			Content string      `json:"content"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("decoder Replace: %v", err)
		}
		lit, err := p.Pattern.literal("decoder Replace")
		if err != nil {
			return nil, err
		}
		if lit == "" {
			return nil, errors.New("decoder Replace pattern is empty")
		}
		return []decStep{{kind: decReplace, a: lit, b: p.Content}}, nil
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
