package disagg

import (
	"errors"

	"github.com/smg-go/smg/internal/jsonscan"
)

// Sentinels for errors.Is. They are returned as they are, so that errors allocate nothing
// either; the gateway validated the body before, so these mean a bug or a misbehaving
// worker, not a client mistake.
var (
	// ErrInvalidBody: the body (or the kv_transfer_params given) is not one well-formed
	// JSON object.
	ErrInvalidBody = errors.New("disagg: not a well-formed JSON object")
	// ErrPort: a bootstrap port above 65535.
	ErrPort = errors.New("disagg: bootstrap port out of range (1-65535, or <= 0 for null)")
	// ErrRoom: a bootstrap room of 2^63 or more, which SGLang cannot hold in an int64.
	ErrRoom = errors.New("disagg: bootstrap room must be below 2^63")
)

// Member is one top-level member to set or remove with Rewrite.
type Member struct {
	// Name is matched against each top-level member name after JSON unescaping, as
	// encoding/json decodes names into a map. It is written as given, quoted but not
	// escaped: use plain ASCII names (letters, digits, '_'), as every API field name is.
	Name string
	// Value is the raw JSON value to set, written as it is and not validated. nil only
	// removes the members named Name.
	Value []byte
}

// Rewrite appends to dst the JSON object body with every top-level member named in set
// removed, and then, before the closing brace, the members of set whose Value is not nil,
// in order. Members at deeper levels are never touched, whatever their names. Whitespace
// between members is dropped; everything else is copied byte for byte.
//
// dst must not overlap body. On error Rewrite returns dst unchanged (same length) and
// ErrInvalidBody. With enough capacity in dst it allocates nothing.
func Rewrite(dst, body []byte, set ...Member) ([]byte, error) {
	out, n, err := appendKept(dst, body, set)
	if err != nil {
		return dst, err
	}
	for _, m := range set {
		if m.Value != nil {
			out = appendName(out, n, m.Name)
			out = append(out, m.Value...)
			n++
		}
	}
	return append(out, '}'), nil
}

// appendKept appends '{' and the members of body not named in set, and returns how many it
// appended, so that the caller can append more members with the right commas and close the
// object. On error dst is returned unchanged.
func appendKept(dst, body []byte, set []Member) ([]byte, int, error) {
	var s scanner
	s.buf = body
	more, err := s.begin()
	if err != nil {
		return dst, 0, err
	}
	out := append(dst, '{')
	n := 0
	for more {
		var m member
		if m, more, err = s.member(); err != nil {
			return dst, 0, err
		}
		if named(body[m.nameStart:m.nameEnd], m.escaped, set) {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, body[m.nameStart-1:m.nameEnd+1]...)
		out = append(out, ':')
		out = append(out, body[m.valStart:m.valEnd]...)
		n++
	}
	if err := s.end(); err != nil {
		return dst, 0, err
	}
	return out, n, nil
}

// appendName appends `,"name":` (without the comma for the first member, n == 0).
func appendName(dst []byte, n int, name string) []byte {
	if n > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// named reports whether the raw member name (content between the quotes) is one of set's,
// comparing decoded names as encoding/json decodes them. Comparing decoded names (rather
// than raw bytes) matters: a client writing "stre\u0061m" would otherwise keep its own
// stream member next to ours, a duplicate that a last-wins parser could resolve in the
// client's favour.
func named(raw []byte, escaped bool, set []Member) bool {
	for i := range set {
		if escaped {
			if jsonscan.EqualUnescaped(raw, set[i].Name) {
				return true
			}
		} else if string(raw) == set[i].Name {
			return true
		}
	}
	return false
}
