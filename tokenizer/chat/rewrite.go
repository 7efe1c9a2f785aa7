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

	var out strings.Builder
	out.Grow(len(src) + len(src)/4)
	lineStarting := true // jinja2: the previous match ended with "\n"
	inRaw := false
	rawText := ""
	emitText := func(t string) {
		if t == "" {
			return
		}
		out.WriteString("{{ '")
		for i := 0; i < len(t); i++ {
			if t[i] == '\\' || t[i] == '\'' {
				out.WriteByte('\\')
			}
			out.WriteByte(t[i])
		}
		out.WriteString("' }}")
	}
	emitLines := func(n int) {
		if n > 0 {
			out.WriteString("{#" + strings.Repeat("\n", n) + "#}")
		}
	}
	i := 0
	for {
		tag, ok := nextTag(src, i)
		if !ok {
			// No further (closed) tag: the rest is text, unless an
			// unclosed tag follows, which is left for the engine.
			if inRaw {
				emitText(rawText)
				out.WriteString("{% raw %}")
				out.WriteString(src[i:])
				return out.String()
			}
			if tag.start >= 0 {
				emitText(src[i:tag.start])
				out.WriteString(src[tag.start:])
			} else {
				emitText(src[i:])
			}
			return out.String()
		}
		text := src[i:tag.start]
		i = tag.end
		word := ""
		if tag.kind == '%' {
			word = stmtWord(tag.body)
		}
		if inRaw {
			rawText += text
			if word != "endraw" {
				rawText += src[tag.start:tag.end]
				continue
			}
			text, rawText = rawText, ""
			inRaw = false
		}
		// Left side of the tag: "-" strips all whitespace before it;
		// otherwise lstrip_blocks strips the indentation of a block or
		// comment tag that starts its line.
		full := text
		switch {
		case tag.open == '-':
			text = strings.TrimRightFunc(text, isPySpace)
		case tag.open != '+' && tag.kind != '{':
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lineStarting) && lpos < len(text) && strings.TrimLeftFunc(text[lpos:], isPySpace) == "" {
				text = text[:lpos]
			}
		}
		emitText(text)
		// Newlines dropped from the source go into empty comments, so the
		// engine's error messages keep the source's line numbers.
		emitLines(strings.Count(full[len(text):], "\n"))
		// The tag itself.
		switch {
		case tag.kind == '#', word == "raw", word == "endraw":
			inRaw = word == "raw"
			emitLines(strings.Count(tag.body, "\n"))
		case tag.kind == '{':
			body := renameFilters(pyStrings(tag.body))
			if strings.TrimSpace(body) == "" || printsString(body) {
				out.WriteString("{{" + body + "}}")
			} else {
				out.WriteString("{{ (" + body + ") | " + printFilter + " }}")
			}
		default:
			out.WriteString("{%" + renameFilters(pyStrings(tag.body)) + "%}")
		}
		// Right side: "-" eats all following whitespace; trim_blocks eats
		// one newline after a block or comment tag ({% raw %} excepted);
		// "+" keeps everything.
		consumed := ""
		switch {
		case tag.close == '-':
			rest := strings.TrimLeftFunc(src[i:], isPySpace)
			consumed = src[i : len(src)-len(rest)]
		case tag.close != '+' && tag.kind != '{' && word != "raw" && i < len(src) && src[i] == '\n':
			consumed = "\n"
		}
		i += len(consumed)
		lineStarting = strings.HasSuffix(consumed, "\n")
		emitLines(strings.Count(consumed, "\n"))
	}
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
			i++
			for i < len(src) && src[i] != c {
				if src[i] == '\\' && i+1 < len(src) {
					i++
				}
				i++
			}
			if i < len(src) {
				i++
			}
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
			i++
			for i < len(body) && body[i] != c {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				i++
			}
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
// attribute, item and call postfixes), no
// keywords (if, and, or, not, in, is) or comparisons, and either has a ~
// (the engine's ~ always yields a string) or one of its + operands is a bare
// string literal or ends in the tojson filter (the engine's + yields a string
// when either side is one).
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
			i++
			for i < len(body) && body[i] != c {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				i++
			}
			i++
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
			k := i
			for k < len(body) && isIdentByte(body[k]) {
				k++
			}
			switch body[i:k] {
			case "if", "else", "and", "or", "not", "in", "is":
				if depth == 0 {
					return false
				}
			}
			if depth == 0 {
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
			for i < len(body) && body[i] == ' ' {
				i++
			}
			if k := i + len(tojsonFilter); strings.HasPrefix(body[i:], tojsonFilter) && (k == len(body) || !isIdentByte(body[k])) {
				i = k
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
		j := i + 1
		for j < len(body) && body[j] != q {
			if body[j] == '\\' && j+1 < len(body) {
				j++
			}
			j++
		}
		if j >= len(body) {
			break // unterminated: leave for the engine
		}
		out.WriteString(body[last:i])
		out.WriteByte('\'')
		for _, c := range []byte(pyUnescape(body[i+1 : j])) {
			if c == '\\' || c == '\'' {
				out.WriteByte('\\')
			}
			out.WriteByte(c)
		}
		out.WriteByte('\'')
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
		switch c := s[i]; c {
		case '\n':
			// line continuation
		case '\\', '\'', '"':
			b = append(b, c)
		case 'a':
			b = append(b, '\a')
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'v':
			b = append(b, '\v')
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
			i++
			for i < len(body) && body[i] != c {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				i++
			}
			i = min(i+1, len(body))
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
	// Each wrapped operand [from, to) inserts "(" at from and ") | str" at
	// to; insertions are applied at the end in offset order, closings
	// before openings at the same offset.
	type insertion struct {
		at    int
		close bool
	}
	var ins []insertion
	isDelim := func(s string) bool {
		switch s {
		case "==", "!=", "<", ">", "<=", ">=", ",", ":", "=", "in", "is", "not", "and", "or", "if", "else":
			return true
		}
		return false
	}
	// walk processes tokens from i up to the bracket closing the current
	// group (or the end) and returns the index after it.
	var walk func(i int) int
	walk = func(i int) int {
		segStart := i
		var tildes []int
		flush := func(end int) {
			if len(tildes) > 0 {
				bounds := append([]int{segStart - 1}, tildes...)
				bounds = append(bounds, end)
				for k := 0; k+1 < len(bounds); k++ {
					opStart, opEnd := bounds[k]+1, bounds[k+1]
					if opStart >= opEnd {
						continue
					}
					ins = append(ins, insertion{toks[opStart].start, false}, insertion{tokEnd(toks[opEnd-1]), true})
				}
			}
			tildes = tildes[:0]
		}
		for i < len(toks) {
			t := toks[i].text
			switch {
			case t == "(" || t == "[" || t == "{":
				i = walk(i + 1)
				continue
			case t == ")" || t == "]" || t == "}":
				flush(i)
				return i + 1
			case t == "~":
				tildes = append(tildes, i)
			case isDelim(t):
				flush(i)
				segStart = i + 1
			}
			i++
		}
		flush(i)
		return i
	}
	walk(0)
	slices.SortStableFunc(ins, func(a, b insertion) int {
		if a.at != b.at {
			return a.at - b.at
		}
		if a.close && !b.close {
			return -1
		}
		if b.close && !a.close {
			return 1
		}
		return 0
	})
	var out strings.Builder
	pos := 0
	for _, in := range ins {
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

func isTwoCharOp(s string) bool {
	switch s {
	case "==", "!=", "<=", ">=", "**", "//":
		return true
	}
	return false
}

func tokEnd(t exprToken) int { return t.start + len(t.text) }
