package tokenizer

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/smg-go/smg/tokenizer/split"
	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and decodes ids to text exactly as
// Hugging Face tokenizers does for the same tokenizer.json. It is immutable
// after Load and safe for concurrent use.
type Tokenizer struct {
	model     *bpe
	norm      []normStep
	pre       []preStep
	byteLevel bool // pieces reach the model in the GPT-2 byte-level alphabet
	// spaceSplit: no pre-tokenizer, and no vocab token has "▁" after another
	// character, so no merge crosses a boundary before a "▁" run and words
	// can be cut there (and cached) without changing the ids.
	spaceSplit bool

	added     map[string]uint32 // content -> id, for TokenID
	addedByID map[uint32]string
	special   map[uint32]bool
	rawAdded  *addedMatcher // matched on the raw text
	normAdded *addedMatcher // matched on the normalized text

	prefix, suffix []uint32 // the post-processor's ids around a single sequence

	dec       []decStep
	decTokens []string // id -> token text as the decoder sees it ("" if unknown)
	decKnown  []bool
	byteDec   [][]byte // id -> bytes, when the decoder is ByteLevel alone
	// fusedDec is set when the decoder is Llama's and Mistral's chain, Replace, ByteFallback,
	// Fuse, Strip, which Decode then runs in one pass into dst.
	fusedDec *fusedDecoder

	chatTemplate string
	bos, eos     string
	addBOS       bool
	eosIDs       []uint32

	cache   *wordCache
	scratch sync.Pool
}

// Encode appends the ids of text to dst and returns it. With addSpecial the
// post-processor's special tokens (e.g. BOS) are added; special tokens
// written in text are matched either way. dst is the caller's: Encode keeps
// no reference to it.
func (t *Tokenizer) Encode(dst []uint32, text string, addSpecial bool) []uint32 {
	if addSpecial {
		dst = append(dst, t.prefix...)
	}
	sc := t.getScratch()
	sc.dst = dst
	t.encodeRaw(sc, text)
	dst = sc.dst
	sc.dst = nil
	t.scratch.Put(sc)
	if addSpecial {
		dst = append(dst, t.suffix...)
	}
	return dst
}

// TokenID returns the id of a token string, added tokens first.
func (t *Tokenizer) TokenID(tok string) (uint32, bool) {
	if id, ok := t.added[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// Token returns the token string of id, or "" if id is unknown.
func (t *Tokenizer) Token(id uint32) string {
	if int(id) < len(t.decTokens) && t.decKnown[id] {
		return t.decTokens[id]
	}
	return ""
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id uint32) bool { return t.special[id] }

// VocabSize is one more than the largest id of the model or added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.decTokens) }

// EOSTokenIDs are generation_config.json's eos_token_id plus the id of
// tokenizer_config.json's eos_token, sorted and deduplicated. Do not modify.
func (t *Tokenizer) EOSTokenIDs() []uint32 { return t.eosIDs }

// ChatTemplate is tokenizer_config.json's chat_template (the "default"
// one when it is a list), or "".
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// BOSToken and EOSToken are tokenizer_config.json's bos_token and eos_token
// contents, or "" when null or absent.
func (t *Tokenizer) BOSToken() string { return t.bos }

// EOSToken: see BOSToken.
func (t *Tokenizer) EOSToken() string { return t.eos }

// AddBOSToken is tokenizer_config.json's add_bos_token (false if absent).
func (t *Tokenizer) AddBOSToken() bool { return t.addBOS }

// ---- scratch ----

type scratch struct {
	dst    []uint32
	normA  []byte
	normB  []byte
	pre    [][]byte
	mapped []byte
	ids    []uint32
	ranks  []uint64
	syms   []symbol
	heap   []uint64
	normIt norm.Iter
}

func (t *Tokenizer) getScratch() *scratch {
	if v := t.scratch.Get(); v != nil {
		return v.(*scratch)
	}
	return &scratch{pre: make([][]byte, len(t.pre))}
}

// bstr views b as a string; b must not change while the string is used.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// ---- added-token split, then normalize, then pre-tokenize ----

func (t *Tokenizer) encodeRaw(sc *scratch, text string) {
	t.splitAdded(sc, t.rawAdded, text, true, (*Tokenizer).encodeSegment)
}

// encodeSegment normalizes s, raw text between added tokens, and pre-tokenizes the pieces of
// it between the added tokens matched on normalized text.
func (t *Tokenizer) encodeSegment(sc *scratch, s string, first bool) {
	t.splitAdded(sc, t.normAdded, t.normalize(sc, s), first, (*Tokenizer).pretokAll)
}

// pretokAll runs every pre-tokenizer step on s.
func (t *Tokenizer) pretokAll(sc *scratch, s string, first bool) { t.pretok(sc, 0, s, first) }

// splitAdded appends the ids of the added tokens m finds in s, in order, and hands each
// piece of s around them to encode; first reports whether s starts at offset 0 of the input.
func (t *Tokenizer) splitAdded(sc *scratch, m *addedMatcher, s string, first bool, encode func(t *Tokenizer, sc *scratch, s string, first bool)) {
	if m.none {
		encode(t, sc, s, first)
		return
	}
	off := 0
	for pos := 0; ; {
		start, end, next, tok := m.next(s, pos, off)
		if tok == nil {
			break
		}
		if off < start {
			encode(t, sc, s[off:start], first && off == 0)
		}
		sc.dst = append(sc.dst, tok.id)
		off, pos = end, next
	}
	if off < len(s) {
		encode(t, sc, s[off:], first && off == 0)
	}
}

// ---- normalizers ----

type normKind uint8

const (
	normNFC normKind = iota
	normNFKC
	normNFD
	normNFKD
	normPrepend
	normReplace
)

type normStep struct {
	kind normKind
	a, b string
}

func (k normKind) form() norm.Form {
	switch k {
	case normNFC:
		return norm.NFC
	case normNFKC:
		return norm.NFKC
	case normNFD:
		return norm.NFD
	}
	return norm.NFKD
}

// normalize returns s normalized; the result may live in sc's buffers until
// the next normalize call.
func (t *Tokenizer) normalize(sc *scratch, s string) string {
	cur := s
	useA := true
	for i := range t.norm {
		st := &t.norm[i]
		var buf []byte
		if useA {
			buf = sc.normA[:0]
		} else {
			buf = sc.normB[:0]
		}
		switch st.kind {
		case normNFC, normNFKC, normNFD, normNFKD:
			f := st.kind.form()
			if f.QuickSpanString(cur) == len(cur) {
				continue
			}
			// norm.Iter held in the scratch: IsNormalString and
			// AppendString allocate on every call.
			sc.normIt.InitString(f, cur)
			for !sc.normIt.Done() {
				buf = append(buf, sc.normIt.Next()...)
			}
		case normPrepend:
			if cur == "" {
				continue
			}
			buf = append(append(buf, st.a...), cur...)
		case normReplace:
			if !strings.Contains(cur, st.a) {
				continue
			}
			buf = appendReplaceAll(buf, cur, st.a, st.b)
		}
		if useA {
			sc.normA = buf
		} else {
			sc.normB = buf
		}
		cur = bstr(buf)
		useA = !useA
	}
	return cur
}

// normalizeString normalizes s into a new string (load time only).
func (t *Tokenizer) normalizeString(s string) string {
	sc := &scratch{}
	return strings.Clone(t.normalize(sc, s))
}

// ---- pre-tokenizers ----

type preKind uint8

const (
	preSplit preKind = iota
	preByteLevel
	preMetaspace
)

const (
	prependAlways = iota
	prependFirst
	prependNever
)

type preStep struct {
	kind        preKind
	sc          split.Scanner // Split's pattern; ByteLevel's when use_regex
	prefixSpace bool          // ByteLevel add_prefix_space
	repl        string        // Metaspace replacement
	prepend     int           // Metaspace prepend_scheme
	split       bool          // Metaspace split
}

// pretok runs pre-tokenizer steps level.. on s and hands each piece to the
// model. first reports whether s starts at offset 0 of the input.
func (t *Tokenizer) pretok(sc *scratch, level int, s string, first bool) {
	if s == "" {
		return
	}
	if level == len(t.pre) {
		if t.spaceSplit {
			t.wordsAtSpaces(sc, s)
		} else {
			t.word(sc, s)
		}
		return
	}
	st := &t.pre[level]
	switch st.kind {
	case preSplit:
		t.splitInto(sc, level, st.sc, s, first)
	case preByteLevel:
		if st.prefixSpace && s[0] != ' ' {
			buf := append(append(sc.pre[level][:0], ' '), s...)
			sc.pre[level] = buf
			s = bstr(buf)
		}
		if st.sc != nil {
			t.splitInto(sc, level, st.sc, s, first)
		} else {
			t.pretok(sc, level+1, s, first)
		}
	case preMetaspace:
		buf := sc.pre[level][:0]
		if (st.prepend == prependAlways || (st.prepend == prependFirst && first)) &&
			s[0] != ' ' && !strings.HasPrefix(s, st.repl) {
			buf = append(buf, st.repl...)
		}
		for i := 0; i < len(s); i++ {
			if s[i] == ' ' {
				buf = append(buf, st.repl...)
			} else {
				buf = append(buf, s[i])
			}
		}
		sc.pre[level] = buf
		s = bstr(buf)
		if !st.split {
			t.pretok(sc, level+1, s, first)
			return
		}
		start := 0
		for {
			j := strings.Index(s[start+1:], st.repl)
			if j < 0 {
				break
			}
			end := start + 1 + j
			t.pretok(sc, level+1, s[start:end], first && start == 0)
			start = end
		}
		t.pretok(sc, level+1, s[start:], first && start == 0)
	}
}

// splitInto hands each Isolated piece of s (matches and the gaps between
// them) to the next level.
func (t *Tokenizer) splitInto(sc *scratch, level int, p split.Scanner, s string, first bool) {
	it := split.NewPieces(p, s)
	for start, end, _, ok := it.Next(); ok; start, end, _, ok = it.Next() {
		t.pretok(sc, level+1, s[start:end], first && start == 0)
	}
}

const metaspace = "\u2581"

// appendReplaceAll appends s with every old (non-empty) replaced by repl:
// strings.ReplaceAll into dst, without allocating.
func appendReplaceAll(dst []byte, s, old, repl string) []byte {
	for {
		i := strings.Index(s, old)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(append(dst, s[:i]...), repl...)
		s = s[i+len(old):]
	}
}

// wordsAtSpaces hands the model s cut before each run of "▁" (see
// spaceSplit).
func (t *Tokenizer) wordsAtSpaces(sc *scratch, s string) {
	start := 0
	for i := spaceRunAfter(s, 1); i >= 0; i = spaceRunAfter(s, i+len(metaspace)) {
		t.word(sc, s[start:i])
		start = i
	}
	t.word(sc, s[start:])
}

// canSplitAtSpaces reports whether no vocab token holds "▁" right after a
// character other than "▁".
func canSplitAtSpaces(vocab map[string]uint32) bool {
	if _, ok := vocab[metaspace]; !ok {
		return false
	}
	for tok := range vocab {
		if spaceRunAfter(tok, 1) >= 0 {
			return false
		}
	}
	return true
}

// spaceRunAfter returns the offset of the first "▁" in s at or after from that does not
// follow another "▁" (a run of them starts there), or -1.
func spaceRunAfter(s string, from int) int {
	for i := from; i < len(s); i += len(metaspace) {
		j := strings.Index(s[i:], metaspace)
		if j < 0 {
			return -1
		}
		i += j
		if !strings.HasSuffix(s[:i], metaspace) {
			return i
		}
	}
	return -1
}

// ---- model stage ----

// word appends the ids of one pre-tokenized piece, through the word cache.
func (t *Tokenizer) word(sc *scratch, s string) {
	m := t.model
	if t.byteLevel && len(s) == 1 && m.byteOK {
		sc.dst = append(sc.dst, m.byteIDs[s[0]])
		return
	}
	h := t.cache.hash(s)
	if d, ok := t.cache.get(h, s, sc.dst); ok {
		sc.dst = d
		return
	}
	n := len(sc.dst)
	m.tokenize(sc, s, t.byteLevel)
	t.cache.put(h, s, sc.dst[n:])
}
