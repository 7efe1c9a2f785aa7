package chat

// escapeTable maps the character after a backslash in a one-character
// escape such as \n to the byte the escape stands for; 0 marks no such
// escape.
type escapeTable [128]byte

// lookup returns the byte that the escape \c stands for.
func (t *escapeTable) lookup(c byte) (byte, bool) {
	if c >= byte(len(t)) || t[c] == 0 {
		return 0, false
	}
	return t[c], true
}

var (
	// jsonEscapes are JSON's one-character escapes (RFC 8259, section 7).
	jsonEscapes = escapeTable{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
	// pythonEscapes are the one-character escapes of Python string literals.
	pythonEscapes = escapeTable{'\\': '\\', '\'': '\'', '"': '"', 'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}
)
