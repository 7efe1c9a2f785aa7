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

// loopEPD is a loop exchange's EPD state.
type loopEPD struct {
	epd      bool           // the request takes an encode leg (EPD mode and media)
	ert      *policy.Route  // the encode route
	ew       *worker.Worker // the encode worker of the current triple: X-Smg-Encode-Worker-Id
	encoding bool           // the exchange awaits the current triple's encode call (le.pf)
	// handshake is SGLang's PD starting body: the client's with the encode handshake.
	handshake []byte
}

func (e *loopEPD) reset() {
	e.epd, e.ert, e.ew, e.encoding = false, nil, nil, false
	if cap(e.handshake) > maxPooledPDBody {
		e.handshake = nil
	}
	e.handshake = e.handshake[:0]
}

// sendEPD picks a triple and starts its encode leg; the PD legs follow when it succeeded
// (encodeDone).
func (le *loopExchange) sendEPD(ex *evloop.Exchange) {
	a := &le.attempt
	if le.prt == nil || le.rt == nil {
		le.sendPD(ex) // answers which PD leg has no worker
		return
	}
	if le.ert == nil {
		le.fail(ex, errNoWorkers, "no encode worker serves model '"+string(le.fields.Model)+"'; EPD mode needs an encode worker for every model that takes images, audio or video")
		return
	}
	if leg, err := pickTriple(a, le.ert, le.prt, le.rt); err != nil {
		le.failPickLeg(ex, leg, err)
		return
	}
	le.startEncode(ex)
}

// startEncode starts the encode leg of the attempt's picked triple.
func (le *loopExchange) startEncode(ex *evloop.Exchange) {
	a := &le.attempt
	le.pw, le.dw, le.ew = nil, nil, nil
	ew, pw := a.encode.w, a.prefill.w
	le.vllm = pw.KVConnector != ""
	if le.vllm && le.route == routeGenerate {
		le.fail(ex, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
		return
	}
	le.ew, le.dw = ew, a.main.w
	orig := ex.Req().Body()
	var body []byte
	var err error
	if le.vllm {
		body, err = disagg.AppendVLLMEncode(le.pdBody[:0], orig, le.route == routeChat)
	} else {
		room := disagg.NewRoom()
		body, err = disagg.AppendBootstrap(le.pdBody[:0], orig, ew.BootstrapHost, ew.BootstrapPort, room)
		if err == nil {
			le.handshake, err = disagg.AppendEncodeHandshake(le.handshake[:0], orig, ew.BootstrapHost, ew.BootstrapPort, room)
		}
	}
	if err != nil {
		le.fail(ex, errInternal, errBodyRewrite.Error())
		return
	}
	le.pdBody = body // copied out by the call: the PD legs' rewrite reuses it
	// --first-byte-timeout-secs bounds the encode answer too: it is the first answer awaited.
	now := ex.Now()
	deadline := a.tryDeadline(false, now)
	if fbt := le.s.cfg.FirstByteTimeout; fbt > 0 && now.Add(fbt).Before(deadline) {
		deadline = now.Add(fbt)
	}
	le.callLeg(ex, &a.encode, body, deadline).encode = true
	le.encoding, le.awaiting = true, true
	ex.Await(le)
}

// encodeDone is told that the current triple's encode call ended: the PD legs start from the
// handshake's body (SGLang) or the client's (vLLM), or the failure is retried or answered
// as a prefill's would be.
func (le *loopExchange) encodeDone(ex *evloop.Exchange, pf *loopPrefill) {
	le.encoding, le.awaiting = false, false
	ex.Resume()
	if pf.failed() {
		le.prefillFailed(ex) // the encode worker's answer, or another triple
		return
	}
	le.dropPrefill(false) // done: released
	le.pw = le.attempt.prefill.w
	orig := ex.Req().Body()
	if !le.vllm {
		orig = le.handshake
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
			le.ert, le.prt, le.rt = ert, prt, drt
			le.dropPrefill(true)
			le.startEncode(ex)
			return
		}
	}
	if le.prefillErr {
		le.deliverPrefillFailure(ex)
		return
	}
	le.deliverFailure(ex, le.failed, le.lastErr)
}
