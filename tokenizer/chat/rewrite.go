package chat

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names the rewritten source uses for the functions this package supplies.
// They are passed as template variables, so a template cannot reach them by
// any other name than these (they start with "__", which no chat template
// uses).
const (
	printFilter  = "__smg_str"
	tojsonFilter = "__smg_tojson"
	joinFilter   = "__smg_join"
)

// rewriteSource adapts a Hugging Face chat template to the jinja engine
// while keeping its meaning under Python jinja2 as transformers configures
// it:
//
//   - newlines are normalised to "\n" and one trailing newline is dropped
//     (jinja2's newline_sequence and keep_trailing_newline=False);
//   - whitespace control is applied here, exactly as jinja2's lexer applies
//     it ("-" and "+" markers, lstrip_blocks, trim_blocks), and every piece
//     of template text is handed to the engine as a string literal output
//     ({{ '...' }}), with the markers removed from the tags. The engine's own
//     trimming then has no text to act on: it trims across intervening tags
//     (a "{%- if %}" after "{{ x }}" strips text before the {{ x }}), which
//     jinja2 does not;
//   - comments are dropped and {% raw %} blocks become literals (newlines
//     removed from the source reappear inside empty comments, keeping line
//     numbers in the engine's errors);
//   - string literals in tags are decoded with Python's escapes (\xhh,
//     \uXXXX, \r, ...) and re-quoted with the few escapes the engine knows;
//   - every {{ expr }} becomes {{ (expr) | __smg_str }} so values print the
//     way Python's str() prints them (None, floats, list and dict repr),
//     except where the expression is a string by construction (see
//     printsString), which saves a filter call per output;
//   - "| string" becomes "| __smg_str" (Python's str(), as above), and so
//     does every operand of "~" (see wrapConcat); "| join" becomes
//     "| __smg_join", which converts items with str() too;
//   - every "| tojson" filter becomes "| __smg_tojson", transformers' tojson
//     (json.dumps with ensure_ascii=False and its indent, separators and
//     sort_keys arguments), because the engine resolves its built-in filters
//     before template variables and its own tojson differs from json.dumps.
//
// Tags are found with the engine's own scanning rules (quotes inside a tag
// are skipped), so the rewrite and the engine agree on where tags are. An
// unclosed tag is left in place for the engine to report.
func rewriteSource(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	src = strings.TrimSuffix(src, "\n")

	r := rewriter{src: src, lineStarting: true}
	r.out.Grow(len(src) + len(src)/4)
	for i := 0; ; {
		t, ok := nextTag(src, i)
		if !ok {
			r.finish(i, t)
			return r.out.String()
		}
		i = r.rewriteTag(src[i:t.start], t)
	}
}

// rewriter is the state of one rewriteSource.
type rewriter struct {
	src          string
	out          strings.Builder
	lineStarting bool   // jinja2: the previous match ended with "\n"
	inRaw        bool   // inside {% raw %}
	rawText      string // the source of the raw block so far
}

// rewriteTag writes the template text before t and t itself, and returns the
// source offset after the tag and the whitespace its right side trims.
func (r *rewriter) rewriteTag(text string, t tag) int {
	word := ""
	if t.kind == '%' {
		word = stmtWord(t.body)
	}
	if r.inRaw {
		r.rawText += text
		if word != "endraw" {
			r.rawText += r.src[t.start:t.end]
			return t.end
		}
		text, r.rawText = r.rawText, ""
		r.inRaw = false
	}
	r.textBefore(text, t)
	r.writeTag(t, word)
	trimmed := r.trimmedAfter(t, word)
	r.lineStarting = strings.HasSuffix(trimmed, "\n")
	r.emitLines(strings.Count(trimmed, "\n"))
	return t.end + len(trimmed)
}

// textBefore writes the text before tag t, trimmed on the tag's left side:
// "-" strips all whitespace before it; otherwise lstrip_blocks strips the
// indentation of a block or comment tag that starts its line.
func (r *rewriter) textBefore(text string, t tag) {
	full := text
	switch {
	case t.open == '-':
		text = strings.TrimRightFunc(text, isPySpace)
	case t.open != '+' && t.kind != '{':
		lpos := strings.LastIndexByte(text, '\n') + 1
		if (lpos > 0 || r.lineStarting) && lpos < len(text) && strings.TrimLeftFunc(text[lpos:], isPySpace) == "" {
			text = text[:lpos]
		}
	}
	r.emitText(text)
	r.emitLines(strings.Count(full[len(text):], "\n"))
}

// writeTag writes tag t rewritten for the engine; comments and raw markers
// leave only their newlines.
func (r *rewriter) writeTag(t tag, word string) {
	switch {
	case t.kind == '#', word == "raw", word == "endraw":
		r.inRaw = word == "raw"
		r.emitLines(strings.Count(t.body, "\n"))
	case t.kind == '{':
		body := renameFilters(pyStrings(t.body))
		if strings.TrimSpace(body) == "" || printsString(body) {
			r.out.WriteString("{{" + body + "}}")
		} else {
			r.out.WriteString("{{ (" + body + ") | " + printFilter + " }}")
		}
	default:
		r.out.WriteString("{%" + renameFilters(pyStrings(t.body)) + "%}")
	}
}

// trimmedAfter returns the source text after tag t that its right side
// trims: "-" eats all following whitespace; trim_blocks eats one newline
// after a block or comment tag ({% raw %} excepted); "+" keeps everything.
func (r *rewriter) trimmedAfter(t tag, word string) string {
	rest := r.src[t.end:]
	switch {
	case t.close == '-':
		return rest[:len(rest)-len(strings.TrimLeftFunc(rest, isPySpace))]
	case t.close != '+' && t.kind != '{' && word != "raw" && strings.HasPrefix(rest, "\n"):
		return "\n"
	}
	return ""
}

// finish writes the source from i on, which holds no closed tag: text, and
// an unclosed tag (at t.start when that is not -1) left for the engine to
// report.
func (r *rewriter) finish(i int, t tag) {
	switch {
	case r.inRaw:
		r.emitText(r.rawText)
		r.out.WriteString("{% raw %}")
		r.out.WriteString(r.src[i:])
	case t.start >= 0:
		r.emitText(r.src[i:t.start])
		r.out.WriteString(r.src[t.start:])
	default:
		r.emitText(r.src[i:])
	}
}

// emitText writes template text as a string literal output.
func (r *rewriter) emitText(text string) {
	if text == "" {
		return
	}
	r.out.WriteString("{{ ")
	writeQuoted(&r.out, text)
	r.out.WriteString(" }}")
}

// emitLines writes n newlines inside an empty comment: newlines dropped from
// the source, so the engine's error messages keep the source's line numbers.
func (r *rewriter) emitLines(n int) {
	if n > 0 {
		r.out.WriteString("{#" + strings.Repeat("\n", n) + "#}")
	}
}

// writeQuoted writes s as an engine string literal: in single quotes, with
// \\ and \' escaped, the escapes the engine's lexer understands.
func writeQuoted(out *strings.Builder, s string) {
	out.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '\'' {
			out.WriteByte('\\')
		}
		out.WriteByte(s[i])
	}
	out.WriteByte('\'')
}

// isPySpace reports whether Python's str.isspace holds for r.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// tag is one {{ }}, {% %} or {# #} tag of a template source.
type tag struct {
	kind        byte // '{', '%' or '#'
	start, end  int  // source offsets of the whole tag
	body        string
	open, close byte // whitespace-control sign after the opener / before the closer: '-', '+' or 0
}

// nextTag finds the first closed tag at or after from. When the first tag
// found is unclosed it returns ok false with tag.start set to its offset;
// with no tag at all tag.start is -1.
func nextTag(src string, from int) (t tag, ok bool) {
	t.start = -1
	for i := from; i+1 < len(src); i++ {
		if src[i] != '{' {
			continue
		}
		var closer string
		switch src[i+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		default:
			continue
		}
		t.start, t.kind = i, src[i+1]
		bodyStart := i + 2
		if bodyStart < len(src) && (src[bodyStart] == '-' || src[bodyStart] == '+') {
			t.open = src[bodyStart]
			bodyStart++
		}
		bodyEnd, tagEnd, found := findCloser(src, bodyStart, closer, t.kind == '#')
		if !found {
			return t, false
		}
		if src[bodyEnd] == '-' {
			t.close = '-'
		} else if t.kind != '{' && bodyEnd > bodyStart && src[bodyEnd-1] == '+' {
			t.close = '+'
			bodyEnd--
		}
		t.body, t.end = src[bodyStart:bodyEnd], tagEnd
		return t, true
	}
	return t, false
}

// findCloser finds the end of a tag body starting at from: the index where
// the body ends (before an optional '-') and the index just past the closer.
// Quoted strings are skipped except in comments, as the engine's scanner does.
func findCloser(src string, from int, closer string, comment bool) (bodyEnd, tagEnd int, ok bool) {
	i := from
	for i < len(src) {
		c := src[i]
		if !comment && (c == '\'' || c == '"') {
			i = min(quoteEnd(src, i)+1, len(src))
			continue
		}
		if c == '-' && i+2 < len(src) && src[i+1] == closer[0] && src[i+2] == closer[1] {
			return i, i + 3, true
		}
		if i+1 < len(src) && c == closer[0] && src[i+1] == closer[1] {
			return i, i + 2, true
		}
		i++
	}
	return 0, 0, false
}

// quoteEnd returns the offset of the quote that closes the string literal
// opening at s[i] (a backslash escapes the character after it), or len(s)
// when the literal is unterminated.
func quoteEnd(s string, i int) int {
	q := s[i]
	for i++; i < len(s) && s[i] != q; i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
	}
	return i
}

// stmtWord returns the first word of a statement body.
func stmtWord(body string) string {
	body = strings.TrimLeft(body, " \t\n")
	n := 0
	for n < len(body) && (isIdentByte(body[n]) && (body[n] < '0' || body[n] > '9')) {
		n++
	}
	return body[:n]
}

func isIdentByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// renameFilters points the filters this package supplies at their
// implementations: tojson at transformers' tojson, string at Python's str(),
// join at a join that converts items with str().
func renameFilters(body string) string {
	body = renameFilter(body, "tojson", tojsonFilter)
	body = renameFilter(body, "string", printFilter)
	body = renameFilter(body, "join", joinFilter)
	return wrapConcat(body)
}

// renameFilter replaces the filter name from in "| from" (outside string
// literals) with to.
func renameFilter(body, from, to string) string {
	if !strings.Contains(body, from) {
		return body
	}
	var out strings.Builder
	last := 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\'' || c == '"' {
			i = quoteEnd(body, i)
			continue
		}
		if c != '|' {
			continue
		}
		k := i + 1
		for k < len(body) && (body[k] == ' ' || body[k] == '\t' || body[k] == '\n' || body[k] == '\r') {
			k++
		}
		if strings.HasPrefix(body[k:], from) && (k+len(from) == len(body) || !isIdentByte(body[k+len(from)])) {
			out.WriteString(body[last:k])
			out.WriteString(to)
			last = k + len(from)
			i = last - 1
		}
	}
	if last == 0 {
		return body
	}
	out.WriteString(body[last:])
	return out.String()
}

// printsString reports whether an expression certainly evaluates to a
// string in the engine, so printing it needs no Python str() conversion: at
// its top level (outside brackets) it uses only the operators + and ~ (and
// attribute, item and call postfixes), no keywords (if, and, or, not, in,
// is) or comparisons, and either has a ~ (the engine's ~ always yields a
// string) or one of its + operands is a bare string literal or ends in the
// tojson filter (the engine's + yields a string when either side is one).
func printsString(body string) bool {
	const (
		other   = iota // operand of unknown type
		literal        // operand so far is one bare string literal
		json           // operand so far ends in | tojson (args may follow)
	)
	stringy := false
	state, fresh := other, true // fresh: at the start of an operand
	depth := 0
	for i := 0; i < len(body); {
		c := body[i]
		if c == '\'' || c == '"' {
			i = quoteEnd(body, i) + 1
			if depth == 0 {
				if fresh {
					state = literal
				} else {
					state = other
				}
				fresh = false
			}
			continue
		}
		if isIdentByte(c) {
			k := i + 1
			for k < len(body) && isIdentByte(body[k]) {
				k++
			}
			if depth == 0 {
				if isExprKeyword(body[i:k]) {
					return false
				}
				state, fresh = other, false
			}
			i = k
			continue
		}
		i++
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '(', '[', '{':
			if depth == 0 && !(c == '(' && state == json) {
				state = other
			}
			depth++
			continue
		case ')', ']', '}':
			depth--
			continue
		}
		if depth > 0 {
			continue
		}
		switch c {
		case '.':
			state, fresh = other, false
		case '+', '~':
			if c == '~' || state != other {
				stringy = true
			}
			state, fresh = other, true
		case '|':
			var isJSON bool
			if i, isJSON = skipFilterName(body, i, tojsonFilter); isJSON {
				state = json
			} else {
				state = other
			}
			fresh = false
		default:
			return false
		}
	}
	return depth == 0 && (stringy || state != other)
}

// isExprKeyword reports whether word is one of the keywords that make an
// expression more than a chain of operands: if, else, and, or, not, in, is.
func isExprKeyword(word string) bool {
	switch word {
	case "if", "else", "and", "or", "not", "in", "is":
		return true
	}
	return false
}

// skipFilterName reports whether the filter named after a "|" (spaces from
// i on skipped) is name, and returns the offset after the name if it is, or
// after the spaces if it is not.
func skipFilterName(body string, i int, name string) (int, bool) {
	for i < len(body) && body[i] == ' ' {
		i++
	}
	if k := i + len(name); strings.HasPrefix(body[i:], name) && (k == len(body) || !isIdentByte(body[k])) {
		return k, true
	}
	return i, false
}

// pyStrings rewrites the string literals of a tag body: each is decoded the
// way jinja2 decodes it (Python's unicode-escape) and re-quoted with only
// \\ and \' escaped, the escapes the engine's lexer understands.
func pyStrings(body string) string {
	if strings.IndexByte(body, '\\') < 0 {
		return body // nothing to decode; quotes stay as they are
	}
	var out strings.Builder
	last := 0
	for i := 0; i < len(body); i++ {
		q := body[i]
		if q != '\'' && q != '"' {
			continue
		}
		j := quoteEnd(body, i)
		if j >= len(body) {
			break // unterminated: leave for the engine
		}
		out.WriteString(body[last:i])
		writeQuoted(&out, pyUnescape(body[i+1:j]))
		last = j + 1
		i = j
	}
	out.WriteString(body[last:])
	return out.String()
}

// pyUnescape decodes Python string-literal escapes; unknown escapes keep
// their backslash, as Python does.
func pyUnescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b = append(b, s[i])
			continue
		}
		i++
		c := s[i]
		if e, ok := pythonEscapes.lookup(c); ok {
			b = append(b, e)
			continue
		}
		switch c {
		case '\n':
			// line continuation
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+n <= len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil && utf8.ValidRune(rune(v)) {
					b = utf8.AppendRune(b, rune(v))
					i += n
					continue
				}
			}
			b = append(b, '\\', c)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, k := 0, i
			for k < len(s) && k < i+3 && s[k] >= '0' && s[k] <= '7' {
				v = v*8 + int(s[k]-'0')
				k++
			}
			b = utf8.AppendRune(b, rune(v))
			i = k - 1
		default:
			b = append(b, '\\', c)
		}
	}
	return string(b)
}

// exprToken is one lexical token of a tag body, for wrapConcat.
type exprToken struct {
	text  string
	start int
}

// lexBody splits a tag body into tokens: string literals, names and
// numbers, two-character operators, and single characters. Whitespace is
// dropped; start records each token's offset.
func lexBody(body string) []exprToken {
	var toks []exprToken
	for i := 0; i < len(body); {
		c := body[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '\'' || c == '"':
			i = min(quoteEnd(body, i)+1, len(body))
		case isIdentByte(c):
			for i < len(body) && (isIdentByte(body[i]) || (body[i] == '.' && c >= '0' && c <= '9')) {
				i++
			}
		case i+1 < len(body) && isTwoCharOp(body[i:i+2]):
			i += 2
		default:
			i++
		}
		toks = append(toks, exprToken{body[start:i], start})
	}
	return toks
}

// wrapConcat rewrites every operand of the ~ operator to
// (operand) | __smg_str, so it is converted with Python's str() as jinja2
// does, rather than with the engine's Go formatting (floats as %g, None as
// ""). Operands are delimited by ~ itself and by every construct of lower
// precedence: comparisons, in, is, not, and, or, if, else, commas, colons,
// "=" and brackets.
func wrapConcat(body string) string {
	if !strings.Contains(body, "~") {
		return body
	}
	toks := lexBody(body)
	if !slices.ContainsFunc(toks, func(t exprToken) bool { return t.text == "~" }) {
		return body // the ~ is inside a string literal
	}
	w := concatWrapper{toks: toks}
	w.group(0)
	return w.apply(body)
}

// concatWrapper collects the insertions that wrap the operands of ~.
type concatWrapper struct {
	toks []exprToken
	ins  []insertion
}

// insertion is "(" (close false) or ") | __smg_str" (close true) inserted
// at a source offset.
type insertion struct {
	at    int
	close bool
}

// group walks tokens from i up to the bracket closing the current group (or
// the end) and returns the index after it.
func (w *concatWrapper) group(i int) int {
	segStart := i
	var tildes []int
	for i < len(w.toks) {
		switch t := w.toks[i].text; {
		case t == "(" || t == "[" || t == "{":
			i = w.group(i + 1)
			continue
		case t == ")" || t == "]" || t == "}":
			w.wrapOperands(segStart, tildes, i)
			return i + 1
		case t == "~":
			tildes = append(tildes, i)
		case endsConcatOperand(t):
			w.wrapOperands(segStart, tildes, i)
			tildes = tildes[:0]
			segStart = i + 1
		}
		i++
	}
	w.wrapOperands(segStart, tildes, i)
	return i
}

// wrapOperands wraps each operand of the tokens [start, end), which the ~
// operators at tildes divide; with no ~ there is nothing to wrap.
func (w *concatWrapper) wrapOperands(start int, tildes []int, end int) {
	if len(tildes) == 0 {
		return
	}
	from := start
	for k := 0; k <= len(tildes); k++ {
		to := end
		if k < len(tildes) {
			to = tildes[k]
		}
		if from < to {
			w.ins = append(w.ins, insertion{w.toks[from].start, false}, insertion{tokEnd(w.toks[to-1]), true})
		}
		from = to + 1
	}
}

// apply returns body with the insertions made, in offset order and closings
// before openings at the same offset.
func (w *concatWrapper) apply(body string) string {
	slices.SortStableFunc(w.ins, func(a, b insertion) int {
		switch {
		case a.at != b.at:
			return a.at - b.at
		case a.close == b.close:
			return 0
		case a.close:
			return -1
		}
		return 1
	})
	var out strings.Builder
	pos := 0
	for _, in := range w.ins {
		out.WriteString(body[pos:in.at])
		if in.close {
			out.WriteString(") | " + printFilter)
		} else {
			out.WriteString("(")
		}
		pos = in.at
	}
	out.WriteString(body[pos:])
	return out.String()
}

// endsConcatOperand reports whether token t binds less tightly than ~ and so
// delimits its operands: comparisons, in, is, not, and, or, if, else,
// commas, colons and "=".
func endsConcatOperand(t string) bool {
	switch t {
	case "==", "!=", "<", ">", "<=", ">=", ",", ":", "=":
		return true
	}
	return isExprKeyword(t)
}

func isTwoCharOp(s string) bool {
	switch s {
	case "==", "!=", "<=", ">=", "**", "//":
		return true
	}
	return false
}

func tokEnd(t exprToken) int { return t.start + len(t.text) }
