package telemetry

import (
	"bytes"
	"math"

	"github.com/smg-go/smg/internal/jsonscan"
)

// Members that carry the engines' token counts: the OpenAI routes' usage, and the
// meta_info of SGLang's /generate.
var (
	usageKey    = []byte(`"usage"`)
	metaInfoKey = []byte(`"meta_info"`)
)

// maxUsageTries bounds the "usage" members Usage tries from the end: a stream's chunks may
// each carry "usage":null before the one with the counts.
const maxUsageTries = 4

// Usage reads the token counts of the last usage object in b, an engine's whole JSON answer
// or the tail of its SSE stream: {"prompt_tokens":P,"completion_tokens":C,
// "prompt_tokens_details":{"cached_tokens":K}}, or, without one, of the last meta_info
// object (SGLang's /generate: {"prompt_tokens":P,"completion_tokens":C,"cached_tokens":K}).
// ok is false when b holds neither (or only a cut or malformed one); a count the object
// lacks is -1. It allocates nothing and reads only that object, so the relay can call it on
// the bytes it already holds.
func Usage(b []byte) (prompt, completion, cached int32, ok bool) {
	if prompt, completion, cached, ok = lastObject(b, usageKey); ok {
		return
	}
	return lastObject(b, metaInfoKey)
}

// lastObject reads the counts of the last member key of b that holds an object with them.
func lastObject(b, key []byte) (prompt, completion, cached int32, ok bool) {
	end := len(b)
	for range maxUsageTries {
		i := bytes.LastIndex(b[:end], key)
		if i < 0 {
			break
		}
		end = i
		if i > 0 && b[i-1] == '\\' { // inside a string: an escaped quote
			continue
		}
		if prompt, completion, cached, ok = usageObject(b, i+len(key)); ok {
			return
		}
	}
	return -1, -1, -1, false
}

// usageObject parses `: {...}` at i, the position after the member name.
func usageObject(b []byte, i int) (prompt, completion, cached int32, ok bool) {
	prompt, completion, cached = -1, -1, -1
	c, i := jsonscan.Peek(b, i)
	if c != ':' {
		return prompt, completion, cached, false
	}
	if c, i = jsonscan.Peek(b, i+1); c != '{' {
		return prompt, completion, cached, false
	}
	_, ok = members(b, i, func(name []byte, v int) (int, bool) {
		switch string(name) {
		case "prompt_tokens":
			return count(b, v, &prompt)
		case "completion_tokens":
			return count(b, v, &completion)
		case "cached_tokens": // meta_info's
			return count(b, v, &cached)
		case "prompt_tokens_details":
			if c, _ := jsonscan.Peek(b, v); c == '{' {
				return members(b, jsonscan.SkipWS(b, v), func(name []byte, v int) (int, bool) {
					if string(name) == "cached_tokens" {
						return count(b, v, &cached)
					}
					return skip(b, v)
				})
			}
		}
		return skip(b, v)
	})
	return prompt, completion, cached, ok && (prompt >= 0 || completion >= 0)
}

// members walks the object whose '{' is at i: member calls each member's value at its
// position and returns the position after it. members returns the position after the '}'.
func members(b []byte, i int, member func(name []byte, v int) (int, bool)) (int, bool) {
	c, i := jsonscan.Peek(b, i+1)
	if c == '}' {
		return i + 1, true
	}
	for {
		if c != '"' {
			return i, false
		}
		end, escaped, k := jsonscan.String(b, i)
		if k != jsonscan.OK {
			return end, false
		}
		name := b[i+1 : end-1]
		if escaped { // no usage member name has an escape
			name = nil
		}
		if c, i = jsonscan.Peek(b, end); c != ':' {
			return i, false
		}
		var ok bool
		if i, ok = member(name, jsonscan.SkipWS(b, i+1)); !ok {
			return i, false
		}
		var more bool
		if i, more, ok = jsonscan.Next(b, i, '}'); !ok || !more {
			return i, ok
		}
		c, i = jsonscan.Peek(b, i)
	}
}

// count reads the non-negative integer at i into n (clamped to int32); a null, a fraction
// or any other value leaves n at -1 and is skipped.
func count(b []byte, i int, n *int32) (int, bool) {
	v, j := int64(0), i
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		if v <= math.MaxInt32 {
			v = v*10 + int64(b[j]-'0')
		}
	}
	if j == i || j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return skip(b, i)
	}
	*n = int32(min(v, math.MaxInt32))
	return j, true
}

// skip skips the value at i (inside the usage object: depth 2).
func skip(b []byte, i int) (int, bool) {
	var st jsonscan.Stack
	end, k := jsonscan.SkipValue(b, i, 2, &st)
	return end, k == jsonscan.OK
}
