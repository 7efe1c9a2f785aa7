package chat

import "strings"

// Names the rewritten source uses for the functions this package supplies.
// They are passed as template variables, so a template cannot reach them by
// any other name than these (they start with "__", which no chat template
// uses).
const (
	printFilter  = "__smg_str"
	tojsonFilter = "__smg_tojson"
)

// rewriteSource adapts a Hugging Face chat template to the jinja engine
// while keeping its meaning under Python jinja2:
//
//   - newlines are normalised to "\n" and one trailing newline is dropped
//     (jinja2's newline_sequence and keep_trailing_newline=False);
//   - every {{ expr }} becomes {{ (expr) | __smg_str }} so values print the
//     way Python's str() prints them (None, floats, list and dict repr),
//     except where the expression is a string by construction (see
//     printsString), which saves a filter call per output;
//   - every "| tojson" filter becomes "| __smg_tojson", transformers' tojson
//     (json.dumps with ensure_ascii=False and its indent, separators and
//     sort_keys arguments), because the engine resolves its built-in filters
//     before template variables and its own tojson differs from json.dumps.
//
// Tags are found with the engine's own scanning rules (quotes inside a tag
// are skipped; {% raw %} blocks are copied untouched), so the rewrite never
// changes what the engine sees as text.
func rewriteSource(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	src = strings.TrimSuffix(src, "\n")

	var out strings.Builder
	out.Grow(len(src) + len(src)/8)
	inRaw := false
	i := 0
	for i < len(src) {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			out.WriteString(src[i:])
			break
		}
		j += i
		var closer string
		switch src[j+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		default:
			out.WriteString(src[i : j+1])
			i = j + 1
			continue
		}
		out.WriteString(src[i:j])
		contentStart := j + 2
		if contentStart < len(src) && src[contentStart] == '-' {
			contentStart++
		}
		contentEnd, tagEnd, ok := findCloser(src, contentStart, closer, closer == "#}")
		if !ok {
			// Unclosed tag: leave the rest alone, the engine reports it.
			out.WriteString(src[j:])
			break
		}
		open := src[j:contentStart]
		body := src[contentStart:contentEnd]
		end := src[contentEnd:tagEnd]
		i = tagEnd

		switch {
		case closer == "#}":
			out.WriteString(src[j:tagEnd])
			continue
		case inRaw:
			if closer == "%}" && stmtWord(body) == "endraw" {
				inRaw = false
			}
			out.WriteString(src[j:tagEnd])
			continue
		case closer == "%}" && stmtWord(body) == "raw":
			inRaw = true
			out.WriteString(src[j:tagEnd])
			continue
		}
		body = renameFilter(body, "tojson", tojsonFilter)
		out.WriteString(open)
		if closer == "}}" && strings.TrimSpace(body) != "" && !printsString(body) {
			out.WriteString(" (")
			out.WriteString(body)
			out.WriteString(") | " + printFilter + " ")
		} else {
			out.WriteString(body)
		}
		out.WriteString(end)
	}
	return out.String()
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
