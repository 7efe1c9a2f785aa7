package fastpath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/engine/openai"
	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// GRPCModel is what the gateway needs of a model its gRPC workers serve: the tokenizer, the
// chat template (nil: chat requests get 400), the EOS ids and the longest prompt (0:
// unknown).
type GRPCModel struct {
	ID              string
	Tokenizer       *tokenizer.Tokenizer
	Template        *chat.Template
	EOSTokenIDs     []uint32
	MaxPromptTokens int
}

// GRPCBackend connects the OpenAI routes to gRPC workers (grpc://). The gateway declares
// what it needs; cmd/smg adapts the worker registry, the engine clients and the model
// catalog to it.
type GRPCBackend struct {
	// IsGRPC reports whether w is a gRPC worker: a route whose workers are is served through
	// the engine client instead of forwarded.
	IsGRPC func(w *worker.Worker) bool
	// Client returns w's engine client.
	Client func(w *worker.Worker) (*grpcworker.Client, error)
	// Model returns the model named name (the request's model, "" when it names none); ok
	// false when no tokenizer is known for it. A value, so an adapter allocates nothing.
	Model func(name string) (m GRPCModel, ok bool)
	// DPRank returns w's data-parallel rank, -1 for none. Nil: none.
	DPRank func(w *worker.Worker) int
	// Admin answers an engine's HTTP admin route (GET /v1/loads, POST /flush_cache, GET
	// /get_model_info, /get_server_info, /health_generate) from w's gRPC service, in the
	// route's HTTP shape (grpcworker.Client.AdminCall). Nil: the admin routes ask gRPC workers
	// over HTTP, which real engines do not serve on their gRPC port.
	Admin func(ctx context.Context, w *worker.Worker, method, path string) (status int, body []byte, contentType string, err error)
	// Tokenizers bounds the requests being rendered and tokenized at once: that CPU work
	// runs off the event loops, and a flood of long prompts must not take every core.
	// cmd/smg gives GOMAXPROCS.
	Tokenizers int

	sem chan struct{}
}

// validate reports a backend that cannot serve.
func (g *GRPCBackend) validate() error {
	if g.IsGRPC == nil || g.Client == nil || g.Model == nil {
		return errors.New("the gRPC backend needs IsGRPC, Client and Model")
	}
	if g.Tokenizers < 1 {
		return fmt.Errorf("gRPC tokenizer pool size %d: give a positive count (runtime.GOMAXPROCS(0) is one a core)", g.Tokenizers)
	}
	return nil
}

// grpcServes reports the routes gRPC workers can serve: chat, completions and generate.
func grpcServes(route int) bool {
	return route == routeChat || route == routeCompletions || route == routeGenerate
}

// grpcRoute reports whether the request's route is served by gRPC workers.
func (le *loopExchange) grpcRoute() bool {
	g := le.s.cfg.GRPC
	if g == nil || !grpcServes(le.route) {
		return false
	}
	for _, rt := range []*policy.Route{le.rt, le.pd.prt} { // in PD mode, either leg tells
		if rt != nil && len(rt.Candidates) > 0 {
			return g.IsGRPC(rt.Candidates[0])
		}
	}
	return false
}

// sendGRPC hands an admitted request for gRPC workers to its own goroutine: the exchange is
// detached from the loop (the goroutine writes the whole answer to the evloop.Stream), the
// prompt is rendered and tokenized there under the tokenizer bound, and the engine's stream
// is relayed. The goroutine owns le until it closes the stream.
func (le *loopExchange) sendGRPC(ex *evloop.Exchange) {
	if ex.Streamed() {
		le.fail(ex, errPayloadTooLarge, "a request for gRPC workers is tokenized whole: its body must fit in --max-buffered-request-bytes")
		return
	}
	st := ex.Detach()
	if st == nil {
		le.fail(ex, errInternal, "the request could not be detached from its event loop")
		return
	}
	le.tel.rec.GRPC = true
	r := ex.Req()
	g := grpcCalls.Get().(*grpcCall)
	g.le, g.st, g.body, g.keepAlive = le, st, r.Body(), r.KeepAlive()
	go g.run()
}

// grpcCalls keeps ended calls with their buffers (prompt ids, the answer writer's), so a
// relayed token allocates nothing in steady state.
var grpcCalls = sync.Pool{New: func() any { return new(grpcCall) }}

// maxKeptPrompt bounds the buffers a pooled call keeps (ids and rendered text).
const maxKeptPrompt = 1 << 16

// recycle clears g for its next request and pools it.
func (g *grpcCall) recycle() {
	ids, scratch, out, w := g.ids[:0], g.scratch[:0], g.out[:0], g.w
	if cap(ids) > maxKeptPrompt || cap(scratch) > 4*maxKeptPrompt || cap(out) > 4*maxKeptPrompt {
		ids, scratch, out = nil, nil, nil
	}
	g.req.Reset()
	req := g.req
	*g = grpcCall{req: req, ids: ids, scratch: scratch, out: out, w: w}
	grpcCalls.Put(g)
}

// grpcCall is one request served by gRPC workers, on its own goroutine.
type grpcCall struct {
	le        *loopExchange
	st        *evloop.Stream
	body      []byte // the request body: valid until st.Close
	keepAlive bool
	req       openai.Request
	model     GRPCModel
	ids       []uint32
	scratch   []byte
	greq      grpcworker.GenerateRequest
	w         openai.Writer
	out       []byte
	status    int
	started   bool // the answer's head was written: no retry, no error status any more
	complete  bool // the answer was written whole (its framing ended)
	rid       string
	// bootstrap and kvParams are the PD handover fields of the decode leg's request.
	bootstrap grpcworker.Opt[grpcworker.Bootstrap]
	kvParams  string
}

func (g *grpcCall) run() {
	le := g.le
	s := le.s
	g.status = 500
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("Panic while serving a gRPC request", "panic", p, "stack", string(debug.Stack()))
			if !g.started {
				g.fail(errInternal, "internal error")
			}
		}
		if !g.started && !g.complete && g.status != 499 {
			g.fail(errInternal, "the request ended without an answer")
		}
		le.finish(g.status)
		// A connection whose answer was cut (the client left) is not reused.
		g.st.Close(g.keepAlive && g.complete)
		g.recycle()
	}()
	if !g.prepare() {
		return
	}
	g.relay()
}

// kinds maps the gateway's routes to the OpenAI mapping's.
func kindOf(route int) openai.Kind {
	switch route {
	case routeCompletions:
		return openai.Completion
	case routeGenerate:
		return openai.Generate
	}
	return openai.Chat
}

// prepare parses the body and tokenizes the prompt (bounded by the tokenizer pool), and puts
// the ids on the routing request: cache_aware and prefix_hash then pick on tokens.
func (g *grpcCall) prepare() bool {
	le := g.le
	s := le.s
	b := s.cfg.GRPC
	if err := openai.Parse(kindOf(le.route), g.body, &g.req); err != nil {
		g.badRequest(err)
		return false
	}
	var ok bool
	if g.model, ok = b.Model(g.req.Model); !ok || g.model.Tokenizer == nil {
		g.fail(errModelNotFound, "model '"+g.req.Model+"' is served by gRPC workers but no tokenizer is known for it; start the gateway with --model-path or --tokenizer-path")
		return false
	}
	select {
	case b.sem <- struct{}{}:
	case <-g.st.Left():
		g.status = 499
		return false
	}
	var err error
	g.ids, g.scratch, err = g.req.Prompt(g.model.Tokenizer, g.model.Template, g.body, g.model.MaxPromptTokens, g.ids[:0], g.scratch[:0])
	<-b.sem
	if err != nil {
		g.badRequest(err)
		return false
	}
	le.req.Tokens = g.ids
	g.rid = string(le.reqID)
	if g.req.Rid != "" {
		g.rid = g.req.Rid
	}
	return true
}

func (g *grpcCall) badRequest(err error) {
	msg := err.Error()
	g.fail(errInvalidRequest, msg)
}

// relay picks a worker, runs the generation and relays it; before the answer's first byte a
// retryable failure (UNAVAILABLE, RESOURCE_EXHAUSTED, a stream limit) moves it to another
// worker, as the HTTP path does.
func (g *grpcCall) relay() {
	le := g.le
	if le.pd.on {
		g.relayPD()
		return
	}
	a := &le.attempt
	ctx, cancel := g.callContext()
	defer cancel()
	var last error // the previous attempt's failure
	for {
		if err := a.pick(le.rt, &a.main); err != nil {
			if last != nil { // every worker failed: the client gets the last failure
				a.exhausted = a.retries() // no worker left to retry on
				c := grpcworker.Classify(last)
				g.fail(grpcError(c), grpcworker.Message(last))
				return
			}
			g.failPick(err)
			return
		}
		w := a.main.w
		err := g.try(ctx, w)
		if err == nil {
			a.served(le.rt, w)
			return
		}
		last = err
		c := grpcworker.Classify(err)
		a.answered(grpcError(c).status, nil, le.s.clock.Nanos())
		if g.started {
			return // the stream's error event was sent
		}
		if ctx.Err() != nil && g.leftOrDeadline(ctx) {
			return
		}
		if !c.Retryable() {
			g.fail(grpcError(c), grpcworker.Message(err))
			return
		}
		pause, ok := a.retry(w, le.s.clock.Now())
		if !ok {
			g.fail(grpcError(c), grpcworker.Message(err))
			return
		}
		if pause > 0 {
			t := le.s.clock.NewTimer(pause)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				g.leftOrDeadline(ctx)
				return
			}
		}
	}
}

// callContext is the context of the request's engine calls. It ends at the request's
// deadline on the server's clock, a fake one in tests included (Clock.WithDeadline: its
// error is then context.DeadlineExceeded, and its Deadline is what grpc tells the engines),
// or when the client leaves (grpcworker then sends each engine its Abort).
func (g *grpcCall) callContext() (context.Context, context.CancelFunc) {
	ctx, cancel := g.le.s.clock.WithDeadline(context.Background(), g.le.attempt.deadline)
	gone := g.st.Left() // read here: g is recycled once the call returns
	go func() {
		select {
		case <-gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// leftOrDeadline answers a call whose context ended: the client left (nothing to answer), or
// the request's deadline passed (504).
func (g *grpcCall) leftOrDeadline(ctx context.Context) bool {
	select {
	case <-g.st.Left():
		g.status = 499
		return true
	default:
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !g.started {
		g.fail(errUpstreamTimeout, "the engine did not answer within --request-timeout-secs")
		return true
	}
	return false
}

// try runs the generation on w. It returns nil when the answer was relayed whole, else the
// error that ended it (the answer's head may have been written: g.started).
func (g *grpcCall) try(ctx context.Context, w *worker.Worker) error {
	le := g.le
	s := le.s
	a := &le.attempt
	b := s.cfg.GRPC
	cl, err := b.Client(w)
	if err != nil {
		a.main.end(breaker.Fault, worker.OutcomeError)
		return fmt.Errorf("%w: %v", grpcworker.ErrConnect, err)
	}
	rank := -1
	if b.DPRank != nil {
		rank = b.DPRank(w)
	}
	g.req.Fill(&g.greq, g.rid, g.ids, rank)
	g.greq.Bootstrap, g.greq.KVTransferParamsJSON = g.bootstrap, g.kvParams
	g.greq.TraceParent = g.le.trace.headerString()
	a.dispatch(&a.main)
	if g.req.Stream {
		a.main.hold.AwaitFirstToken()
	}
	stream, err := cl.Generate(ctx, &g.greq)
	if err != nil {
		g.settle(err)
		return err
	}
	defer stream.Close()
	g.w.Reset(&g.req, g.model.Tokenizer, g.model.EOSTokenIDs, g.rid, s.clock.Now().Unix(), len(g.ids))
	for {
		ch, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			if g.started {
				g.streamError(err)
			}
			g.settle(err)
			return err
		}
		if !g.started {
			a.main.firstByte()
			g.start(w)
		}
		if ch.TokenIDs != nil {
			a.streamPiece(le.s.clock.Nanos())
		}
		g.out = g.w.Feed(g.out[:0], ch)
		if len(g.out) > 0 {
			if err := g.write(g.out); err != nil {
				g.settle(context.Canceled)
				return err
			}
			if g.req.Stream {
				le.tel.firstToken(le.s.clock.Nanos())
			}
		}
		if g.w.Done() {
			g.settleDone(stream)
			break
		}
	}
	g.end(w)
	return nil
}

// end writes the rest of the answer of w's engine, whose stream ended whole, and ends the
// main leg as a success; a client that left meanwhile makes the status 499.
func (g *grpcCall) end(w *worker.Worker) {
	le := g.le
	s := le.s
	a := &le.attempt
	if !g.started {
		a.main.firstByte()
		g.start(w)
	}
	var err error
	g.out = g.w.End(g.out[:0], "abort")
	if g.req.Stream {
		err = g.write(g.out)
		if err == nil {
			err = g.write(lastChunk)
		}
		a.streamDone()
	} else {
		err = g.writeBody(g.out)
		le.tel.firstToken(le.s.clock.Nanos())
	}
	g.complete = err == nil
	g.status = 200
	prompt, cached := g.w.PromptTokens()
	s.m.grpcPrompt.Add(int(prompt))
	s.m.grpcCached.Add(int(cached))
	le.tel.counted(prompt, cached, g.w.CompletionTokens())
	a.main.end(breaker.Success, worker.OutcomeOf(200))
	if err != nil {
		g.status = 499
	}
}

// settle ends the main leg with the engine's error: the breaker learns a fault class, the
// upstream counter an error.
func (g *grpcCall) settle(err error) { settleLeg(&g.le.attempt.main, err) }

// settleLeg ends l with the engine's error err (nil: a whole answer).
func settleLeg(l *leg, err error) {
	if err == nil {
		l.end(breaker.Success, worker.OutcomeOf(200))
		return
	}
	c := grpcworker.Classify(err)
	o := breaker.ClientError
	switch {
	case c == grpcworker.Canceled:
		l.abandon()
		return
	case c.Fault():
		o = breaker.Fault
	case c == grpcworker.Backpressure:
		o = breaker.Backpressure
	}
	l.end(o, worker.OutcomeError)
}

// start writes the answer's head: a streamed answer is chunked server-sent events; an
// unstreamed one is written whole by writeBody.
func (g *grpcCall) start(w *worker.Worker) {
	if !g.req.Stream {
		return // nothing is written before the whole answer: a failure until then is retried
	}
	g.started = true
	h := g.head(200, "text/event-stream", w)
	h = append(h, "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"...)
	_, _ = g.st.Write(h)
}

var lastChunk = []byte("0\r\n\r\n")

// write sends p as one HTTP chunk.
func (g *grpcCall) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if len(p) == len(lastChunk) && string(p) == string(lastChunk) {
		_, err := g.st.Write(p)
		return err
	}
	var hdr [20]byte
	h := strconv.AppendInt(hdr[:0], int64(len(p)), 16)
	h = append(h, '\r', '\n')
	g.scratch = append(append(append(g.scratch[:0], h...), p...), '\r', '\n')
	_, err := g.st.Write(g.scratch)
	return err
}

// writeBody writes an unstreamed answer whole.
func (g *grpcCall) writeBody(body []byte) error {
	h := g.head(200, "application/json", g.le.attempt.main.w)
	h = strconv.AppendInt(append(h, "Content-Length: "...), int64(len(body)), 10)
	h = append(append(h, "\r\n\r\n"...), body...)
	_, err := g.st.Write(h)
	return err
}

// head starts a response head with the gateway's headers.
func (g *grpcCall) head(status int, contentType string, w *worker.Worker) []byte {
	h := append(g.scratch[:0], "HTTP/1.1 "...)
	h = strconv.AppendInt(h, int64(status), 10)
	h = append(h, ' ')
	h = append(h, statusText(status)...)
	h = append(h, "\r\nContent-Type: "...)
	h = append(h, contentType...)
	h = append(h, "\r\n"...)
	if w != nil {
		h = append(append(append(h, headerRoutedWorker+": "...), w.URLBytes()...), "\r\n"...)
	}
	h = append(append(append(h, headerRequestID+": "...), g.le.reqID...), "\r\n"...)
	if !g.keepAlive {
		h = append(h, "Connection: close\r\n"...)
	}
	return h
}

// streamError ends a started stream the engine broke off: an SSE error event, then [DONE].
func (g *grpcCall) streamError(err error) {
	c := grpcworker.Classify(err)
	if c == grpcworker.Canceled {
		return // the client left
	}
	e := grpcError(c)
	g.le.failRecord(e, grpcworker.Message(err))
	g.out = openai.AppendStreamError(g.out[:0], grpcworker.Message(err), e.typ, e.code)
	if g.req.Stream && g.write(g.out) == nil {
		g.complete = g.write(lastChunk) == nil
	}
	g.status = e.status
}

// fail answers a gateway-made error before anything was written.
func (g *grpcCall) fail(e apiError, msg string) {
	g.status = e.status
	g.le.failRecord(e, msg)
	body := appendErrorBody(nil, e, msg)
	h := g.head(e.status, "application/json", nil)
	h = append(h, headerErrorCode+": "...)
	h = append(h, e.code...)
	h = strconv.AppendInt(append(h, "\r\nContent-Length: "...), int64(len(body)), 10)
	h = append(append(h, "\r\n\r\n"...), body...)
	g.started = true
	_, err := g.st.Write(h)
	g.complete = err == nil
}

func (g *grpcCall) failPick(err error) {
	e := errNoWorkers
	g.fail(e, "no available workers for this request: "+err.Error())
}

// grpcError maps an engine error class to the gateway's envelope.
func grpcError(c grpcworker.Class) apiError {
	switch c {
	case grpcworker.ClientError:
		return errInvalidRequest
	case grpcworker.Backpressure:
		return apiError{429, "rate_limit_error", "worker_overloaded"}
	case grpcworker.Timeout:
		return errUpstreamTimeout
	case grpcworker.Unavailable:
		return apiError{503, "service_unavailable", "worker_unavailable"}
	case grpcworker.Unsupported:
		return apiError{501, "invalid_request_error", "unsupported_by_worker"}
	case grpcworker.Canceled:
		return apiError{499, "invalid_request_error", "client_closed_request"}
	}
	return errUpstreamUnreachable
}

func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 400:
		return "Bad Request"
	case 404:
		return "Not Found"
	case 429:
		return "Too Many Requests"
	case 499:
		return "Client Closed Request"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	}
	return "Internal Server Error"
}

// maxTokensPastStop bounds what an engine may still generate once the detokenizer finished
// every choice: the engine stops on the same rules (it got the stop strings and ids) and
// reports its end, so it is not aborted for nothing; past this many tokens it is (Close).
const maxTokensPastStop = 16

// settleDone reads the engine's stream to its end once every choice has finished, keeping
// the engine's token counts; an engine that goes on generating is abandoned (and aborted).
func (g *grpcCall) settleDone(st grpcworker.Stream) {
	extra := 0
	for extra <= maxTokensPastStop {
		ch, err := st.Recv()
		if err != nil {
			return
		}
		extra += len(ch.TokenIDs)
		g.out = g.w.Feed(g.out[:0], ch) // counts only: every choice has finished
	}
}
