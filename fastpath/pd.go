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
	"github.com/smg-go/smg/worker/breaker"
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
	s.holdRoutingKey(x)
	orig := ctx.PostBody() // x.fields point into it: it stays ours until the exchange is reused
	attempts := s.cfg.Retry.attempts()
	for n := 0; ; n++ {
		pw, pPermit, err := s.pickAdmitted(prt, &x.req)
		if err != nil {
			s.failPickLeg(ctx, route, "prefill", err)
			return
		}
		dw, dPermit, err := s.pickAdmitted(drt, &x.req)
		if err != nil {
			pw.Breaker.Record(pPermit, breaker.Abandoned, breaker.Now())
			s.failPickLeg(ctx, route, "decode", err)
			return
		}
		prt.Selections.Inc()
		drt.Selections.Inc()
		s.logDecision(prt, pw, x)
		s.logDecision(drt, dw, x)
		a := pdAttempt{prefill: pw, pPermit: pPermit, decode: dw, dPermit: dPermit, route: route,
			deadline: time.Now().Add(s.cfg.RequestTimeout), last: n+1 == attempts, reqID: reqID}
		var f pdFailure
		if pw.KVConnector != "" {
			f = s.attemptVLLM(ctx, x, orig, &a)
		} else {
			f = s.attemptSGLang(ctx, x, orig, &a)
		}
		if f.failed == nil {
			// Set last: forwarding replaced the response headers.
			ctx.Response.Header.SetBytesV(headerPrefillWorker, pw.URLBytes())
			return
		}
		// The attempt failed before the client saw a byte.
		x.req.Exclude = append(x.req.Exclude, f.failed)
		if !a.last && f.retryable() {
			time.Sleep(s.cfg.Retry.backoff(n))
			tab := s.router.Current()
			if p, d, ok := lookupPD(tab, x.fields.Model); ok && p != nil && d != nil {
				s.log.Debug("Retrying a PD request on another pair", "failed", f.failed.URL, "attempt", n+2, "error", f.err)
				f.release()
				prt, drt = p, d
				continue
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

// pdAttempt is one try of a PD request: the pair and what each leg holds.
type pdAttempt struct {
	prefill, decode  *worker.Worker
	pPermit, dPermit breaker.Permit
	route            int
	deadline         time.Time
	last             bool
	reqID            []byte
}

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
		s.finishHeaders(ctx, f.failed, reqID)
		s.m.observe(route, ctx.Response.StatusCode(), ctx.Time())
	default:
		s.deliverFailure(ctx, route, f.failed, f.err, reqID)
	}
}

// swapBody makes body the request's body. The first swap takes the client's original body
// (which x.fields point into) into x.pdOrig, where it stays until the exchange is reused; a
// later one takes back the previous rewrite as the next rewrite buffer.
func swapBody(ctx *fasthttp.RequestCtx, x *exchange, body []byte) {
	prev := ctx.Request.SwapBody(body)
	if x.pdOrig == nil {
		x.pdOrig, x.pdBody = prev, nil
	} else {
		x.pdBody = prev[:0]
	}
}

// attemptSGLang runs SGLang's handover: the bootstrap fields are added to the request, which
// goes to both workers at once.
func (s *Server) attemptSGLang(ctx *fasthttp.RequestCtx, x *exchange, orig []byte, a *pdAttempt) pdFailure {
	pw, dw := a.prefill, a.decode
	body, err := disagg.AppendBootstrap(x.pdBody[:0], orig, pw.BootstrapHost, pw.BootstrapPort, disagg.NewRoom())
	if err != nil {
		dw.Breaker.Record(a.dPermit, breaker.Abandoned, breaker.Now())
		pw.Breaker.Record(a.pPermit, breaker.Abandoned, breaker.Now())
		return pdFailure{failed: pw, err: errBodyRewrite}
	}
	j := s.newPrefillJob(ctx, x, pw, a.pPermit, body, a.deadline)
	s.prefillSenders.start(j)
	swapBody(ctx, x, body)
	x.hold.permit = a.dPermit
	err = s.forward(ctx, x, dw, a.route, a.reqID, a.deadline, a.last)
	if x.streamed {
		// The answer streams from the decode worker; the prefill finishes on its own.
		j.release()
		return pdFailure{}
	}
	if err != nil {
		// The decode leg failed: that is the answer, whatever the prefill leg does.
		j.release()
		return pdFailure{failed: dw, err: err}
	}
	<-j.done
	if j.failed() && ctx.Response.StatusCode() < 300 {
		// The decode answer cannot be right without its prefill.
		return pdFailure{failed: pw, err: j.err, job: j}
	}
	j.release()
	return pdFailure{}
}

// attemptVLLM runs vLLM's sequential handover: prefill (one token, kv_transfer_params asking
// for a remote decode), then decode with the kv_transfer_params the prefill returned.
func (s *Server) attemptVLLM(ctx *fasthttp.RequestCtx, x *exchange, orig []byte, a *pdAttempt) pdFailure {
	pw, dw := a.prefill, a.decode
	if a.route == routeGenerate {
		dw.Breaker.Record(a.dPermit, breaker.Abandoned, breaker.Now())
		pw.Breaker.Record(a.pPermit, breaker.Abandoned, breaker.Now())
		s.fail(ctx, a.route, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
		return pdFailure{}
	}
	body, err := disagg.AppendVLLMPrefill(x.pdBody[:0], orig, a.route == routeChat)
	if err != nil {
		dw.Breaker.Record(a.dPermit, breaker.Abandoned, breaker.Now())
		pw.Breaker.Record(a.pPermit, breaker.Abandoned, breaker.Now())
		return pdFailure{failed: pw, err: errBodyRewrite}
	}
	x.pdBody = body
	j := s.newPrefillJob(ctx, x, pw, a.pPermit, body, a.deadline)
	j.run() // vLLM's decode needs what the prefill returns
	params, ok := disagg.KVTransferParams(j.resp.Body())
	if j.failed() || !ok {
		dw.Breaker.Record(a.dPermit, breaker.Abandoned, breaker.Now())
		if !j.failed() {
			j.release()
			return pdFailure{failed: pw, err: errNoKVTransferParams}
		}
		return pdFailure{failed: pw, err: j.err, job: j}
	}
	body, err = disagg.AppendVLLMDecode(x.pdBody[:0], orig, params)
	j.release()
	if err != nil {
		dw.Breaker.Record(a.dPermit, breaker.Abandoned, breaker.Now())
		return pdFailure{failed: pw, err: errBodyRewrite}
	}
	swapBody(ctx, x, body)
	x.hold.permit = a.dPermit
	if err := s.forward(ctx, x, dw, a.route, a.reqID, a.deadline, a.last); err != nil {
		return pdFailure{failed: dw, err: err}
	}
	return pdFailure{}
}

// pickAdmitted picks a worker on rt whose breaker admits the request, re-picking without the
// workers whose breaker refused.
func (s *Server) pickAdmitted(rt *policy.Route, req *policy.Request) (*worker.Worker, breaker.Permit, error) {
	for refused := 0; ; refused++ {
		res, err := rt.Picker.Pick(req)
		if err == nil && refused > len(rt.Candidates) { // a picker that ignores Exclude
			err = policy.ErrNoAvailableWorkers
		}
		if err != nil {
			return nil, breaker.Permit{}, err
		}
		if permit, ok := res.Worker.Breaker.TryAcquire(breaker.Now()); ok {
			return res.Worker, permit, nil
		}
		req.Exclude = append(req.Exclude, res.Worker)
	}
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
	w        *worker.Worker
	permit   breaker.Permit
	req      fasthttp.Request
	resp     fasthttp.Response
	deadline time.Time
	err      error
	done     chan struct{}
	refs     atomic.Int32
}

var prefillJobs = sync.Pool{New: func() any { return &prefillJob{done: make(chan struct{}, 1)} }}

// newPrefillJob prepares the prefill request: the client's headers, the given body (copied:
// the job may outlive the handler), the prefill worker's host and credentials.
func (s *Server) newPrefillJob(ctx *fasthttp.RequestCtx, x *exchange, w *worker.Worker, permit breaker.Permit, body []byte, deadline time.Time) *prefillJob {
	j := prefillJobs.Get().(*prefillJob)
	j.s, j.w, j.deadline, j.err = s, w, deadline, nil
	j.refs.Store(2)
	ctx.Request.Header.CopyTo(&j.req.Header)
	j.req.SetBody(body)
	j.req.SetHost(w.Host)
	if w.Auth != nil {
		j.req.Header.SetBytesV("Authorization", w.Auth)
	}
	tokens := -1
	if x.req.Tokens != nil {
		tokens = len(x.req.Tokens)
	}
	w.NoteDispatch(tokens)
	j.permit = permit
	w.InFlight.Add(1) // the routing key's count, if any, is the decode leg's: one per request
	return j
}

// run sends the prefill request and reads its whole answer.
func (j *prefillJob) run() {
	err := j.w.Client.DoDeadline(&j.req, &j.resp, j.deadline)
	j.err = err
	var outcome breaker.Outcome
	if err != nil {
		outcome = breaker.Fault
		j.w.Upstream[worker.OutcomeError].Inc()
		j.s.log.Debug("Prefill request failed", "worker", j.w.URL, "error", err)
	} else {
		status := j.resp.StatusCode()
		outcome = breaker.Classify(status, false)
		j.w.Upstream[worker.OutcomeOf(status)].Inc()
	}
	j.w.InFlight.Add(-1)
	j.w.Breaker.Record(j.permit, outcome, breaker.Now())
	j.done <- struct{}{}
	j.release()
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
	j.s, j.w, j.permit, j.err = nil, nil, breaker.Permit{}, nil
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
