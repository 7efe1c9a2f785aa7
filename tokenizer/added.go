package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

type addedToken struct {
	id                         uint32
	content                    string
	singleWord, lstrip, rstrip bool
}

// addedMatcher finds added tokens leftmost-longest, as Hugging Face's
// aho-corasick matcher with MatchKind::LeftmostLongest.
type addedMatcher struct {
	none    bool
	byFirst [256][]*addedToken // by first byte, longest first
}

func newAddedMatcher(toks []addedToken) *addedMatcher {
	m := &addedMatcher{none: len(toks) == 0}
	for i := range toks {
		tk := &toks[i]
		b := tk.content[0]
		m.byFirst[b] = append(m.byFirst[b], tk)
	}
	for b := range m.byFirst {
		l := m.byFirst[b]
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].content) > len(l[j].content) })
	}
	return m
}

// find returns the leftmost-longest match at or after from, or a nil token.
func (m *addedMatcher) find(s string, from int) (int, int, *addedToken) {
	for i := from; i < len(s); i++ {
		for _, tk := range m.byFirst[s[i]] {
			if len(s)-i >= len(tk.content) && s[i:i+len(tk.content)] == tk.content {
				return i, i + len(tk.content), tk
			}
		}
	}
	return 0, 0, nil
}

// next returns the next match in s at or after from that its token's rules
// accept, off being where the previous split ended: the match [start,end)
// after lstrip and rstrip, the offset to search on from, and the token (nil
// when no match is left).
func (m *addedMatcher) next(s string, from, off int) (start, end, resume int, tk *addedToken) {
	for from < len(s) {
		start, end, tk := m.find(s, from)
		if tk == nil {
			break
		}
		from = end
		if start, end, ok := tk.accept(s, start, end, off); ok {
			return start, end, from, tk
		}
	}
	return 0, 0, len(s), nil
}

// accept applies single_word, lstrip and rstrip to a match [start,end) of
// s; off is where the previous split ended.
func (tk *addedToken) accept(s string, start, end, off int) (int, int, bool) {
	if tk.singleWord {
		if start > 0 {
			r, _ := utf8.DecodeLastRuneInString(s[:start])
			if isAlnum(r) {
				return 0, 0, false
			}
		}
		if end < len(s) {
			r, _ := utf8.DecodeRuneInString(s[end:])
			if isAlnum(r) {
				return 0, 0, false
			}
		}
	}
	if tk.lstrip {
		ns := start
		for ns > 0 {
			r, n := utf8.DecodeLastRuneInString(s[:ns])
			if !unicode.IsSpace(r) {
				break
			}
			ns -= n
		}
		start = max(ns, off)
	}
	if tk.rstrip {
		for end < len(s) {
			r, n := utf8.DecodeRuneInString(s[end:])
			if !unicode.IsSpace(r) {
				break
			}
			end += n
		}
	}
	if start < off {
		start = off
	}
	return start, end, true
}

// isAlnum is Rust's char::is_alphanumeric.
func isAlnum(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Other_Alphabetic, r)
}
