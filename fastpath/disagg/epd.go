package disagg

import (
	"github.com/smg-go/smg/internal/jsonscan"
)

// Encode-prefill-decode (EPD) disaggregation adds an encode leg before PD: the encode worker
// turns a request's images, audio and video into embeddings, and the prefill worker takes
// those instead of encoding them itself (docs/differences.md, "EPD handover").
//
//   - SGLang: the encode leg gets the client's body plus the encode worker's own bootstrap
//     address and a fresh room (AppendBootstrap), under which it publishes the embeddings;
//     the prefill and decode legs get the client's body plus encode_bootstrap_host,
//     encode_bootstrap_port and encode_bootstrap_room naming them
//     (AppendEncodeHandshake), and then PD's own bootstrap fields as usual.
//   - vLLM: the encode leg gets the client's body unstreamed with one output token
//     (AppendVLLMEncode), as vLLM's disaggregated-encoder proxy sends it; the encoder cache
//     travels through the engines' EC connector, keyed by the media's hash, so the PD legs
//     need no extra member.

// Names of the members of the EPD handover.
const (
	nameEncodeBootstrapHost = "encode_bootstrap_host"
	nameEncodeBootstrapPort = "encode_bootstrap_port"
	nameEncodeBootstrapRoom = "encode_bootstrap_room"
)

// encodeHandshakeNames: host, port and room, in that order (appendHandshake relies on it).
var encodeHandshakeNames = []Member{{Name: nameEncodeBootstrapHost}, {Name: nameEncodeBootstrapPort}, {Name: nameEncodeBootstrapRoom}}

// AppendEncodeHandshake appends to dst body with top-level
// "encode_bootstrap_host":"<host>", "encode_bootstrap_port":<port> (null when port <= 0:
// the encode server's default) and "encode_bootstrap_room":<room> set, replacing members of
// those names: where the prefill worker fetches the embeddings the encode leg computed. host,
// port and room follow AppendBootstrap's rules.
//
// dst must not overlap body; on error dst is returned unchanged. With enough capacity in
// dst it allocates nothing.
func AppendEncodeHandshake(dst, body []byte, host string, port int, room uint64) ([]byte, error) {
	return appendHandshake(dst, body, encodeHandshakeNames, host, port, room)
}

// The vLLM encode leg runs the encoder only: one output token, unstreamed, like the prefill
// leg but without kv_transfer_params (the encoder keeps no KV cache for anyone).
var (
	encodeCompletion = []Member{
		{Name: nameStream, Value: []byte("false")},
		{Name: nameMaxTokens, Value: []byte("1")},
		{Name: nameStreamOptions},
		{Name: nameKVTransferParams},
	}
	encodeChat = []Member{
		{Name: nameStream, Value: []byte("false")},
		{Name: nameMaxTokens, Value: []byte("1")},
		{Name: nameMaxCompletionTokens, Value: []byte("1")},
		{Name: nameStreamOptions},
		{Name: nameKVTransferParams},
	}
)

// AppendVLLMEncode appends to dst the body of the encode leg of vLLM EPD: body with
// "stream":false and "max_tokens":1 set (chat: also "max_completion_tokens":1), and
// "stream_options" and any client "kv_transfer_params" removed.
//
// dst must not overlap body; on error dst is returned unchanged. With enough capacity in
// dst it allocates nothing.
func AppendVLLMEncode(dst, body []byte, chat bool) ([]byte, error) {
	if chat {
		return Rewrite(dst, body, encodeChat...)
	}
	return Rewrite(dst, body, encodeCompletion...)
}

// Multimodal reports whether a generation request body carries inputs for an encoder: a
// chat message content part of a media type (MediaPartTypes) in the top-level "messages",
// or a non-null top-level "image_data", "audio_data" or "video_data" (SGLang's /generate).
// Of duplicate names the last counts, as encoding/json reads them. A body that is not one
// well-formed JSON object is not multimodal. It allocates nothing.
func Multimodal(body []byte) bool {
	var s scanner
	s.buf = body
	more, err := s.begin()
	if err != nil {
		return false
	}
	var messages bool
	var data [len(mediaDataNames)]bool
	for more {
		var m member
		if m, more, err = s.member(); err != nil {
			return false
		}
		name, val := body[m.nameStart:m.nameEnd], body[m.valStart:m.valEnd]
		if named(name, m.escaped, messagesNames) {
			messages = messagesHaveMedia(val)
			continue
		}
		for i := range mediaDataNames {
			if named(name, m.escaped, mediaDataNames[i:i+1]) {
				data[i] = val[0] != 'n'
			}
		}
	}
	if s.end() != nil {
		return false
	}
	return messages || data[0] || data[1] || data[2]
}

var (
	messagesNames  = []Member{{Name: "messages"}}
	mediaDataNames = [...]Member{{Name: "image_data"}, {Name: "audio_data"}, {Name: "video_data"}}
	contentNames   = []Member{{Name: "content"}}
	typeNames      = []Member{{Name: "type"}}
)

// MediaPartTypes are the content part types an encoder takes: OpenAI's image_url and
// input_audio, and the video_url, audio_url, image, audio and video parts that vLLM and
// SGLang accept as well.
var MediaPartTypes = []string{"image_url", "input_audio", "video_url", "audio_url", "image", "audio", "video", "input_image"}

// messagesHaveMedia reports whether v, a validated JSON value, is an array of messages one
// of whose (last) "content" is an array holding a part of a media type.
func messagesHaveMedia(v []byte) bool {
	media := false
	eachElement(v, func(msg []byte) {
		if msg[0] != '{' {
			return
		}
		content, ok := lastMember(msg, contentNames)
		if !ok {
			return
		}
		eachElement(content, func(part []byte) {
			if part[0] != '{' {
				return
			}
			if t, ok := lastMember(part, typeNames); ok && t[0] == '"' && isMediaType(t) {
				media = true
			}
		})
	})
	return media
}

// eachElement calls f with each element of v if v is an array (v validated).
func eachElement(v []byte, f func(elem []byte)) {
	if len(v) == 0 || v[0] != '[' {
		return
	}
	var st jsonscan.Stack
	c, i := jsonscan.Peek(v, 1)
	if c == ']' {
		return
	}
	for {
		end, k := jsonscan.SkipValue(v, i, 1, &st)
		if k != jsonscan.OK {
			return
		}
		f(v[i:end])
		var more, ok bool
		if i, more, ok = jsonscan.Next(v, end, ']'); !ok || !more {
			return
		}
		i = jsonscan.SkipWS(v, i)
	}
}

// lastMember returns the value of the last member of object v named in names.
func lastMember(v []byte, names []Member) (val []byte, found bool) {
	var s scanner
	s.buf = v
	more, err := s.begin()
	for err == nil && more {
		var m member
		if m, more, err = s.member(); err == nil && named(v[m.nameStart:m.nameEnd], m.escaped, names) {
			val, found = v[m.valStart:m.valEnd], true
		}
	}
	return val, found && err == nil
}

// isMediaType reports whether the JSON string s (with its quotes) decodes to one of
// MediaPartTypes.
func isMediaType(s []byte) bool {
	raw := s[1 : len(s)-1]
	for _, t := range MediaPartTypes {
		if jsonscan.EqualUnescaped(raw, t) {
			return true
		}
	}
	return false
}
