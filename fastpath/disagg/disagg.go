package disagg

import (
	"math/rand/v2"
	"strconv"

	"github.com/smg-go/smg/internal/jsonscan"
	"github.com/smg-go/smg/internal/jsonx"
)

// Names of the members this package sets.
const (
	nameBootstrapHost       = "bootstrap_host"
	nameBootstrapPort       = "bootstrap_port"
	nameBootstrapRoom       = "bootstrap_room"
	nameKVTransferParams    = "kv_transfer_params"
	nameStream              = "stream"
	nameStreamOptions       = "stream_options"
	nameMaxTokens           = "max_tokens"
	nameMaxCompletionTokens = "max_completion_tokens"
)

// bootstrapNames are removed from the body before AppendBootstrap appends its own: host,
// port and room, in that order (appendHandshake relies on it).
var bootstrapNames = []Member{{Name: nameBootstrapHost}, {Name: nameBootstrapPort}, {Name: nameBootstrapRoom}}

// AppendBootstrap appends to dst the SGLang PD request body: body with top-level
// "bootstrap_host":"<host>", "bootstrap_port":<port> (null when port <= 0, meaning the
// prefill server's default) and "bootstrap_room":<room> set, replacing members of those
// names. Both legs get the same body; the room pairs them (spec: PD disaggregation).
//
// host is written as a JSON string; an IPv6 literal in brackets, as it appears in a URL,
// loses its brackets, because SGLang formats the bootstrap address itself and expects the
// bare address. room must be below 2^63 (use NewRoom); port at most 65535.
//
// dst must not overlap body; on error dst is returned unchanged. With enough capacity in
// dst it allocates nothing.
func AppendBootstrap(dst, body []byte, host string, port int, room uint64) ([]byte, error) {
	return appendHandshake(dst, body, bootstrapNames, host, port, room)
}

// appendHandshake is AppendBootstrap with the three member names (host, port, room) given:
// the PD legs' bootstrap and the EPD encode handshake differ only in them.
func appendHandshake(dst, body []byte, names []Member, host string, port int, room uint64) ([]byte, error) {
	if port > 65535 {
		return dst, ErrPort
	}
	if room >= 1<<63 {
		return dst, ErrRoom
	}
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	out, n, err := appendKept(dst, body, names)
	if err != nil {
		return dst, err
	}
	out = appendName(out, n, names[0].Name)
	out = jsonx.AppendString(out, host)
	out = appendName(out, 1, names[1].Name)
	if port <= 0 {
		out = append(out, "null"...)
	} else {
		out = strconv.AppendInt(out, int64(port), 10)
	}
	out = appendName(out, 1, names[2].Name)
	out = strconv.AppendUint(out, room, 10)
	return append(out, '}'), nil
}

// prefillParams asks the prefill engine to keep the KV cache for a remote decode and to
// return where to fetch it (vLLM's NixlConnector protocol; the fields are those of vLLM's
// disaggregated-serving proxy example).
var prefillParams = []byte(`{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`)

// The prefill leg computes the KV cache and one token, unstreamed. stream_options is
// removed because vLLM rejects it when stream is false.
var (
	prefillCompletion = []Member{
		{Name: nameKVTransferParams, Value: prefillParams},
		{Name: nameStream, Value: []byte("false")},
		{Name: nameMaxTokens, Value: []byte("1")},
		{Name: nameStreamOptions},
	}
	prefillChat = []Member{
		{Name: nameKVTransferParams, Value: prefillParams},
		{Name: nameStream, Value: []byte("false")},
		{Name: nameMaxTokens, Value: []byte("1")},
		{Name: nameMaxCompletionTokens, Value: []byte("1")},
		{Name: nameStreamOptions},
	}
)

// AppendVLLMPrefill appends to dst the body of the prefill leg of vLLM PD: body with
// "kv_transfer_params" (remote decode requested), "stream":false and "max_tokens":1 set,
// for chat (/v1/chat/completions) also "max_completion_tokens":1, which chat clients use
// instead of max_tokens, and "stream_options" removed.
//
// dst must not overlap body; on error dst is returned unchanged. With enough capacity in
// dst it allocates nothing.
func AppendVLLMPrefill(dst, body []byte, chat bool) ([]byte, error) {
	if chat {
		return Rewrite(dst, body, prefillChat...)
	}
	return Rewrite(dst, body, prefillCompletion...)
}

// KVTransferParams returns the raw value of the top-level "kv_transfer_params" member of a
// vLLM prefill response, a view into resp. ok is false unless resp is a well-formed JSON
// object whose (last, as encoding/json reads duplicates) kv_transfer_params is an object:
// null or absent means the prefill engine did not keep the KV cache for us. It allocates
// nothing.
func KVTransferParams(resp []byte) (raw []byte, ok bool) {
	var s scanner
	s.buf = resp
	more, err := s.begin()
	if err != nil {
		return nil, false
	}
	var found member
	for more {
		var m member
		if m, more, err = s.member(); err != nil {
			return nil, false
		}
		if named(resp[m.nameStart:m.nameEnd], m.escaped, kvNames) {
			found = m
		}
	}
	if s.end() != nil || found.valEnd == 0 || resp[found.valStart] != '{' {
		return nil, false
	}
	return resp[found.valStart:found.valEnd], true
}

var kvNames = []Member{{Name: nameKVTransferParams}}

// AppendVLLMDecode appends to dst the body of the decode leg of vLLM PD: the client's body
// with "kv_transfer_params":params set, replacing any the client sent. params must be a
// JSON object, as KVTransferParams returns; anything else is ErrInvalidBody, so that a
// misbehaving prefill engine cannot make us send broken JSON.
//
// dst must overlap neither body nor params; on error dst is returned unchanged. With
// enough capacity in dst it allocates nothing.
func AppendVLLMDecode(dst, body, params []byte) ([]byte, error) {
	if !isObject(params) {
		return dst, ErrInvalidBody
	}
	return Rewrite(dst, body, Member{Name: nameKVTransferParams, Value: params})
}

// isObject reports whether b is one well-formed JSON object, surrounding whitespace allowed.
func isObject(b []byte) bool {
	c, i := jsonscan.Peek(b, 0)
	if c != '{' {
		return false
	}
	var st jsonscan.Stack
	i, k := jsonscan.SkipValue(b, i, 0, &st)
	return k == jsonscan.OK && jsonscan.SkipWS(b, i) == len(b)
}

// NewRoom returns a uniformly random bootstrap room id below 2^63. math/rand/v2's
// top-level functions draw from a per-thread ChaCha8 state: no lock, no allocation, and
// unpredictable ids, so rooms of different gateways do not collide on a shared prefill
// server except by chance (2^-63 per pair).
func NewRoom() uint64 {
	return uint64(rand.Int64())
}
