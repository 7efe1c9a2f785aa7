package fastpath

import (
	"errors"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/disagg"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// headerEncodeWorker names the encode worker of an EPD request in the response, beside the
// prefill and the decode (routed) worker.
const headerEncodeWorker = "X-Smg-Encode-Worker-Id"

// lookupEncode returns the encode route of a model, or nil when no encode worker serves it.
func lookupEncode(t *policy.Table, model []byte) *policy.Route {
	r, _ := t.LookupLeg(policy.LegEncode, model)
	return r
}

// dispatchEPD serves a generation request in EPD mode. A request without media (no image,
// audio or video for an encoder: disagg.Multimodal) is a PD request and goes to dispatchPD.
// Otherwise an encode, a prefill and a decode worker are picked by their legs' policies and
// the request is handed over in three legs, in the protocol the prefill worker speaks
// (disagg's EPD doc):
//
//  1. The encode leg, to the encode worker: SGLang's gets the client's body with the encode
//     worker's bootstrap address and a fresh room, vLLM's the body unstreamed with one
//     output token. The leg must succeed before any PD leg starts: a prefill sent without
//     its embeddings would wait for them in vain.
//  2. and 3. The PD legs as dispatchPD runs them, SGLang's bodies carrying the encode
//     handshake (encode_bootstrap_host, _port, _room) so that the prefill fetches the
//     embeddings from the encode worker.
//
// Each leg holds its worker's in-flight count and breaker permit for exactly as long as its
// own request lasts. While nothing has reached the client, a retryable failure of any leg
// (a transport error, 408, 429 or 5xx) sends the request again to a triple re-picked
// without the worker that failed; a client that leaves while the encode leg waits ends it
// (the encode worker's connection is closed) without an answer and without a retry.
func (s *Server) dispatchEPD(ctx *fasthttp.RequestCtx, x *exchange, ert, prt, drt *policy.Route, route int, reqID []byte) {
	orig := ctx.PostBody() // x.fields point into it: it stays ours until the exchange is reused
	if prt == nil || drt == nil || !disagg.Multimodal(orig) {
		s.dispatchPD(ctx, x, prt, drt, route, reqID)
		return
	}
	if ert == nil {
		s.fail(ctx, route, errNoWorkers, "no encode worker serves model '"+string(x.fields.Model)+"'; EPD mode needs an encode worker for every model that takes images, audio or video")
		return
	}
	c := encodeCalls.Get().(*encodeCall)
	defer c.recycle()
	a := &x.attempt
	if leg, err := pickTriple(a, ert, prt, drt); err != nil {
		s.failPickLeg(ctx, route, leg, err)
		return
	}
	for {
		ew, pw := a.encode.w, a.prefill.w
		vllm := pw.KVConnector != ""
		if vllm && route == routeGenerate {
			s.fail(ctx, route, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
			return
		}
		f, pdBody := s.attemptEncode(ctx, x, c, orig, route, vllm)
		if f.failed == nil {
			if vllm {
				f.pdFailure = s.attemptVLLM(ctx, x, pdBody, route, reqID)
			} else {
				f.pdFailure = s.attemptSGLang(ctx, x, pdBody, route, reqID)
			}
		}
		if errors.Is(f.err, errClientLeft) { // during any leg: nobody to answer or retry for
			f.release()
			ctx.SetConnectionClose()
			return
		}
		if f.failed == nil {
			ctx.Response.Header.SetBytesV(headerPrefillWorker, pw.URLBytes())
			ctx.Response.Header.SetBytesV(headerEncodeWorker, ew.URLBytes())
			return
		}
		if f.retryable() {
			if wait, ok := a.retry(f.failed, time.Now()); ok && pause(ctx, wait) {
				tab := s.router.Current()
				p, d, ok := lookupPD(tab, x.fields.Model)
				e, eok := tab.LookupLeg(policy.LegEncode, x.fields.Model)
				// Without a whole triple to try, the client gets this attempt's failure.
				if ok && p != nil && d != nil && eok {
					if _, err := pickTriple(a, e, p, d); err == nil {
						s.log.Debug("Retrying an EPD request on another triple", "failed", f.failed.URL, "attempt", a.failures+1, "error", f.err)
						f.release()
						continue
					}
				}
			}
		}
		if f.encodeStatus != 0 {
			// The encode worker's own error answer is the client's.
			c.resp.CopyTo(&ctx.Response)
			s.deliver(ctx, route, ew, reqID)
		} else {
			s.deliverPDFailure(ctx, route, reqID, f.pdFailure)
		}
		if f.failed != ew { // the PD legs ran
			ctx.Response.Header.SetBytesV(headerPrefillWorker, pw.URLBytes())
		}
		ctx.Response.Header.SetBytesV(headerEncodeWorker, ew.URLBytes())
		return
	}
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

// epdFailure is a pdFailure that may be the encode leg's: encodeStatus is then the encode
// worker's non-2xx status, its answer in the encodeCall's resp.
type epdFailure struct {
	pdFailure
	encodeStatus int
}

// retryable reports whether the failed attempt is worth another triple.
func (f epdFailure) retryable() bool {
	if f.encodeStatus != 0 {
		return retryableStatus(f.encodeStatus)
	}
	return f.pdFailure.retryable()
}

// attemptEncode runs the encode leg of one attempt and settles it. On success it returns
// the body the PD legs start from: for SGLang the client's body with the encode handshake,
// for vLLM the client's body as it is. A failure names the encode worker; err is the
// transport error, errClientLeft when the client went away meanwhile (nothing to answer),
// or errBodyRewrite.
func (s *Server) attemptEncode(ctx *fasthttp.RequestCtx, x *exchange, c *encodeCall, orig []byte, route int, vllm bool) (epdFailure, []byte) {
	a := &x.attempt
	ew := a.encode.w
	var body, pdBody []byte
	var err error
	if vllm {
		body, err = disagg.AppendVLLMEncode(c.body[:0], orig, route == routeChat)
		pdBody = orig
	} else {
		room := disagg.NewRoom()
		body, err = disagg.AppendBootstrap(c.body[:0], orig, ew.BootstrapHost, ew.BootstrapPort, room)
		if err == nil {
			c.handshake, err = disagg.AppendEncodeHandshake(c.handshake[:0], orig, ew.BootstrapHost, ew.BootstrapPort, room)
			pdBody = c.handshake
		}
	}
	if err != nil {
		return epdFailure{pdFailure: pdFailure{failed: ew, err: errBodyRewrite}}, nil
	}
	c.body = body
	c.resp.Reset() // a retry reuses the call
	req := &c.req
	ctx.Request.Header.CopyTo(&req.Header)
	ew.Address(req)
	if auth := ew.AuthHeader(); auth != nil {
		req.Header.SetBytesV("Authorization", auth)
	}
	// The body is written by c.up, which makes the round trip watch the client while the
	// encode worker has not answered.
	c.up = upstreamBody{body: body, resp: &c.resp, client: ctx.Conn()}
	req.SetBodyStream(&c.up, len(body))
	now := time.Now()
	deadline := a.tryDeadline(false, now)
	if fbt := s.cfg.FirstByteTimeout; fbt > 0 && now.Add(fbt).Before(deadline) {
		deadline = now.Add(fbt)
	}
	a.dispatch(&a.encode)
	err = worker.Cause(&c.resp, ew.Client.DoDeadline(req, &c.resp, deadline))
	if errors.Is(err, worker.ErrClientLeft) {
		a.encode.abandon() // not the worker's fault
		ctx.SetConnectionClose()
		return epdFailure{pdFailure: pdFailure{failed: ew, err: errClientLeft}}, nil
	}
	status := c.resp.StatusCode()
	a.encode.settle(status, err)
	switch {
	case err != nil:
		s.log.Debug("Encode request failed", "worker", ew.URL, "error", err)
		return epdFailure{pdFailure: pdFailure{failed: ew, err: err}}, nil
	case status >= 300:
		return epdFailure{pdFailure: pdFailure{failed: ew, err: errEncodeStatus}, encodeStatus: status}, nil
	}
	return epdFailure{}, pdBody
}

// errEncodeStatus marks an encode leg answered with a non-2xx status (in the encodeCall).
var errEncodeStatus = errors.New("the encode worker answered with an error status")

// encodeCall is the scratch state of one EPD request's encode leg: its request and answer,
// and the buffers of the encode body and of the handshake body the PD legs start from. It is
// pooled; the handler that took it owns it until recycle.
type encodeCall struct {
	req             fasthttp.Request
	resp            fasthttp.Response
	up              upstreamBody
	body, handshake []byte
}

var encodeCalls = sync.Pool{New: func() any { return new(encodeCall) }}

func (c *encodeCall) recycle() {
	c.req.Reset()
	c.resp.Reset()
	c.up = upstreamBody{}
	if cap(c.body) > maxPooledPDBody {
		c.body = nil
	}
	if cap(c.handshake) > maxPooledPDBody {
		c.handshake = nil
	}
	c.body, c.handshake = c.body[:0], c.handshake[:0]
	encodeCalls.Put(c)
}
