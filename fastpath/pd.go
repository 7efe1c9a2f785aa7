package fastpath

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/disagg"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

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

// dispatchPD serves a generation request in PD mode: a prefill worker and a decode worker are
// picked by their legs' policies, and the request is handed over with the protocol the
// prefill worker speaks. SGLang's: the same request, with the prefill worker's bootstrap
// address and a fresh room, goes to both at once; the decode worker's answer is the client's.
// vLLM's (a worker with a KV connector label): the prefill worker computes the KV for one
// token and returns kv_transfer_params, which the decode request then carries.
//
// Each leg holds its worker's in-flight count and breaker permit for exactly as long as its
// own request lasts. While nothing has reached the client, a retryable failure of either leg
// (a transport error, 408, 429 or 5xx) sends the request again, to a pair re-picked without
// the worker that failed and, for SGLang, with a new room.
func (s *Server) dispatchPD(ctx *fasthttp.RequestCtx, x *exchange, prt, drt *policy.Route, route int, reqID []byte) {
	if prt == nil || drt == nil {
		leg := "decode"
		if prt == nil {
			leg = "prefill"
		}
		s.fail(ctx, route, errNoWorkers, "no "+leg+" worker serves model '"+string(x.fields.Model)+"'; PD mode needs a prefill and a decode worker for every model")
		return
	}
	a := &x.attempt
	orig := ctx.PostBody() // x.fields point into it: it stays ours until the exchange is reused
	for {
		if err := a.pick(prt, &a.prefill); err != nil {
			s.failPickLeg(ctx, route, "prefill", err)
			return
		}
		if err := a.pick(drt, &a.main); err != nil {
			s.failPickLeg(ctx, route, "decode", err)
			return
		}
		pw := a.prefill.w
		var f pdFailure
		if pw.KVConnector != "" {
			f = s.attemptVLLM(ctx, x, orig, route, reqID)
		} else {
			f = s.attemptSGLang(ctx, x, orig, route, reqID)
		}
		if f.failed == nil {
			// Set last: forwarding replaced the response headers.
			ctx.Response.Header.SetBytesV(headerPrefillWorker, pw.URLBytes())
			return
		}
		if errors.Is(f.err, errClientLeft) {
			f.release()
			ctx.SetConnectionClose()
			return // nobody to answer or retry for
		}
		// The attempt failed before the client saw a byte: try another pair, if the budget,
		// the deadline, the client and the route table allow.
		if f.retryable() {
			if wait, ok := a.retry(f.failed, time.Now()); ok && pause(ctx, wait) {
				if p, d, ok := lookupPD(s.router.Current(), x.fields.Model); ok && p != nil && d != nil {
					s.log.Debug("Retrying a PD request on another pair", "failed", f.failed.URL, "attempt", a.failures+1, "error", f.err)
					f.release()
					prt, drt = p, d
					continue
				}
			}
		}
		s.deliverPDFailure(ctx, route, reqID, f)
		ctx.Response.Header.SetBytesV(headerPrefillWorker, pw.URLBytes())
		return
	}
}

var (
	errNoKVTransferParams = errors.New("the prefill answer has no kv_transfer_params object: is the worker a vLLM engine started with --kv-transfer-config (kv_role kv_producer or kv_both)?")
	// errBodyRewrite: the handover fields could not be set in the body. Extract accepted the
	// body as a JSON object, so only a bug gets here.
	errBodyRewrite = errors.New("the request body could not be rewritten for the PD handover")
)

// pdFailure is how an attempt failed before the client saw a byte; failed is nil on success.
type pdFailure struct {
	failed *worker.Worker
	// err is the transport error, errRetryableStatus (the decode answer is in ctx.Response),
	// errNoKVTransferParams or errBodyRewrite.
	err error
	// job, when set, holds the prefill answer that is the client's answer.
	job *prefillJob
}

func (f pdFailure) retryable() bool {
	if f.job != nil && f.job.err == nil {
		return retryableStatus(f.job.resp.StatusCode())
	}
	return !errors.Is(f.err, errNoKVTransferParams) && !errors.Is(f.err, errBodyRewrite)
}

func (f pdFailure) release() {
	if f.job != nil {
		f.job.release()
	}
}

// deliverPDFailure answers with the failed leg's own error answer if it gave one, else the
// gateway's envelope for the failure.
func (s *Server) deliverPDFailure(ctx *fasthttp.RequestCtx, route int, reqID []byte, f pdFailure) {
	defer f.release()
	switch {
	case errors.Is(f.err, errNoKVTransferParams):
		s.fail(ctx, route, errUpstreamUnreachable, "prefill worker "+f.failed.URL+": "+f.err.Error())
	case errors.Is(f.err, errBodyRewrite):
		s.fail(ctx, route, errInternal, f.err.Error())
	case f.job != nil && f.job.err == nil:
		ctx.Response.Reset()
		f.job.resp.CopyTo(&ctx.Response)
		s.deliver(ctx, route, f.failed, reqID)
	default:
		s.deliverFailure(ctx, route, f.failed, f.err, reqID)
	}
}

// attemptSGLang runs SGLang's handover: the bootstrap fields are added to the request, which
// goes to both workers at once. A prefill that fails while the decode worker has not
// started its answer gives the decode request up (its engine would wait for KV that never
// comes); a decode leg that fails, or a client that leaves, gives the prefill up. A leg given
// up has its connection closed (its engine sees the request cancelled) and is abandoned.
func (s *Server) attemptSGLang(ctx *fasthttp.RequestCtx, x *exchange, orig []byte, route int, reqID []byte) pdFailure {
	a := &x.attempt
	pw, dw := a.prefill.w, a.main.w
	body, err := disagg.AppendBootstrap(x.pdBody[:0], orig, pw.BootstrapHost, pw.BootstrapPort, disagg.NewRoom())
	if err != nil {
		return pdFailure{failed: pw, err: errBodyRewrite}
	}
	x.pdBody = body
	j := s.newPrefillJob(ctx, a, body)
	s.prefillSenders.start(j)
	x.up.body, x.up.cancel = body, &j.failedFirst
	err = s.forward(ctx, x, route, reqID)
	x.up.cancel = nil
	switch {
	case a.handedOff:
		// The answer streams from the decode worker; the prefill finishes on its own.
		j.release()
		return pdFailure{}
	case errors.Is(err, worker.ErrCancelled):
		// The prefill failed first: its failure is the answer.
		<-j.done
		return j.failure(pw)
	case err != nil:
		// The decode leg failed, or the client left: that is the answer, whatever the
		// prefill leg does, which is of no use any more.
		j.cancel.Store(true)
		j.release()
		return pdFailure{failed: dw, err: err}
	}
	<-j.done
	if j.failed() && ctx.Response.StatusCode() < 300 {
		// The decode answer cannot be right without its prefill.
		return j.failure(pw)
	}
	j.release()
	return pdFailure{}
}

// attemptVLLM runs vLLM's sequential handover: prefill (one token, kv_transfer_params asking
// for a remote decode), then decode with the kv_transfer_params the prefill returned.
func (s *Server) attemptVLLM(ctx *fasthttp.RequestCtx, x *exchange, orig []byte, route int, reqID []byte) pdFailure {
	a := &x.attempt
	pw, dw := a.prefill.w, a.main.w
	if route == routeGenerate {
		s.fail(ctx, route, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
		return pdFailure{}
	}
	body, err := disagg.AppendVLLMPrefill(x.pdBody[:0], orig, route == routeChat)
	if err != nil {
		return pdFailure{failed: pw, err: errBodyRewrite}
	}
	x.pdBody = body
	j := s.newPrefillJob(ctx, a, body)
	j.run() // vLLM's decode needs what the prefill returns
	params, ok := disagg.KVTransferParams(j.resp.Body())
	if j.failed() || !ok {
		if !j.failed() {
			j.release()
			return pdFailure{failed: pw, err: errNoKVTransferParams}
		}
		return j.failure(pw)
	}
	body, err = disagg.AppendVLLMDecode(x.pdBody[:0], orig, params)
	j.release()
	if err != nil {
		return pdFailure{failed: pw, err: errBodyRewrite}
	}
	x.pdBody, x.up.body = body, body
	if err := s.forward(ctx, x, route, reqID); err != nil {
		return pdFailure{failed: dw, err: err}
	}
	return pdFailure{}
}

func (s *Server) failPickLeg(ctx *fasthttp.RequestCtx, route int, leg string, err error) {
	if errors.Is(err, policy.ErrNoAvailableWorkers) {
		s.fail(ctx, route, errNoWorkers, "no available "+leg+" workers for this request; all are unhealthy, draining or gone")
		return
	}
	s.failPick(ctx, route, err)
}

// prefillJob is the prefill leg of one PD request. It is pooled; the handler and the job's own
// goroutine each hold a reference, and the last to release it recycles it, so that a
// streamed answer can leave the prefill to finish alone.
type prefillJob struct {
	s        *Server
	leg      leg // the prefill leg, taken from the attempt: the job settles it
	req      fasthttp.Request
	resp     fasthttp.Response
	body     []byte       // the prefill's body, the job's own copy (it may outlive the handler)
	up       upstreamBody // sends body, watching the client and cancel
	deadline time.Time
	err      error
	done     chan struct{}
	refs     atomic.Int32
	// cancel gives the prefill up (the decode leg failed, or the client left); failedFirst
	// is set once the prefill failed, which gives up a decode round trip still waiting for
	// its first byte (SGLang's decode waits for the prefill's KV).
	cancel, failedFirst atomic.Bool
}

var prefillJobs = sync.Pool{New: func() any { return &prefillJob{done: make(chan struct{}, 1)} }}

// newPrefillJob prepares the prefill request of the attempt's prefill leg, which it takes
// over: the client's headers, the given body (copied: the job may outlive the handler), the
// prefill worker's host and credentials.
func (s *Server) newPrefillJob(ctx *fasthttp.RequestCtx, a *attempt, body []byte) *prefillJob {
	j := prefillJobs.Get().(*prefillJob)
	w := a.prefill.w
	j.s, j.deadline, j.err = s, a.tryDeadline(false, time.Now()), nil
	j.refs.Store(2)
	ctx.Request.Header.CopyTo(&j.req.Header)
	j.body = append(j.body[:0], body...)
	j.up = upstreamBody{body: j.body, resp: &j.resp, client: ctx.Conn(), cancel: &j.cancel}
	j.req.SetBodyStream(&j.up, len(j.body))
	w.Address(&j.req)
	if auth := w.AuthHeader(); auth != nil {
		j.req.Header.SetBytesV("Authorization", auth)
	}
	a.dispatch(&a.prefill)
	j.leg = a.take(&a.prefill)
	return j
}

// run sends the prefill request, reads its whole answer and settles the prefill leg: with
// the answer, or abandoned when the request gave it up or its client left (not the
// worker's doing).
func (j *prefillJob) run() {
	w := j.leg.w
	err := worker.Cause(&j.resp, w.Client.DoDeadline(&j.req, &j.resp, j.deadline))
	j.err = err
	if errors.Is(err, worker.ErrCancelled) || errors.Is(err, worker.ErrClientLeft) {
		j.leg.abandon()
	} else {
		if err != nil {
			j.s.log.Debug("Prefill request failed", "worker", w.URL, "error", err)
		}
		j.leg.settle(j.resp.StatusCode(), err)
	}
	if j.failed() {
		j.failedFirst.Store(true)
	}
	j.done <- struct{}{}
	j.release()
}

// failure is the attempt's failure when the prefill (on pw) failed: the client's departure,
// or the prefill's own failure with its answer (the job goes with it).
func (j *prefillJob) failure(pw *worker.Worker) pdFailure {
	if errors.Is(j.err, worker.ErrClientLeft) {
		j.release()
		return pdFailure{failed: pw, err: errClientLeft}
	}
	return pdFailure{failed: pw, err: j.err, job: j}
}

// failed reports whether the prefill leg failed: a transport error or a non-2xx answer.
func (j *prefillJob) failed() bool {
	return j.err != nil || j.resp.StatusCode() >= 300
}

func (j *prefillJob) release() {
	if j.refs.Add(-1) != 0 {
		return
	}
	select {
	case <-j.done: // not consumed by a streamed request's handler
	default:
	}
	j.req.Reset()
	j.resp.Reset()
	j.s, j.leg, j.err, j.up = nil, leg{}, nil, upstreamBody{}
	j.cancel.Store(false)
	j.failedFirst.Store(false)
	if cap(j.body) > maxPooledPDBody {
		j.body = nil
	}
	prefillJobs.Put(j)
}

// senders runs prefill jobs on long-lived goroutines, so that a PD request neither starts nor
// allocates a goroutine: a job goes to an idle sender, or a new sender starts for it. Senders
// idle for senderIdle exit, so their number follows the peak of concurrent prefills.
type senders struct {
	jobs chan *prefillJob // unbuffered: a send succeeds only when a sender is idle
}

const senderIdle = 30 * time.Second

func newSenders() senders { return senders{jobs: make(chan *prefillJob)} }

func (p senders) start(j *prefillJob) {
	select {
	case p.jobs <- j:
	default:
		go p.loop(j)
	}
}

func (p senders) loop(j *prefillJob) {
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		j.run()
		idle.Reset(senderIdle)
		select {
		case j = <-p.jobs:
		case <-idle.C:
			return
		}
	}
}
