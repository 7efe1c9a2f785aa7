package fastpath

import (
	"github.com/smg-go/smg/policy"
)

// EPD mode is PD mode with an encode leg (epd_loop.go runs it on the event loops). A request
// without media (no image, audio or video for an encoder: disagg.Multimodal) is a PD request.
// Otherwise an encode, a prefill and a decode worker are picked by their legs' policies and
// the request is handed over in three legs, in the protocol the prefill worker speaks
// (disagg's EPD doc):
//
//  1. The encode leg, to the encode worker: SGLang's gets the client's body with the encode
//     worker's bootstrap address and a fresh room, vLLM's the body unstreamed with one
//     output token. The leg must succeed before any PD leg starts: a prefill sent without
//     its embeddings would wait for them in vain.
//  2. and 3. The PD legs as in PD mode, SGLang's bodies carrying the encode handshake
//     (encode_bootstrap_host, _port, _room) so that the prefill fetches the embeddings from
//     the encode worker.
//
// Each leg holds its worker's in-flight count and breaker permit for exactly as long as its
// own request lasts. While nothing has reached the client, a retryable failure of any leg
// (a transport error, 408, 429 or 5xx) sends the request again to a triple re-picked
// without the worker that failed; a client that leaves while the encode leg waits ends it
// (the encode worker's connection is closed) without an answer and without a retry.

// headerEncodeWorker names the encode worker of an EPD request in the response, beside the
// prefill and the decode (routed) worker.
const headerEncodeWorker = "X-Smg-Encode-Worker-Id"

// lookupEncode returns the encode route of a model, or nil when no encode worker serves it.
func lookupEncode(t *policy.Table, model []byte) *policy.Route {
	r, _ := t.LookupLeg(policy.LegEncode, model)
	return r
}

// pickTriple picks the encode, prefill and decode workers of an attempt; on failure it
// names the leg that had no worker.
func pickTriple(a *attempt, ert, prt, drt *policy.Route) (string, error) {
	if err := a.pick(ert, &a.encode); err != nil {
		return "encode", err
	}
	if err := a.pick(prt, &a.prefill); err != nil {
		return "prefill", err
	}
	if err := a.pick(drt, &a.main); err != nil {
		return "decode", err
	}
	return "", nil
}
