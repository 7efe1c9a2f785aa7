package fastpath

import (
	"github.com/smg-go/smg/fastpath/disagg"
	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// EPD mode on the event loops: the protocol epd.go describes, run with the request's attempt,
// legs and retries, with the encode leg an evloop.Call that the exchange awaits before the PD legs
// start (evpd.go runs those, from the encode handshake's body instead of the client's). A
// request without media is a PD request and never gets here.
//
// Whatever leg is under way when the client leaves is cancelled (its worker connection
// closed, its leg abandoned): the encode call while the exchange awaits it, the prefill and
// decode legs as in PD mode. A retryable failure of any leg before the client saw a byte
// re-picks the whole triple and runs the encode leg again.

// epdLeg is an EPD request's encode state, part of its pdLegs.
type epdLeg struct {
	on       bool           // the request takes an encode leg (EPD mode and media)
	rt       *policy.Route  // the encode route
	w        *worker.Worker // the encode worker of the current triple: X-Smg-Encode-Worker-Id
	encoding bool           // the exchange awaits the current triple's encode call (pdLegs.pf)
	// handshake is SGLang's PD starting body: the client's with the encode handshake.
	handshake []byte
}

// begin readies the encode leg of an EPD request (one with media) on the encode route rt
// (nil: the table has none, which sendEPD answers).
func (e *epdLeg) begin(rt *policy.Route) { e.on, e.rt = true, rt }

// end resets the leg for the connection's next request (pdLegs.end).
func (e *epdLeg) end() {
	e.on, e.rt, e.w, e.encoding = false, nil, nil, false
	e.handshake = reuse(e.handshake)
}

// sendEPD picks a triple and starts its encode leg; the PD legs follow when it succeeded
// (encodeDone).
func (le *loopExchange) sendEPD(ex *evloop.Exchange) {
	a := &le.attempt
	if le.pd.prt == nil || le.rt == nil {
		le.sendPD(ex) // answers which PD leg has no worker
		return
	}
	if le.pd.epd.rt == nil {
		le.fail(ex, errNoWorkers, "no encode worker serves model '"+string(le.fields.Model)+"'; EPD mode needs an encode worker for every model that takes images, audio or video")
		return
	}
	if leg, err := pickTriple(a, le.pd.epd.rt, le.pd.prt, le.rt); err != nil {
		le.failPickLeg(ex, leg, err)
		return
	}
	le.startEncode(ex)
}

// startEncode starts the encode leg of the attempt's picked triple.
func (le *loopExchange) startEncode(ex *evloop.Exchange) {
	a := &le.attempt
	le.pd.pw, le.pd.dw, le.pd.epd.w = nil, nil, nil
	ew, pw := a.encode.w, a.prefill.w
	le.pd.vllm = pw.KVConnector != ""
	if le.pd.vllm && le.route == routeGenerate {
		le.fail(ex, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
		return
	}
	le.pd.epd.w, le.pd.dw = ew, a.main.w
	orig := ex.Req().Body()
	var body []byte
	var err error
	if le.pd.vllm {
		body, err = disagg.AppendVLLMEncode(le.pd.body[:0], orig, le.route == routeChat)
	} else {
		room := disagg.NewRoom()
		body, err = disagg.AppendBootstrap(le.pd.body[:0], orig, ew.BootstrapHost, ew.BootstrapPort, room)
		if err == nil {
			le.pd.epd.handshake, err = disagg.AppendEncodeHandshake(le.pd.epd.handshake[:0], orig, ew.BootstrapHost, ew.BootstrapPort, room)
		}
	}
	if err != nil {
		le.fail(ex, errInternal, errBodyRewrite.Error())
		return
	}
	le.pd.body = body // copied out by the call: the PD legs' rewrite reuses it
	// --first-byte-timeout-secs bounds the encode answer too: it is the first answer awaited.
	now := ex.Now()
	deadline := a.tryDeadline(false, now)
	if fbt := le.s.cfg.FirstByteTimeout; fbt > 0 && now.Add(fbt).Before(deadline) {
		deadline = now.Add(fbt)
	}
	le.callLeg(ex, &a.encode, body, deadline).encode = true
	le.pd.epd.encoding, le.pd.awaiting = true, true
	ex.Await(le)
}

// encodeDone is told that the current triple's encode call ended: the PD legs start from the
// handshake's body (SGLang) or the client's (vLLM), or the failure is retried or answered
// as a prefill's would be.
func (le *loopExchange) encodeDone(ex *evloop.Exchange, pf *loopPrefill) {
	le.pd.epd.encoding, le.pd.awaiting = false, false
	ex.Resume()
	if pf.failed() {
		le.prefillFailed(ex) // the encode worker's answer, or another triple
		return
	}
	le.pd.drop(false) // done: released
	le.pd.pw = le.attempt.prefill.w
	orig := ex.Req().Body()
	if !le.pd.vllm {
		orig = le.pd.epd.handshake
	}
	le.handover(ex, orig)
}

// wakeEPD sends the request to a new triple after a retry's pause, or answers the last
// failure when there is no whole triple to try (the route table lost a leg, or every worker
// of one is excluded).
func (le *loopExchange) wakeEPD(ex *evloop.Exchange) {
	tab := le.s.router.Current()
	prt, drt, ok := lookupPD(tab, le.fields.Model)
	ert := lookupEncode(tab, le.fields.Model)
	if ok && prt != nil && drt != nil && ert != nil {
		if _, err := pickTriple(&le.attempt, ert, prt, drt); err == nil {
			le.s.log.Debug("Retrying an EPD request on another triple", "failed", le.failed.URL, "attempt", le.attempt.failures+1, "error", le.lastErr)
			le.pd.epd.rt, le.pd.prt, le.rt = ert, prt, drt
			le.pd.drop(true)
			le.startEncode(ex)
			return
		}
	}
	le.deliverLastFailure(ex)
}
