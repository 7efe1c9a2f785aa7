// Package split finds the matches of the regular expressions that Hugging Face
// tokenizers' Split pre-tokenizer uses, with hand-written scanners instead of a
// regex engine.
//
// # Why hand-written
//
// The patterns are Rust fancy-regex patterns. They use negative lookahead,
// \s+(?!\S), which Go's regexp (RE2) lacks, and they depend on backtracking,
// leftmost-first alternation. github.com/dlclark/regexp2 has both but is about
// two orders of magnitude slower than these scanners and allocates; it is used
// here only in tests, as the differential oracle. Each scanner spells out what
// the backtracking engine would do for its fixed pattern, alternative by
// alternative, in one forward pass with a 64 KiB class table for the BMP.
//
// # Patterns
//
// Compile accepts exactly these strings (as found in tokenizer.json after JSON
// decoding; literal CR/LF and the escapes \r/\n are interchangeable):
//
//   - PatternQwen2: Qwen2, Qwen2.5, Qwen3.
//   - PatternLlama3: Llama 3, cl100k_base (PatternQwen2 with \p{N}{1,3}).
//   - PatternGPT2: the regex built into ByteLevel with use_regex true.
//   - PatternDeepSeekDigits, PatternDeepSeekCJK, PatternDeepSeekWords: the
//     three Splits of DeepSeek V3, applied in that order.
//
// Any other pattern is an error; the tokenizer should refuse to load rather
// than split differently from Hugging Face.
//
// # Semantics
//
// Scanner.Next(s, start) returns the match find_at(s, start) would: the
// leftmost position >= start where the pattern matches, and there the first
// alternative that matches, with greedy quantifiers backtracking as needed.
// In particular:
//
//   - \s is Unicode White_Space (Rust regex; Go's unicode.IsSpace is the same
//     set), \p{L}, \p{N}, \p{M}, \p{P}, \p{S} are general categories from Go's
//     unicode tables. Rust may use a newer Unicode version; only code points
//     assigned since can differ.
//   - (?i:'s|'t|'re|'ve|'m|'ll|'d) uses simple case folding: 'S, 'LL, 'Re and
//     also 'ſ (U+017F) match. Only the apostrophe U+0027 counts, not ’.
//   - \s+(?!\S) takes a whitespace run whole at the end of the text, otherwise
//     the run minus its last rune (which then goes with the next word), and
//     fails for a single whitespace rune before a non-space, which \s+ then
//     takes. \s*[\r\n]+ ends just after the last CR or LF of the run.
//   - No pattern matches the empty string or looks behind its start, so
//     iterating Next from each match end reproduces find_iter.
//
// The Qwen2, Llama 3 and GPT-2 patterns match at every position, so their
// matches tile the text; the DeepSeek patterns leave gaps.
//
// # Pieces
//
// The Split pre-tokenizer with behavior Isolated (the only one these models
// use) emits each match and each non-empty gap between matches as a piece.
// Pieces is an allocation-free iterator over exactly those pieces:
//
//	sc, err := split.Compile(pattern)
//	...
//	it := split.NewPieces(sc, text)
//	for start, end, isMatch, ok := it.Next(); ok; start, end, isMatch, ok = it.Next() {
//		piece := text[start:end]
//		...
//	}
//
// Scanners are stateless values, safe for concurrent use; neither Next nor
// Pieces allocates. Input should be valid UTF-8 (a Rust &str always is); an
// invalid byte is treated as a one-byte character in no class, so nothing
// panics or stalls on it.
package split
