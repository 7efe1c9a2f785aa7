package fastpath

import (
	"errors"
	"time"

	"github.com/smg-go/smg/fastpath/disagg"
	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// PD mode on the event loops: the protocols pd.go describes, run with the request's attempt,
// its legs and retries, with the prefill leg as an evloop.Call beside (SGLang) or before (vLLM)
// the exchange's forward to the decode worker, all on the client connection's loop.
//
//   - SGLang: the bootstrap body goes to the prefill worker (the Call) and to the decode
//     worker (Forward) at once. A successful stream is relayed as it arrives while the
//     prefill finishes alone, holding its worker's in-flight count until it does. A held
//     decode answer that succeeded waits for its prefill (Await): a failed prefill makes
//     the answer the prefill's. A prefill that fails while the decode answer has not
//     started is not waited out: the decode request is cancelled (its engine would wait for
//     KV that never comes) and the pair is retried.
//   - vLLM: the prefill Call first (the exchange awaits it), then the decode Forward with the
//     kv_transfer_params the prefill returned.
//
// A prefill that is of no use any more is cancelled (its connection closed, its leg
// abandoned): the decode leg failed, or the client left.
//
// The body: every pair gets the client's body rewritten (handover) and a retry rewrites it
// again for the next pair, so a PD request's body is always read whole, whatever
// --max-buffered-request-bytes says (streamedOnLoops), bounded by --max-payload-size.

// pdLegs is a PD (or EPD) request's state beyond its attempt: the prefill route, the pair
// under way, its handover body and its prefill call. Its loop exchange owns it from Serve
// (begin) to finish (end); end leaves it empty for the connection's next request.
type pdLegs struct {
	on   bool           // the request runs in PD mode
	prt  *policy.Route  // the prefill route (the decode route is loopExchange.rt)
	pw   *worker.Worker // the prefill worker of the current pair: X-Smg-Prefill-Worker-Id
	dw   *worker.Worker // the decode worker of the current pair
	pf   *loopPrefill   // the prefill call of the current pair, while the request cares
	vllm bool           // the current pair speaks vLLM's sequential handover
	// awaiting: the exchange waits for pf (Await).
	awaiting bool
	// prefillErr: the last failure, kept for a retry's pause, was the prefill's (its answer
	// is pf's).
	prefillErr bool
	body       []byte // the handover body of the current pair
	epd        epdLeg // the encode leg, for an EPD request
}

// begin readies the legs of a request that the route table serves in PD mode (pd) with the
// prefill route prt.
func (p *pdLegs) begin(pd bool, prt *policy.Route) { p.on, p.prt = pd, prt }

// end ends the request's PD state: its prefill call is dropped (one still running finishes
// alone, owned by its call: see loopPrefill) and the rest is reset, bodies kept for reuse
// while they are small.
func (p *pdLegs) end() {
	p.drop(false)
	p.on, p.prt, p.pw, p.dw, p.vllm, p.awaiting, p.prefillErr = false, nil, nil, nil, false, false, false
	p.body = reuse(p.body)
	p.epd.end()
}

// reuse empties b for the next request, dropping it when it grew past what is worth pooling.
func reuse(b []byte) []byte {
	if cap(b) > maxPooledPDBody {
		return nil
	}
	return b[:0]
}

// loopPrefill is the prefill leg of a PD request on the loop (or the encode leg of an EPD
// request: encode): it lives in its evloop.Call's User (reused with the call) and holds the
// leg taken from the attempt until the call ends. While its request cares (le set) the
// request's pdLegs.pf points at it and the request releases it; once the request dropped it
// while it ran (an SGLang prefill that outlives its relayed decode answer), the call owns it
// and CallDone releases it: either way the loop frees it exactly once.
type loopPrefill struct {
	call   *evloop.Call
	le     *loopExchange // the request that waits for this prefill; nil once it no longer cares
	w      *worker.Worker
	leg    leg
	encode bool
	done   bool
	// status and err are the prefill's answer, once done.
	status int
	err    error
}

func (pf *loopPrefill) failed() bool { return pf.err != nil || pf.status >= 300 }

// CallDone ends a prefill call: its leg is settled with the answer, and the request that
// waits for it, if any, is told.
func (p loopPlane) CallDone(c *evloop.Call, err error) {
	pf := c.User.(*loopPrefill)
	status := 0
	if err == nil {
		status = c.Status()
	}
	if errors.Is(err, evloop.ErrShutdown) {
		pf.leg.abandon()
	} else {
		pf.leg.settle(status, err)
	}
	if err != nil {
		msg := "Prefill request failed"
		if pf.encode {
			msg = "Encode request failed"
		}
		p.s.log.Debug(msg, "worker", pf.w.URL, "error", err)
	}
	pf.done, pf.status, pf.err = true, status, err
	if pf.le == nil {
		pf.release()
		return
	}
	pf.le.prefillDone(pf)
}

// KeepCalling cuts a prefill waiting on a worker found unresponsive, as KeepWaiting does for
// the decode leg.
func (p loopPlane) KeepCalling(c *evloop.Call) bool {
	return c.User.(*loopPrefill).w.StallState() != worker.StallUnresponsive
}

func (pf *loopPrefill) release() {
	c := pf.call
	pf.call, pf.le, pf.w, pf.err = nil, nil, nil, nil
	c.Release()
}

// drop unlinks the current pair's prefill from the request: a finished one is released; one
// still running is cancelled (cancel) or left to finish alone, its call its owner.
func (p *pdLegs) drop(cancel bool) {
	pf := p.pf
	if pf == nil {
		return
	}
	p.pf, p.awaiting = nil, false
	switch {
	case pf.done:
		pf.release()
	case cancel:
		pf.leg.abandon()
		pf.release()
	default:
		pf.le = nil
	}
}

// sendPD picks a pair and starts its handover.
func (le *loopExchange) sendPD(ex *evloop.Exchange) {
	a := &le.attempt
	le.pd.drop(true)
	le.pd.pw, le.pd.dw = nil, nil
	if le.pd.prt == nil || le.rt == nil {
		leg := "decode"
		if le.pd.prt == nil {
			leg = "prefill"
		}
		le.fail(ex, errNoWorkers, "no "+leg+" worker serves model '"+string(le.fields.Model)+"'; PD mode needs a prefill and a decode worker for every model")
		return
	}
	if err := a.pick(le.pd.prt, &a.prefill); err != nil {
		le.failPickLeg(ex, "prefill", err)
		return
	}
	if err := a.pick(le.rt, &a.main); err != nil {
		le.failPickLeg(ex, "decode", err)
		return
	}
	pw, dw := a.prefill.w, a.main.w
	le.pd.pw, le.pd.dw, le.pd.vllm = pw, dw, pw.KVConnector != ""
	le.handover(ex, ex.Req().Body()) // le.fields point into it: it stays as it is
}

// handover runs the picked pair's protocol from orig, the client's body (or in EPD mode
// the body with the encode handshake).
func (le *loopExchange) handover(ex *evloop.Exchange, orig []byte) {
	pw := le.pd.pw
	if le.pd.vllm && le.route == routeGenerate {
		le.fail(ex, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
		return
	}
	var body []byte
	var err error
	if le.pd.vllm {
		body, err = disagg.AppendVLLMPrefill(le.pd.body[:0], orig, le.route == routeChat)
	} else {
		body, err = disagg.AppendBootstrap(le.pd.body[:0], orig, pw.BootstrapHost, pw.BootstrapPort, disagg.NewRoom())
	}
	if err != nil {
		le.fail(ex, errInternal, errBodyRewrite.Error())
		return
	}
	le.pd.body = body
	le.callPrefill(ex, body)
	if le.pd.vllm { // the decode request carries the prefill answer's kv_transfer_params
		le.pd.awaiting = true
		ex.Await(le)
		return
	}
	le.forwardMain(ex, body)
}

// callPrefill dispatches the attempt's prefill leg with body and hands it to a Call.
func (le *loopExchange) callPrefill(ex *evloop.Exchange, body []byte) {
	le.callLeg(ex, &le.attempt.prefill, body, le.attempt.tryDeadline(false, ex.Now()))
}

// callLeg dispatches the attempt's leg l (prefill or encode) with body and hands it to a
// Call answered by deadline, which becomes le.pd.pf.
func (le *loopExchange) callLeg(ex *evloop.Exchange, l *leg, body []byte, deadline time.Time) *loopPrefill {
	a := &le.attempt
	w := l.w
	t := le.workerTarget(w, body)
	a.dispatch(l)
	c := ex.Call(loopPlane{le.s}, &t, deadline)
	pf, _ := c.User.(*loopPrefill)
	if pf == nil {
		pf = new(loopPrefill)
		c.User = pf
	}
	*pf = loopPrefill{call: c, le: le, w: w, leg: a.take(l)}
	le.pd.pf = pf
	return pf
}

// prefillDone is told that the current pair's prefill ended.
func (le *loopExchange) prefillDone(pf *loopPrefill) {
	ex := le.ex
	if le.pd.epd.encoding {
		le.encodeDone(ex, pf)
		return
	}
	if le.pd.awaiting {
		le.pd.awaiting = false
		ex.Resume()
		switch {
		case pf.failed():
			le.prefillFailed(ex)
		case le.pd.vllm:
			le.sendVLLMDecode(ex, pf)
		default: // SGLang: the held decode answer is right
			le.deliverHeld(ex, le.pd.dw)
		}
		return
	}
	// SGLang, the decode answer not yet complete: a failed prefill is the answer, unless the
	// decode answer is already being relayed (then it tells the client itself).
	if pf.failed() && ex.CancelForward() {
		le.attempt.main.abandon()
		le.prefillFailed(ex)
	}
}

// sendVLLMDecode forwards the decode request with the kv_transfer_params of the prefill's
// answer.
func (le *loopExchange) sendVLLMDecode(ex *evloop.Exchange, pf *loopPrefill) {
	params, ok := disagg.KVTransferParams(pf.call.Body())
	if !ok {
		le.fail(ex, errUpstreamUnreachable, "prefill worker "+pf.w.URL+": "+errNoKVTransferParams.Error())
		return
	}
	// The prefill's body was copied out when it was sent: its buffer takes the decode's.
	body, err := disagg.AppendVLLMDecode(le.pd.body[:0], ex.Req().Body(), params)
	le.pd.drop(false) // done: released (params pointed into it)
	if err != nil {
		le.fail(ex, errInternal, errBodyRewrite.Error())
		return
	}
	le.pd.body = body
	le.forwardMain(ex, body)
}

// prefillFailed handles a failed prefill (le.pd.pf, done) before the client saw a byte: another
// pair if the failure is worth one and the budget and the deadline allow, else its answer.
func (le *loopExchange) prefillFailed(ex *evloop.Exchange) {
	pf := le.pd.pf
	a := &le.attempt
	err := pf.err
	if err == nil {
		err = errRetryableStatus
		if !retryableStatus(pf.status) {
			le.deliverPrefillFailure(ex)
			return
		}
	}
	le.lastErr, le.pd.prefillErr = err, true
	if pause, ok := a.retry(pf.w, ex.Now()); ok {
		le.failed = pf.w
		ex.Sleep(le, pause)
		return
	}
	le.deliverPrefillFailure(ex)
}

// deliverPrefillFailure answers with the failed prefill's own answer if it gave one, else the
// gateway's envelope for its transport error.
func (le *loopExchange) deliverPrefillFailure(ex *evloop.Exchange) {
	pf := le.pd.pf
	if pf.err != nil {
		le.deliverFailure(ex, pf.w, pf.err)
		return
	}
	le.answerHeaders(ex, pf.w)
	ex.DeliverCall(pf.call)
	le.finish(pf.status)
}

// wakePD sends the request to a new pair after a retry's pause, or answers the last failure
// when the route table no longer has both legs.
func (le *loopExchange) wakePD(ex *evloop.Exchange) {
	if le.pd.epd.on {
		le.wakeEPD(ex)
		return
	}
	prt, drt, ok := lookupPD(le.s.router.Current(), le.fields.Model)
	if ok && prt != nil && drt != nil {
		le.s.log.Debug("Retrying a PD request on another pair", "failed", le.failed.URL, "attempt", le.attempt.failures+1, "error", le.lastErr)
		le.pd.prt, le.rt = prt, drt
		le.sendPD(ex)
		return
	}
	le.deliverLastFailure(ex)
}

// deliverLastFailure answers the last failure of a PD or EPD request that gets no other
// pair: the prefill's (or encode's) answer when it was that leg's, else the decode worker's.
func (le *loopExchange) deliverLastFailure(ex *evloop.Exchange) {
	if le.pd.prefillErr {
		le.deliverPrefillFailure(ex)
		return
	}
	le.deliverFailure(ex, le.failed, le.lastErr)
}

func (le *loopExchange) failPickLeg(ex *evloop.Exchange, leg string, err error) {
	if errors.Is(err, policy.ErrNoAvailableWorkers) {
		le.fail(ex, errNoWorkers, "no available "+leg+" workers for this request; all are unhealthy, draining or gone")
		return
	}
	le.failPick(ex, err)
}
