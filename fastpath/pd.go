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
// own request lasts. There is one attempt: a failure on either leg is the client's answer.
func (s *Server) dispatchPD(ctx *fasthttp.RequestCtx, x *exchange, prt, drt *policy.Route, route int, reqID []byte) {
	if prt == nil || drt == nil {
		leg := "decode"
		if prt == nil {
			leg = "prefill"
		}
		s.fail(ctx, route, errNoWorkers, "no "+leg+" worker serves model '"+string(x.fields.Model)+"'; PD mode needs a prefill and a decode worker for every model")
		return
	}
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
	s.holdRoutingKey(x)
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	body := ctx.PostBody()
	if pw.KVConnector != "" {
		s.dispatchVLLM(ctx, x, pw, pPermit, dw, dPermit, route, reqID, body, deadline)
	} else {
		s.dispatchSGLang(ctx, x, pw, pPermit, dw, dPermit, route, reqID, body, deadline)
	}
	// Set last: forwarding replaces the response headers.
	ctx.Response.Header.SetBytesV(headerPrefillWorker, pw.URLBytes())
}

// dispatchSGLang runs SGLang's handover: the bootstrap fields are added to the request, which
// goes to both workers at once.
func (s *Server) dispatchSGLang(ctx *fasthttp.RequestCtx, x *exchange, pw *worker.Worker, pPermit breaker.Permit, dw *worker.Worker, dPermit breaker.Permit, route int, reqID, body []byte, deadline time.Time) {

	var err error
	x.pdBody, err = disagg.AppendBootstrap(x.pdBody[:0], body, pw.BootstrapHost, pw.BootstrapPort, disagg.NewRoom())
	if err != nil {
		dw.Breaker.Record(dPermit, breaker.Abandoned, breaker.Now())
		pw.Breaker.Record(pPermit, breaker.Abandoned, breaker.Now())
		s.fail(ctx, route, errInvalidRequest, "the request body is not a JSON object: "+err.Error())
		return
	}
	j := s.newPrefillJob(ctx, x, pw, pPermit, x.pdBody, deadline)
	s.prefillSenders.start(j)

	// The decode request is the client's request with the new body. The original body stays
	// ours (x.fields point into it) until the exchange is recycled.
	x.pdBody = ctx.Request.SwapBody(x.pdBody)
	x.hold.permit = dPermit
	err = s.forward(ctx, x, dw, route, reqID, deadline, true)
	if x.streamed {
		// The answer streams from the decode worker; the prefill finishes on its own.
		j.release()
		return
	}
	<-j.done
	if err == nil && j.failed() {
		// The decode answer cannot be right without its prefill: the client gets the
		// prefill worker's failure instead.
		s.deliverPrefillFailure(ctx, route, j, reqID)
	} else if err != nil {
		s.deliverFailure(ctx, route, dw, err, reqID)
	}
	j.release()
}

// dispatchVLLM runs vLLM's sequential handover: prefill (one token, kv_transfer_params asking
// for a remote decode), then decode with the kv_transfer_params the prefill returned.
func (s *Server) dispatchVLLM(ctx *fasthttp.RequestCtx, x *exchange, pw *worker.Worker, pPermit breaker.Permit, dw *worker.Worker, dPermit breaker.Permit, route int, reqID, body []byte, deadline time.Time) {
	abandon := func() {
		dw.Breaker.Record(dPermit, breaker.Abandoned, breaker.Now())
	}
	if route == routeGenerate {
		abandon()
		pw.Breaker.Record(pPermit, breaker.Abandoned, breaker.Now())
		s.fail(ctx, route, errInvalidRequest, "/generate is SGLang's API: the prefill worker "+pw.URL+" is a vLLM worker ("+pw.KVConnector+"); use /v1/chat/completions or /v1/completions")
		return
	}
	var err error
	x.pdBody, err = disagg.AppendVLLMPrefill(x.pdBody[:0], body, route == routeChat)
	if err != nil {
		abandon()
		pw.Breaker.Record(pPermit, breaker.Abandoned, breaker.Now())
		s.fail(ctx, route, errInvalidRequest, "the request body is not a JSON object: "+err.Error())
		return
	}
	j := s.newPrefillJob(ctx, x, pw, pPermit, x.pdBody, deadline)
	j.run() // vLLM's decode needs what the prefill returns
	params, ok := disagg.KVTransferParams(j.resp.Body())
	if j.failed() || !ok {
		abandon()
		if !j.failed() {
			j.err = errNoKVTransferParams
		}
		s.deliverPrefillFailure(ctx, route, j, reqID)
		j.release()
		return
	}
	x.pdBody, err = disagg.AppendVLLMDecode(x.pdBody[:0], body, params)
	j.release()
	if err != nil { // body was rewritten once already: cannot happen
		abandon()
		s.fail(ctx, route, errInternal, err.Error())
		return
	}
	x.pdBody = ctx.Request.SwapBody(x.pdBody)
	x.hold.permit = dPermit
	if err := s.forward(ctx, x, dw, route, reqID, deadline, true); err != nil {
		s.deliverFailure(ctx, route, dw, err, reqID)
	}
}

var errNoKVTransferParams = errors.New("the prefill answer has no kv_transfer_params object: is the worker a vLLM engine started with --kv-transfer-config (kv_role kv_producer or kv_both)?")

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

// deliverPrefillFailure answers with the prefill worker's own error answer if it gave one,
// else the gateway's envelope for its transport error.
func (s *Server) deliverPrefillFailure(ctx *fasthttp.RequestCtx, route int, j *prefillJob, reqID []byte) {
	if j.err != nil {
		if errors.Is(j.err, errNoKVTransferParams) {
			s.fail(ctx, route, errUpstreamUnreachable, "prefill worker "+j.w.URL+": "+j.err.Error())
			return
		}
		s.failUpstream(ctx, route, j.w, j.err)
		return
	}
	ctx.Response.Reset()
	j.resp.CopyTo(&ctx.Response)
	s.finishHeaders(ctx, j.w, reqID)
	s.m.observe(route, ctx.Response.StatusCode(), ctx.Time())
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
