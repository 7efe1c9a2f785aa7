package extract

import (
	"errors"
	"strconv"
)

// Sentinels for errors.Is. Every error Extract returns wraps exactly one of them, so the
// gateway can map them to a status without string matching; the message itself is written
// for the client, who sees it in the 400 response.
var (
	// ErrInvalidJSON: the body is not one well-formed JSON object. Returned as *SyntaxError.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrFieldType: a field routing reads has a value of the wrong type. Returned as
	// *FieldError.
	ErrFieldType = errors.New("field has the wrong type")
	// ErrUnknownRoute: Extract was called with a Route it does not know, a programming
	// error in the caller.
	ErrUnknownRoute = errors.New("extract: unknown route")
)

// SyntaxError reports where and why the body is not well-formed JSON.
type SyntaxError struct {
	// Offset is the zero-based index in the body of the byte at fault, or the body's length
	// when the body ended too early.
	Offset int
	// Expected, when set, names what should have been at Offset; the message then says
	// what was found there instead.
	Expected string
	// Msg describes the problem when Expected does not apply.
	Msg string

	found byte
	atEOF bool
}

func (e *SyntaxError) Error() string {
	b := make([]byte, 0, 96)
	b = append(b, "invalid JSON at byte "...)
	b = strconv.AppendInt(b, int64(e.Offset), 10)
	b = append(b, ": "...)
	if e.Expected == "" {
		return string(append(b, e.Msg...))
	}
	b = append(b, "expected "...)
	b = append(b, e.Expected...)
	b = append(b, ", found "...)
	switch c := e.found; {
	case e.atEOF:
		b = append(b, "end of input"...)
	case c >= 0x20 && c < 0x7f:
		b = strconv.AppendQuoteRune(b, rune(c))
	default:
		b = append(b, "byte 0x"...)
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return string(b)
}

// Unwrap makes errors.Is(err, ErrInvalidJSON) true.
func (e *SyntaxError) Unwrap() error { return ErrInvalidJSON }

const hexDigits = "0123456789abcdef"

// FieldError reports a routing field whose value has the wrong type, for example
// `"stream" must be a boolean`.
type FieldError struct {
	// Path names the field as a client would write it: `model`, `messages[2].content`.
	Path string
	// Want describes the accepted types: "a boolean", "a string or null", ...
	Want string
	// Offset is the zero-based index in the body where the offending value starts.
	Offset int
}

func (e *FieldError) Error() string {
	return strconv.Quote(e.Path) + " must be " + e.Want
}

// Unwrap makes errors.Is(err, ErrFieldType) true.
func (e *FieldError) Unwrap() error { return ErrFieldType }

// What each field accepts, worded for the client. null is accepted everywhere and means
// absent, as it does for encoding/json's pointers and slices.
const (
	wantString        = "a string"
	wantBoolean       = "a boolean"
	wantArray         = "an array"
	wantObject        = "an object"
	wantStrings       = "a string or an array of strings"
	wantContent       = "a string, an array of content parts, or null"
	wantPrompt        = "a string, an array of strings, an array of token IDs, or an array of token-ID arrays"
	wantTokenIDArrays = "an array of token IDs (integers from 0 to 4294967295) or an array of such arrays"
	wantInput         = "a string, an array of input items, or null"
)

// What the syntax errors expected, worded for the client.
const (
	expObjectBody     = "'{' (the request body must be a JSON object)"
	expNameOrBrace    = "'\"' to begin a member name, or '}'"
	expName           = "'\"' to begin a member name"
	expColon          = "':' after the member name"
	expCommaOrBrace   = "',' or '}' after the member value"
	expCommaOrBracket = "',' or ']' after the array element"
	expValue          = "a JSON value"
	expDigit          = "a digit"
	expLiteral        = "true, false or null"
	expHex            = "a hex digit of a \\u escape"
	expEscape         = "an escape character (one of \"\\/bfnrtu)"
	expEnd            = "end of input after the JSON object"
)
