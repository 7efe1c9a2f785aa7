package jsonscan

// MaxDepth is the deepest nesting of objects and arrays accepted, counting the outermost
// value as level 1. It equals encoding/json's limit, so both reject the same texts.
const MaxDepth = 10000

// Kind says what a scan found wrong: OK, or what was expected at the position returned.
type Kind uint8

const (
	OK                     Kind = iota
	ExpectedValue               // a JSON value
	ExpectedDigit               // a digit of a number
	ExpectedLiteral             // true, false or null
	ExpectedHex                 // a hex digit of a \u escape
	ExpectedEscape              // a character after a backslash
	ExpectedNameOrBrace         // '"' to begin a member name, or '}'
	ExpectedName                // '"' to begin a member name (after a ',')
	ExpectedColon               // ':' after a member name
	ExpectedCommaOrBrace        // ',' or '}' after a member value
	ExpectedCommaOrBracket      // ',' or ']' after an array element
	Unterminated                // a string without its closing quote; the position is its opening quote
	ControlChar                 // a byte below 0x20 inside a string, at the position
	TooDeep                     // a container opening level MaxDepth+1, at the position
)

// Stack is the container stack of SkipValue, one bit per nesting level (set for an
// object). 1.25 KiB: callers that scan often keep one in a pooled struct rather than zero
// one on the goroutine stack per call.
type Stack [MaxDepth/64 + 1]uint64

func (st *Stack) set(depth int, obj bool) {
	w, bit := depth>>6, uint64(1)<<(depth&63)
	if obj {
		st[w] |= bit
	} else {
		st[w] &^= bit
	}
}

func (st *Stack) object(depth int) bool {
	return st[depth>>6]&(uint64(1)<<(depth&63)) != 0
}

// SkipWS returns the position of the first byte at or after i that is not JSON whitespace
// (RFC 8259 §2: space, tab, line feed, carriage return), or len(b).
func SkipWS(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// Peek skips whitespace from i and returns the byte there, or 0 at the end of b (0 starts
// no JSON token, so callers treat it like any other unexpected byte), and its position.
func Peek(b []byte, i int) (byte, int) {
	i = SkipWS(b, i)
	if i < len(b) {
		return b[i], i
	}
	return 0, i
}

// Next consumes, after whitespace, the ',' between members or elements or the closer ('}'
// or ']') after a value, and returns the position after it; more reports a ','. When
// neither is there, ok is false and the position is the byte at fault, where a ',' or the
// closer was expected (ExpectedCommaOrBrace or ExpectedCommaOrBracket, by closer). It runs
// after every value, so it is kept small enough to inline: callers skip the whitespace
// after a ',' and choose the Kind themselves.
func Next(b []byte, i int, closer byte) (pos int, more, ok bool) {
	i = SkipWS(b, i)
	if i < len(b) && (b[i] == ',' || b[i] == closer) {
		return i + 1, b[i] == ',', true
	}
	return i, false, false
}

// Literal checks that lit ("true", "false" or "null") is at i and returns the position
// after it; ExpectedLiteral is reported at the first byte that differs.
func Literal(b []byte, i int, lit string) (int, Kind) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return i + k, ExpectedLiteral
		}
	}
	return i + len(lit), OK
}

// Number validates the number at i (RFC 8259 §6 grammar) and returns the position after
// it; ExpectedDigit is reported where a digit is missing.
func Number(b []byte, i int) (int, Kind) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		return i, ExpectedDigit
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, ExpectedDigit
		}
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, ExpectedDigit
		}
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	return i, OK
}

// Scalar validates the string, number or literal at i (whitespace already skipped) and
// returns the position after it.
func Scalar(b []byte, i int) (int, Kind) {
	if i >= len(b) {
		return i, ExpectedValue
	}
	switch c := b[i]; c {
	case '"':
		i, _, k := String(b, i)
		return i, k
	case 't':
		return Literal(b, i, "true")
	case 'f':
		return Literal(b, i, "false")
	case 'n':
		return Literal(b, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return Number(b, i)
		}
		return i, ExpectedValue
	}
}

// name scans `"name" :` at i in a container being skipped and returns the position of the
// value after it; want is the Kind to report when i is not at a quote.
func name(b []byte, i int, want Kind) (int, Kind) {
	if i >= len(b) || b[i] != '"' {
		return i, want
	}
	i, _, k := String(b, i)
	if k != OK {
		return i, k
	}
	c, i := Peek(b, i)
	if c != ':' {
		return i, ExpectedColon
	}
	return SkipWS(b, i+1), OK
}

// SkipValue validates the value at i, after optional whitespace, and returns the position
// after it. depth is the nesting level of the container holding the value (0 for a
// top-level value), so that MaxDepth counts from the outermost one. Containers are walked
// iteratively, their kinds kept in st.
func SkipValue(b []byte, i, depth int, st *Stack) (int, Kind) {
	i = SkipWS(b, i)
	if i >= len(b) || (b[i] != '{' && b[i] != '[') {
		return Scalar(b, i)
	}
	base := depth
	var k Kind
	for {
		// i is at the start of a value, whitespace skipped.
		if i < len(b) && (b[i] == '{' || b[i] == '[') {
			obj := b[i] == '{'
			depth++
			if depth > MaxDepth {
				return i, TooDeep
			}
			st.set(depth, obj)
			var c byte
			c, i = Peek(b, i+1)
			switch {
			case obj && c == '}', !obj && c == ']':
				i++
				depth--
			case obj:
				if i, k = name(b, i, ExpectedNameOrBrace); k != OK {
					return i, k
				}
				continue
			default:
				continue
			}
		} else if i, k = Scalar(b, i); k != OK {
			return i, k
		}
		// A value has ended: close containers until one continues with ','.
		for {
			if depth == base {
				return i, OK
			}
			obj := st.object(depth)
			closer := byte(']')
			if obj {
				closer = '}'
			}
			var more, ok bool
			if i, more, ok = Next(b, i, closer); !ok {
				if obj {
					return i, ExpectedCommaOrBrace
				}
				return i, ExpectedCommaOrBracket
			}
			if more {
				i = SkipWS(b, i)
				if obj {
					if i, k = name(b, i, ExpectedName); k != OK {
						return i, k
					}
				}
				break
			}
			depth--
		}
	}
}
