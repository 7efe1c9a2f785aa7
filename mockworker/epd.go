package mockworker

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/valyala/fastjson"
)

// Encode-prefill-decode disaggregation (doc.go, "Prefill-decode roles"). An encode worker
// (RoleEncode) takes a multimodal request's media before the prefill does:
//
//   - SGLang: the request carries the encode worker's own bootstrap_host, bootstrap_port and
//     bootstrap_room; the worker publishes an embedding record (the prompt's fingerprint)
//     on its fleet's rendezvous under the room, as a prefill publishes its KV. The prefill
//     request then carries encode_bootstrap_host, encode_bootstrap_port and
//     encode_bootstrap_room, and the prefill claims that record before it computes, failing
//     the request (500) when it never comes or describes another prompt. With
//     Config.RequireEncode a prefill refuses (400) a multimodal request without the
//     handshake, so a gateway that skips the encode leg is caught.
//   - vLLM: the encode request is the client's, unstreamed with one output token; the
//     encoder cache travels through the engines' EC connector, which the mock does not
//     model, so the encode worker only checks the request and answers one token.
//
// An encode worker refuses (400) a request without images, audio or video: it has nothing
// to encode.

// encodeClaim is what an EPD prefill fetches from its encode worker's rendezvous.
type encodeClaim struct {
	addr  string // the encode worker's rendezvous "host:port"
	key   string // encode_bootstrap_room in decimal
	label string
}

// hasMedia reports whether a request body carries media for an encoder: a chat content part
// of a media type, or SGLang's image_data, audio_data or video_data.
func hasMedia(v *fastjson.Value) bool {
	for _, k := range []string{"image_data", "audio_data", "video_data"} {
		if setMember(v, k) != nil {
			return true
		}
	}
	for _, m := range arrayOf(member(v, "messages")) {
		for _, part := range arrayOf(member(m, "content")) {
			if slices.Contains(mediaPartTypes, string(stringOf(member(part, "type")))) {
				return true
			}
		}
	}
	return false
}

// mediaPartTypes are the content part types an encoder takes (the gateway's
// disagg.MediaPartTypes).
var mediaPartTypes = []string{"image_url", "input_audio", "video_url", "audio_url", "image", "audio", "video", "input_image"}

// parseEncode checks an encode worker's request and returns its PD state (SGLang: the
// record to publish under bootstrap_room), or nil for vLLM, whose encode answer is an
// ordinary one-token answer.
func (w *Worker) parseEncode(v *fastjson.Value, req *genRequest) (*pdState, error) {
	if !hasMedia(v) {
		return nil, errors.New("encode worker got a request without images, audio or video: only multimodal requests belong on an encode worker")
	}
	if w.cfg.Dialect == DialectVLLM {
		if member(v, "kv_transfer_params") != nil {
			return nil, errors.New("encode worker got kv_transfer_params: the encode request carries no KV transfer")
		}
		if req.stream {
			return nil, errors.New(`encode worker got "stream": true: vLLM's encode request is not streamed`)
		}
		if req.maxTokens != 1 {
			return nil, fmt.Errorf("encode worker needs max_tokens 1 (chat: max_completion_tokens 1), got %d", req.maxTokens)
		}
		w.countPD(pdOK)
		return nil, nil
	}
	var f pdFields
	if err := f.readSGLang(v, RoleEncode); err != nil {
		return nil, err
	}
	if !w.isOwnHost(f.host) {
		return nil, fmt.Errorf("bootstrap_host %q is not this encode worker (%s): the gateway paired the request with another encode worker", f.host, w.addr)
	}
	if f.port != 0 && f.port != w.pdf.bootstrapPort {
		return nil, fmt.Errorf("bootstrap_port %d is not this encode worker's bootstrap port (%d)", f.port, w.pdf.bootstrapPort)
	}
	key := strconv.FormatUint(f.room, 10)
	return &pdState{key: key, label: "bootstrap_room " + key}, nil
}

// parseEncodeHandshake reads an SGLang prefill's encode handshake, if any: nil without one,
// an error for a malformed one or, with RequireEncode, for a multimodal request without one.
func (w *Worker) parseEncodeHandshake(v *fastjson.Value) (*encodeClaim, error) {
	room := setMember(v, "encode_bootstrap_room")
	if room == nil {
		if w.cfg.RequireEncode && hasMedia(v) {
			return nil, errors.New("prefill worker (language only) got a multimodal request without encode_bootstrap_room: the gateway must run the encode leg first and add encode_bootstrap_host, encode_bootstrap_port and encode_bootstrap_room")
		}
		return nil, nil
	}
	n, err := room.Uint64()
	if err != nil || n>>63 != 0 {
		return nil, fmt.Errorf("encode_bootstrap_room must be an integer in 0..2^63-1, got %s", clip(room.String()))
	}
	host := member(v, "encode_bootstrap_host")
	if host == nil || host.Type() != fastjson.TypeString || len(host.GetStringBytes()) == 0 {
		return nil, errors.New("prefill worker got encode_bootstrap_room without encode_bootstrap_host (a string: the encode worker's host)")
	}
	port := member(v, "encode_bootstrap_port")
	if port == nil {
		return nil, errors.New("prefill worker got encode_bootstrap_room without encode_bootstrap_port (an integer, or null for the default port)")
	}
	p := DefaultBootstrapPort
	if port.Type() != fastjson.TypeNull {
		if p, err = port.Int(); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("encode_bootstrap_port must be null or an integer in 1..65535, got %s", clip(port.String()))
		}
	}
	key := strconv.FormatUint(n, 10)
	return &encodeClaim{
		addr:  net.JoinHostPort(string(host.GetStringBytes()), strconv.Itoa(p)),
		key:   key,
		label: "encode_bootstrap_room " + key,
	}, nil
}

// resolveEncode claims an EPD prefill's embeddings from its encode worker's rendezvous and
// checks them against the prompt; on success an instant-mode prefill publishes its own KV
// now (preparePD held it back). On a failure it turns r into the 500 the engine would
// answer. It returns false when done or gone closed first.
func (w *Worker) resolveEncode(r *reply, done, gone <-chan struct{}) bool {
	pd := r.pd
	c := pd.enc
	got, res, err := w.pdf.client.fetch(c.addr, c.key, w.cfg.KVTransferTimeout, done, gone)
	if res == pdClosed {
		return false
	}
	switch {
	case res == pdOK && got.Fingerprint != pd.rec.Fingerprint:
		res, err = pdMismatch, fmt.Errorf("embedding transfer mismatch for %s: the encode worker %s saw a different prompt", c.label, got.Worker)
	case res == pdTimeout:
		err = fmt.Errorf("embedding transfer for %s timed out after %v: no encode worker published it", c.label, w.cfg.KVTransferTimeout)
	case res == pdMismatch:
		err = fmt.Errorf("embedding transfer mismatch for %s: %w", c.label, err)
	case res != pdOK:
		err = fmt.Errorf("embedding transfer for %s failed: cannot reach the encode worker's bootstrap server at %s: %w", c.label, c.addr, err)
	}
	w.pdLog.add(PDTransfer{Key: "encode:" + c.key, Prefill: c.addr, Result: pdResultNames[res]})
	if res == pdOK {
		pd.enc = nil
		if w.engine == nil {
			if perr := w.pdf.rv.publish(pd.key, pd.rec); perr != nil {
				res, err = pdRejected, fmt.Errorf("%s: %w", pd.label, perr)
			} else {
				w.countPD(pdOK)
				r.pd = nil // nothing more to wait for
				return true
			}
		} else {
			return true // publishingSource publishes when the prefill completes
		}
	}
	w.countPD(res)
	w.served.Add(^uint64(0)) // not a generation after all
	r.answer, r.seq, r.stream, r.pd = nil, nil, false, nil
	r.status, r.contentType = 500, contentJSON
	r.body = appendErrorBody(nil, 500, "encoder_transfer_error", err.Error())
	return true
}
