package policy

import (
	"unicode/utf8"

	"github.com/smg-go/smg/worker"
)

// MaxRoutingKeyBytes bounds a routing key: the spec allows non-empty UTF-8 of at most 128 bytes.
const MaxRoutingKeyBytes = 128

// Sources of a sticky key, the source label of smg_routing_key_source_total.
const (
	KeySourceRid    = "rid"
	KeySourceHeader = "header"
)

// ValidRoutingKey reports whether v may be a routing key: non-empty UTF-8 of at most
// MaxRoutingKeyBytes bytes.
func ValidRoutingKey(v []byte) bool {
	return len(v) > 0 && len(v) <= MaxRoutingKeyBytes && utf8.Valid(v)
}

// StripLineage removes one trailing "_r<digits>" (retry) and then one trailing "_t<digits>"
// (turn) suffix, so every turn and retry of a conversation shares one key: "conv_t2_r1" →
// "conv". A key that is nothing but a suffix keys as itself.
func StripLineage(key []byte) []byte {
	s := stripTag(stripTag(key, 'r'), 't')
	if len(s) == 0 {
		return key
	}
	return s
}

func stripTag(s []byte, tag byte) []byte {
	i := len(s) - 1
	for i >= 0 && s[i] >= '0' && s[i] <= '9' {
		i--
	}
	// s[i+1:] are the digits; a suffix needs at least one, then the tag, then '_'.
	if i == len(s)-1 || i < 1 || s[i] != tag || s[i-1] != '_' {
		return s
	}
	return s[:i-1]
}

// StickyKey returns the key sticky routing pins (the manual policy and --routing-key-override):
// with override, the body's rid when it has one, lineage-stripped; otherwise the routing-key
// header, lineage-stripped under override and raw without. A key longer than
// MaxRoutingKeyBytes or not UTF-8 is ignored.
func StickyKey(req *Request, override bool) (key []byte, source string) {
	if override && len(req.Rid) > 0 {
		if k := StripLineage(req.Rid); ValidRoutingKey(k) {
			return k, KeySourceRid
		}
	}
	if len(req.RoutingKey) > 0 {
		k := req.RoutingKey
		if override {
			k = StripLineage(k)
		}
		if ValidRoutingKey(k) {
			return k, KeySourceHeader
		}
	}
	return nil, ""
}

// ParseTargetWorker parses an X-SMG-Target-Worker value: a 0-based decimal index. ok is false
// for anything else (empty, a sign, spaces, other characters, overflow).
func ParseTargetWorker(v []byte) (index int, ok bool) {
	if len(v) == 0 || len(v) > 9 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		index = index*10 + int(c-'0')
	}
	return index, true
}

// NthUsable returns the i-th (0-based) worker of ws that req may use, or nil when fewer are
// usable: the spec's X-SMG-Target-Worker indexes the model's currently available workers.
func NthUsable(req *Request, ws []*worker.Worker, i int) *worker.Worker {
	for _, w := range ws {
		if !req.Usable(w) {
			continue
		}
		if i == 0 {
			return w
		}
		i--
	}
	return nil
}
