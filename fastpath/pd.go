package fastpath

import (
	"errors"

	"github.com/smg-go/smg/policy"
)

// PD mode: every generation request goes to a prefill and a decode worker, picked by their
// legs' policies, and is handed over with the protocol the prefill worker speaks (evpd.go
// runs it on the event loops). SGLang's: the same request, with the prefill worker's
// bootstrap address and a fresh room, goes to both at once; the decode worker's answer is the
// client's. vLLM's (a worker with a KV connector label): the prefill worker computes the KV
// for one token and returns kv_transfer_params, which the decode request then carries.

// headerPrefillWorker names the prefill worker of a PD request in the response, beside
// x-smg-routed-worker-id (the decode worker, which produced the answer).
const headerPrefillWorker = "X-Smg-Prefill-Worker-Id"

// lookupPD returns the prefill and decode routes of a model. ok is false when neither leg
// serves it (404); when only one does, the other route is nil and the request gets 503.
func lookupPD(t *policy.Table, model []byte) (prefill, decode *policy.Route, ok bool) {
	prefill, pok := t.LookupLeg(policy.LegPrefill, model)
	decode, dok := t.LookupLeg(policy.LegDecode, model)
	return prefill, decode, pok || dok
}

var (
	errNoKVTransferParams = errors.New("the prefill answer has no kv_transfer_params object: is the worker a vLLM engine started with --kv-transfer-config (kv_role kv_producer or kv_both)?")
	// errBodyRewrite: the handover fields could not be set in the body. Extract accepted the
	// body as a JSON object, so only a bug gets here.
	errBodyRewrite = errors.New("the request body could not be rewritten for the PD handover")
)
