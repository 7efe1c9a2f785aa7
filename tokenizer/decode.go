package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type decKind uint8

const (
	decByteLevel decKind = iota
	decByteFallback
	decFuse
	decReplace
	decStrip
	decMetaspace
)

type decStep struct {
	kind         decKind
	a, b         string // Replace pattern and content
	r            rune   // Strip content, Metaspace replacement
	start, stop  int    // Strip counts
	prependFirst bool   // Metaspace: the first token's replacement is dropped
}

func (t *Tokenizer) buildDecodeTable() {
	size := int(t.model.maxID) + 1
	if len(t.model.vocab) == 0 {
		size = 0
	}
	for id := range t.addedByID {
		size = max(size, int(id)+1)
	}
	t.decTokens = make([]string, size)
	t.decKnown = make([]bool, size)
	for tok, id := range t.model.vocab {
		t.decTokens[id], t.decKnown[id] = tok, true
	}
	for id, tok := range t.addedByID {
		t.decTokens[id], t.decKnown[id] = tok, true
	}
	t.fusedDec = newFusedDecoder(t.dec)
	if len(t.dec) == 1 && t.dec[0].kind == decByteLevel {
		t.byteDec = make([][]byte, size)
		for id, tok := range t.decTokens {
			t.byteDec[id] = byteLevelBytes(nil, tok)
		}
	}
}

// byteLevelBytes maps a token back through the byte-level alphabet; a token
// with a character outside it is taken as is, as Hugging Face does.
func byteLevelBytes(dst []byte, tok string) []byte {
	n := len(dst)
	for _, r := range tok {
		b, ok := charByte[r]
		if !ok {
			return append(dst[:n], tok...)
		}
		dst = append(dst, b)
	}
	return dst
}

// Decode appends the text of ids to dst and returns it, as Hugging Face's
// decode(ids, skip_special_tokens): unknown ids are dropped, skipSpecial
// drops special added tokens, and invalid UTF-8 becomes U+FFFD.
func (t *Tokenizer) Decode(dst []byte, ids []uint32, skipSpecial bool) []byte {
	if t.byteDec != nil {
		n := len(dst)
		for _, id := range ids {
			if int(id) >= len(t.byteDec) || !t.decKnown[id] || (skipSpecial && t.special[id]) {
				continue
			}
			dst = append(dst, t.byteDec[id]...)
		}
		if utf8.Valid(dst[n:]) {
			return dst
		}
		fixed := appendLossy(nil, dst[n:])
		return append(dst[:n], fixed...)
	}
	if t.fusedDec != nil {
		return t.fusedDec.decode(t, dst, ids, skipSpecial)
	}
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if int(id) >= len(t.decTokens) || !t.decKnown[id] || (skipSpecial && t.special[id]) {
			continue
		}
		toks = append(toks, t.decTokens[id])
	}
	if t.dec == nil {
		return append(dst, strings.Join(toks, " ")...)
	}
	for i := range t.dec {
		toks = t.dec[i].apply(toks)
	}
	for _, s := range toks {
		dst = append(dst, s...)
	}
	return dst
}

func (d *decStep) apply(toks []string) []string {
	switch d.kind {
	case decByteLevel:
		var b []byte
		for _, tok := range toks {
			b = byteLevelBytes(b, tok)
		}
		return []string{string(appendLossy(nil, b))}
	case decFuse:
		return []string{strings.Join(toks, "")}
	case decReplace:
		for i, tok := range toks {
			toks[i] = strings.ReplaceAll(tok, d.a, d.b)
		}
		return toks
	case decByteFallback:
		out := make([]string, 0, len(toks))
		var pending []byte
		flush := func() {
			if len(pending) == 0 {
				return
			}
			if utf8.Valid(pending) {
				out = append(out, string(pending))
			} else {
				for range pending {
					out = append(out, "\uFFFD")
				}
			}
			pending = pending[:0]
		}
		for _, tok := range toks {
			if len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' {
				if v, err := strconv.ParseUint(tok[3:5], 16, 8); err == nil {
					pending = append(pending, byte(v))
					continue
				}
			}
			flush()
			out = append(out, tok)
		}
		flush()
		return out
	case decStrip:
		for i, tok := range toks {
			rs := []rune(tok)
			lo := 0
			for lo < d.start && lo < len(rs) && rs[lo] == d.r {
				lo++
			}
			hi := len(rs)
			for k := 0; k < d.stop && hi > lo && rs[hi-1] == d.r; k++ {
				hi--
			}
			toks[i] = string(rs[lo:hi])
		}
		return toks
	case decMetaspace:
		for i, tok := range toks {
			var b strings.Builder
			for _, r := range tok {
				if r == d.r {
					if i == 0 && d.prependFirst {
						continue
					}
					b.WriteByte(' ')
				} else {
					b.WriteRune(r)
				}
			}
			toks[i] = b.String()
		}
		return toks
	}
	return toks
}

// fusedDecoder runs the decoder chain Replace(a, b), ByteFallback, Fuse, Strip(r, start,
// stop) in one pass: the chain's steps commute with writing token by token, because Fuse
// makes one string of everything before Strip trims its ends.
type fusedDecoder struct {
	a, b        string
	r           rune
	start, stop int
}

func newFusedDecoder(dec []decStep) *fusedDecoder {
	if len(dec) != 4 || dec[0].kind != decReplace || dec[1].kind != decByteFallback || dec[2].kind != decFuse || dec[3].kind != decStrip || dec[0].a == "" {
		return nil
	}
	return &fusedDecoder{a: dec[0].a, b: dec[0].b, r: dec[3].r, start: dec[3].start, stop: dec[3].stop}
}

func (f *fusedDecoder) decode(t *Tokenizer, dst []byte, ids []uint32, skipSpecial bool) []byte {
	n := len(dst)
	pending := -1 // start in dst of the byte tokens not yet judged, or -1
	flush := func() {
		if pending < 0 {
			return
		}
		if bad := dst[pending:]; !utf8.Valid(bad) {
			k := len(bad)
			dst = dst[:pending]
			for range k {
				dst = append(dst, "\uFFFD"...)
			}
		}
		pending = -1
	}
	for _, id := range ids {
		if int(id) >= len(t.decTokens) || !t.decKnown[id] || (skipSpecial && t.special[id]) {
			continue
		}
		tok := t.decTokens[id]
		if len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' {
			if v, err := strconv.ParseUint(tok[3:5], 16, 8); err == nil {
				if pending < 0 {
					pending = len(dst)
				}
				dst = append(dst, byte(v))
				continue
			}
		}
		flush()
		// appendReplaceAll inlined: a call per token costs a fifth of
		// Decode on the Metaspace family.
		for {
			i := strings.Index(tok, f.a)
			if i < 0 {
				break
			}
			dst = append(append(dst, tok[:i]...), f.b...)
			tok = tok[i+len(f.a):]
		}
		dst = append(dst, tok...)
	}
	flush()
	out := dst[n:]
	lo := 0
	for k := 0; k < f.start && lo < len(out); k++ {
		r, size := utf8.DecodeRune(out[lo:])
		if r != f.r {
			break
		}
		lo += size
	}
	hi := len(out)
	for k := 0; k < f.stop && hi > lo; k++ {
		r, size := utf8.DecodeLastRune(out[lo:hi])
		if r != f.r {
			break
		}
		hi -= size
	}
	if lo > 0 {
		copy(out, out[lo:hi])
	}
	return dst[:n+hi-lo]
}

// appendLossy appends b with each maximal invalid UTF-8 subpart replaced by
// U+FFFD, as Rust's String::from_utf8_lossy.
func appendLossy(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		k := maximalSubpart(b)
		dst = append(dst, "\uFFFD"...)
		b = b[k:]
	}
	return dst
}

// utf8Lead is one row of the Unicode Standard's table of well-formed UTF-8
// byte sequences (Table 3-7): a lead byte in first..last takes need
// continuation bytes, the first of them in lo..hi, the others in 0x80..0xBF.
type utf8Lead struct {
	first, last byte
	need        int
	lo, hi      byte
}

var utf8Leads = [...]utf8Lead{
	{0xC2, 0xDF, 1, 0x80, 0xBF},
	{0xE0, 0xE0, 2, 0xA0, 0xBF},
	{0xE1, 0xEC, 2, 0x80, 0xBF},
	{0xED, 0xED, 2, 0x80, 0x9F},
	{0xEE, 0xEF, 2, 0x80, 0xBF},
	{0xF0, 0xF0, 3, 0x90, 0xBF},
	{0xF1, 0xF3, 3, 0x80, 0xBF},
	{0xF4, 0xF4, 3, 0x80, 0x8F},
}

// maximalSubpart returns the length of the maximal subpart at the start of
// b, which holds no valid UTF-8 character there: the longest prefix of a
// well-formed sequence, or 1.
func maximalSubpart(b []byte) int {
	for _, l := range &utf8Leads {
		if b[0] < l.first || b[0] > l.last {
			continue
		}
		if len(b) < 2 || b[1] < l.lo || b[1] > l.hi {
			return 1
		}
		i := 2
		for i <= l.need && i < len(b) && b[i] >= 0x80 && b[i] <= 0xBF {
			i++
		}
		return i
	}
	return 1
}
