package mockworker

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
)

// Protocol selects the wire a fleet serves.
type Protocol string

const (
	// ProtocolHTTP serves the engines' HTTP APIs (the default).
	ProtocolHTTP Protocol = "http"
	// ProtocolGRPC serves the engines' own gRPC service: SGLang's
	// sglang.grpc.scheduler.SglangScheduler or vLLM's vllm.grpc.engine.VllmEngine (grpc.go).
	ProtocolGRPC Protocol = "grpc"
)

// maxSamples bounds n on gRPC: every sample is a sequence in the engine model.
const maxSamples = 64

// grpcServer serves every worker's gRPC service, one grpc.Server per worker, and beside it on
// the same port the HTTP routes that configure and observe a worker (grpc_admin.go).
type grpcServer struct {
	vocab     *vocab
	srvs      []*grpc.Server
	admins    []*http.Server
	splitters []*portSplitter
	wg        sync.WaitGroup
}

func newGRPCServer(v *vocab) *grpcServer { return &grpcServer{vocab: v} }

func (s *grpcServer) serve(ws []*Worker, lns []net.Listener) error {
	for i, w := range ws {
		w.rpc = &rpcState{vocab: s.vocab, runs: map[string]map[*rpcRun]struct{}{}, start: time.Now()}
		// Stop waits for the handlers too: Close promises that every call has ended.
		g := grpc.NewServer(grpc.WaitForHandlers(true))
		switch w.cfg.Dialect {
		case DialectVLLM:
			vllmpb.RegisterVllmEngineServer(g, &vllmService{w: w})
		default:
			sglangpb.RegisterSglangSchedulerServer(g, &sglangService{w: w})
		}
		sp := newPortSplitter(lns[i])
		hs := &http.Server{Handler: adminHandler(w), ReadHeaderTimeout: sniffTimeout}
		s.srvs, s.admins, s.splitters = append(s.srvs, g), append(s.admins, hs), append(s.splitters, sp)
		s.wg.Go(func() { _ = g.Serve(sp.grpc) })
		s.wg.Go(func() { _ = hs.Serve(sp.http1) })
	}
	return nil
}

// close cuts every stream (the fleet's done channel is already closed, so handlers return)
// and waits for the servers.
func (s *grpcServer) close() error {
	for i, g := range s.srvs {
		g.Stop()
		_ = s.admins[i].Close()
		s.splitters[i].close()
	}
	s.wg.Wait()
	return nil
}

// rpcState is one worker's gRPC bookkeeping: the runs Abort can find by request id.
type rpcState struct {
	vocab *vocab
	start time.Time
	mu    sync.Mutex
	runs  map[string]map[*rpcRun]struct{}
	ids   uint64 // request ids made up for requests that name none
}

// rpcRun is one Generate call while it runs: Abort closes aborted.
type rpcRun struct {
	aborted   chan struct{}
	abortOnce sync.Once
}

func (r *rpcRun) abort() { r.abortOnce.Do(func() { close(r.aborted) }) }

// newID makes up a request id for a request that names none.
func (st *rpcState) newID() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ids++
	return "mock-" + strconv.FormatUint(st.ids, 10)
}

func (st *rpcState) register(id string) *rpcRun {
	r := &rpcRun{aborted: make(chan struct{})}
	st.mu.Lock()
	m := st.runs[id]
	if m == nil {
		m = map[*rpcRun]struct{}{}
		st.runs[id] = m
	}
	m[r] = struct{}{}
	st.mu.Unlock()
	return r
}

func (st *rpcState) unregister(id string, r *rpcRun) {
	st.mu.Lock()
	if m := st.runs[id]; m != nil {
		delete(m, r)
		if len(m) == 0 {
			delete(st.runs, id)
		}
	}
	st.mu.Unlock()
}

// abort aborts every run of request id and reports how many there were.
func (st *rpcState) abort(id string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	for r := range st.runs[id] {
		r.abort()
	}
	return len(st.runs[id])
}

// rpcRequest is a Generate request in either dialect's terms.
type rpcRequest struct {
	id        string
	ids       []uint32 // the prompt's token ids
	maxTokens int      // 0: Config.OutputTokens
	ignoreEOS bool
	stopIDs   []uint32
	stops     []string
	n         int
	stream    bool
	// pd, on a prefill or decode worker, is the request's part in prefill-decode (grpc_pd.go).
	pd *pdState
}

// rpcSender turns a run's progress into one dialect's messages. Calls are serialised.
type rpcSender interface {
	// chunk sends one output id of sample index with the counts so far (completion included).
	chunk(index int, id uint32, prompt, completion, cached int) error
	// complete ends sample index: ids are its output ids when the request was not streamed.
	complete(index int, ids []uint32, p genPlan, finish string, prompt, completion, cached int) error
}

// generate runs one Generate call: faults first, then n samples through the engine model
// (or the instant null backend). It returns a gRPC status error or nil.
func (w *Worker) rpcGenerate(ctx context.Context, req *rpcRequest, out rpcSender) error {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(headerTraceparent); len(v) > 0 {
			w.trace.note([]byte(v[0]))
		}
	}
	f, err := rpcFault(ctx)
	if err != nil {
		return err
	}
	admin := w.admin.Load()
	if !f.abort && admin.AbortAfter > 0 {
		f.abort, f.abortAfter = true, admin.AbortAfter
	}
	w.active.Add(1)
	defer w.finish()
	if f.reset {
		return status.Error(codes.Unavailable, "mockworker injected reset")
	}
	if admin.Delay > 0 && !sleepUntilOr(w.done, ctx.Done(), time.Now().Add(admin.Delay)) {
		return w.gone(ctx)
	}
	if f.hang {
		select {
		case <-ctx.Done():
		case <-w.done:
		}
		return w.gone(ctx)
	}
	if code := w.injectedStatus(f, admin); code != 0 {
		return status.Error(grpcCode(code), "mockworker injected status "+strconv.Itoa(code))
	}
	if req.n > maxSamples {
		return status.Errorf(codes.InvalidArgument, "n %d: the mock runs at most %d samples", req.n, maxSamples)
	}
	maxTokens := cmp.Or(req.maxTokens, w.cfg.OutputTokens)
	if maxTokens > maxTokensLimit {
		return status.Errorf(codes.InvalidArgument, "max tokens %d: the mock generates at most %d", maxTokens, maxTokensLimit)
	}
	if req.pd != nil && !req.pd.decode {
		maxTokens = 1 // a prefill computes the prompt and answers its first token
	}
	st := w.rpc
	plan := st.vocab.plan(maxTokens, req.ignoreEOS, req.stopIDs, req.stops)
	var hashes []uint64
	var tokens []uint32
	if w.engine != nil {
		hashes = promptBlockHashes(nil, nil, req.ids, w.cfg.BlockSize)
		if w.kvpub != nil {
			tokens = promptBlockTokens(nil, req.ids, w.cfg.BlockSize)
		}
		if !w.engine.fits(&seq{promptTokens: max(len(req.ids), 1), maxTokens: plan.length}) {
			return status.Errorf(codes.InvalidArgument, "%v (%d + %d tokens, capacity %d)", errTooLong, len(req.ids), plan.length, w.cfg.KVTokens)
		}
	}
	id := req.id
	if id == "" {
		id = st.newID()
	}
	run := st.register(id)
	defer st.unregister(id, run)
	if req.pd != nil {
		if out, err = w.startPD(ctx, req, out); err != nil {
			return err
		}
	}
	w.served.Add(1)
	if f.slowTTFT > 0 && !sleepUntilOr(w.done, ctx.Done(), time.Now().Add(f.slowTTFT)) {
		return w.gone(ctx)
	}
	s := sample{w: w, req: req, plan: plan, hashes: hashes, tokens: tokens, call: run, f: f}
	return s.runAll(ctx, max(req.n, 1), out)
}

// runAll runs n samples of s. Samples run side by side in the engine (the later ones find
// the prompt cached) and share the stream; the first failure ends the call.
func (s *sample) runAll(ctx context.Context, n int, out rpcSender) error {
	if n == 1 {
		return s.run(ctx, 0, out)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	locked := &lockedSender{out: out}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			err := s.run(ctx, i, locked)
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// rpcFault is the fault the call's metadata asks for (faultHeader), as the HTTP header would.
func rpcFault(ctx context.Context) (fault, error) {
	var raw []byte
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(faultHeader); len(v) > 0 {
			raw = []byte(v[0])
		}
	}
	f, err := parseFault(raw)
	if err != nil {
		return f, status.Error(codes.InvalidArgument, err.Error())
	}
	if f.bodySHA256 {
		return f, status.Error(codes.InvalidArgument, faultHeader+": body-sha256 is an HTTP fault; gRPC requests have no body to hash")
	}
	return f, nil
}

// gone is the status of a call cut short while it waited: the client's cancellation or
// deadline, else the fleet closing.
func (w *Worker) gone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, errClosed.Error())
}

type lockedSender struct {
	mu  sync.Mutex
	out rpcSender
}

func (l *lockedSender) chunk(index int, id uint32, prompt, completion, cached int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.chunk(index, id, prompt, completion, cached)
}

func (l *lockedSender) complete(index int, ids []uint32, p genPlan, finish string, prompt, completion, cached int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.complete(index, ids, p, finish, prompt, completion, cached)
}

// sample is what the samples of one call share; run produces one of them.
type sample struct {
	w      *Worker
	req    *rpcRequest
	plan   genPlan
	hashes []uint64
	tokens []uint32
	call   *rpcRun
	f      fault
}

func (s *sample) run(ctx context.Context, index int, out rpcSender) error {
	w, v := s.w, s.w.rpc.vocab
	prompt := len(s.req.ids)
	var src progress
	if w.engine != nil {
		sq := &seq{hashes: s.hashes, tokens: s.tokens, promptTokens: max(prompt, 1), maxTokens: s.plan.length, sink: newTokenSink(),
			remote: s.req.pd != nil && s.req.pd.decode}
		if err := w.engine.submit(sq); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		// cancel is a no-op for a finished sequence; it frees an aborted one's KV at once.
		defer w.engine.cancel(sq)
		src = sinkProgress{sq.sink}
	} else {
		src = newPacedProgress(w, s.plan.length)
	}
	var ids []uint32
	if !s.req.stream {
		ids = make([]uint32, 0, s.plan.length)
	}
	sent, cached := 0, 0
	cut := s.f.abort && s.f.abortAfter < s.plan.length
	for {
		gen, c, fin := src.read()
		cached = c
		if cut {
			gen = min(gen, s.f.abortAfter)
		}
		for ; sent < gen; sent++ {
			id := v.id(sent, s.req.ignoreEOS)
			if ids != nil {
				ids = append(ids, id)
				continue
			}
			if err := out.chunk(index, id, prompt, sent+1, cached); err != nil {
				return err
			}
		}
		if cut && sent >= s.f.abortAfter {
			return status.Errorf(codes.Internal, "mockworker injected abort after %d tokens", s.f.abortAfter)
		}
		if fin && sent == s.plan.length {
			return out.complete(index, ids, s.plan, s.plan.finish, prompt, sent, cached)
		}
		select {
		case <-src.wake():
		case <-src.tick():
		case <-ctx.Done():
			return w.gone(ctx)
		case <-w.done:
			return w.gone(ctx)
		case <-s.call.aborted:
			return out.complete(index, ids, genPlan{}, "abort", prompt, sent, cached)
		}
	}
}

// progress is where a sample's tokens come from: the engine model's sink or the instant
// pacer. After read, one of wake and tick fires when there may be more (the other is nil).
type progress interface {
	read() (generated, cached int, finished bool)
	wake() <-chan struct{}
	tick() <-chan time.Time
}

type sinkProgress struct{ k *tokenSink }

func (p sinkProgress) read() (int, int, bool)   { return p.k.read() }
func (p sinkProgress) wake() <-chan struct{}    { return p.k.wake }
func (p sinkProgress) tick() <-chan time.Time   { return nil }
func (p *pacedProgress) wake() <-chan struct{}  { return nil }
func (p *pacedProgress) tick() <-chan time.Time { return p.timer }

// pacedProgress is instant mode: every token at once, or token i (from 1) at
// start + i×TokenInterval×DecodeMultiplier.
type pacedProgress struct {
	start    time.Time
	interval time.Duration
	length   int
	t        *time.Timer
	timer    <-chan time.Time
}

func newPacedProgress(w *Worker, length int) *pacedProgress {
	interval := time.Duration(float64(w.cfg.TokenInterval) * w.admin.Load().decodeMultiplier())
	return &pacedProgress{start: time.Now(), interval: interval, length: length}
}

func (p *pacedProgress) read() (int, int, bool) {
	if p.interval <= 0 {
		return p.length, 0, true
	}
	gen := min(int(time.Since(p.start)/p.interval), p.length)
	if gen < p.length {
		next := p.start.Add(time.Duration(gen+1) * p.interval)
		if p.t == nil {
			p.t = time.NewTimer(time.Until(next))
			p.timer = p.t.C
		} else {
			p.t.Reset(time.Until(next))
		}
	}
	return gen, 0, gen == p.length
}

// grpcCode maps an injected HTTP status onto the gRPC code an engine would return for it.
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case 400:
		return codes.InvalidArgument
	case 401:
		return codes.Unauthenticated
	case 403:
		return codes.PermissionDenied
	case 404:
		return codes.NotFound
	case 408, 504:
		return codes.DeadlineExceeded
	case 409:
		return codes.Aborted
	case 429:
		return codes.ResourceExhausted
	case 499:
		return codes.Canceled
	case 501:
		return codes.Unimplemented
	case 502, 503:
		return codes.Unavailable
	}
	if httpStatus < 500 {
		return codes.FailedPrecondition
	}
	return codes.Internal
}

// healthyNow reports the admin health state now, as /health does.
func (w *Worker) healthyNow() bool {
	st := w.admin.Load()
	return !st.Unhealthy && (st.HealthFlap <= 0 || st.healthy(time.Now()))
}
