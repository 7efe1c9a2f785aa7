package mockworker

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fastjson"

	"github.com/smg-go/smg/internal/jsonx"
)

// Worker is one mock engine listening on its own port. Its methods are safe for concurrent use.
type Worker struct {
	index int
	id    string
	addr  string
	cfg   *Config // the fleet's, with defaults applied; read-only
	// prompts tokenizes HTTP prompts as the engine's front end does (Config.TokenizerPath with
	// protocol http); nil: text is cut into bytesPerToken-byte pieces.
	prompts *modelPrompts
	model   string // cfg.Model escaped for embedding in JSON strings
	born    int64  // unix seconds, the "created" of /v1/models
	admin   atomic.Pointer[adminState]
	seq     atomic.Uint64 // response ids
	draws   atomic.Uint64 // generation requests, numbering the FailureRate draws
	active  atomic.Int64  // generation requests received and not yet finished
	// served counts generation requests answered with a generation (not faults); for tests.
	served  atomic.Uint64
	engine  *engineDriver // nil in instant mode
	metrics *workerMetrics
	// PD roles (pd.go); unused by a unified worker.
	host       string    // the listening host (addr without the port)
	pdf        *pdShared // the fleet's rendezvous or KV client
	kvEngineID string    // the vLLM engine id a prefill reports
	pdCount    [pdResults]atomic.Uint64
	pdLog      pdLog
	// done is the fleet's: closed by Close, it cuts every wait short.
	done <-chan struct{}
	// rpc is the gRPC front end's state (grpc.go); nil on HTTP.
	rpc *rpcState
	// kvpub publishes the engine's KV-cache events (Config.KVEvents); nil without.
	kvpub *kvPublisher
	// trace is the traceparent of the last generation request (GET /admin/trace).
	trace   lastTrace
	parsers fastjson.ParserPool
	scratch sync.Pool // *parseScratch
}

// parseScratch holds the prompt text and token ids of one request while it is parsed.
type parseScratch struct {
	text []byte
	ids  []uint32
}

func newWorker(index int, addr string, cfg *Config, born int64) *Worker {
	w := &Worker{index: index, addr: addr, cfg: cfg, born: born}
	w.model = string(jsonx.AppendEscaped(nil, cfg.Model))
	w.id = addr
	if cfg.WorkerIDPrefix != "" {
		w.id = cfg.WorkerIDPrefix + strconv.Itoa(index)
	}
	w.host, _, _ = net.SplitHostPort(addr)
	w.kvEngineID = w.id
	if cfg.KVEngineID != "" {
		w.kvEngineID = cfg.KVEngineID
		if cfg.Count > 1 {
			w.kvEngineID += "-" + strconv.Itoa(index)
		}
	}
	w.admin.Store(&adminState{since: time.Now()})
	w.metrics = newWorkerMetrics(w)
	return w
}

// engineParams derives worker index's engine model parameters from the configuration: the
// fleet's, with the worker's DecodeFactors entry applied to the decode times.
func (c *Config) engineParams(index int) engineParams {
	decode := 1.0
	if f, ok := c.DecodeFactors[index]; ok {
		decode = f
	}
	return engineParams{
		maxRunning:   c.MaxRunning,
		kvTokens:     c.KVTokens,
		blockSize:    c.BlockSize,
		prefillTPS:   c.PrefillTPS,
		prefillChunk: c.PrefillChunk,
		decodeBase:   time.Duration(float64(c.DecodeBase) * decode),
		decodePerReq: time.Duration(float64(c.DecodePerReq) * decode),
	}
}

// ID is the worker's name, sent as x-mock-worker-id on every response.
func (w *Worker) ID() string { return w.id }

// Addr is the worker's listening "host:port".
func (w *Worker) Addr() string { return w.addr }

// URL is the worker's base URL, "http://host:port" ("https://" over TLS, "grpc://" for
// Protocol "grpc").
func (w *Worker) URL() string {
	if w.cfg.Protocol == ProtocolGRPC {
		return "grpc://" + w.addr
	}
	if w.cfg.TLSCert != "" {
		return "https://" + w.addr
	}
	return "http://" + w.addr
}

// Served is the number of generation requests this worker has answered with a generation.
func (w *Worker) Served() uint64 { return w.served.Load() }

// Active is the number of generation requests in progress: delayed, hanging, streaming, or
// in the engine model (queued or running).
func (w *Worker) Active() int64 { return w.active.Load() }

// Config returns the worker's current runtime configuration.
func (w *Worker) Config() AdminConfig { return w.admin.Load().AdminConfig }

// Configure replaces the worker's runtime configuration, as POST /admin/config does.
func (w *Worker) Configure(c AdminConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	w.storeAdmin(c)
	return nil
}

// storeAdmin applies c: the one-shot KV-event faults go to the publisher and are not kept.
func (w *Worker) storeAdmin(c AdminConfig) {
	if w.kvpub != nil && (c.KVEventsDrop > 0 || c.KVEventsRestart) {
		w.kvpub.fault(c.KVEventsDrop, c.KVEventsRestart)
	}
	if w.engine != nil && c.LosePrefixCache {
		w.engine.loseCache()
	}
	c.KVEventsDrop, c.KVEventsRestart, c.LosePrefixCache = 0, false, false
	w.admin.Store(&adminState{AdminConfig: c, since: time.Now()})
}

// KVEventsEndpoint is the worker's KV-event PUB socket, "tcp://host:port" ("" without
// Config.KVEvents).
func (w *Worker) KVEventsEndpoint() string {
	if w.kvpub == nil {
		return ""
	}
	return "tcp://" + w.kvpub.pubAddr
}

// KVEventsReplayEndpoint is the worker's replay ROUTER socket, "tcp://host:port".
func (w *Worker) KVEventsReplayEndpoint() string {
	if w.kvpub == nil {
		return ""
	}
	return "tcp://" + w.kvpub.replayAdr
}

// load is the worker's current load report (see loads.go).
func (w *Worker) load() loadReport {
	var l loadReport
	if w.engine != nil {
		l = w.engine.load()
	} else {
		l = loadReport{running: int(w.active.Load()), maxTotalTokens: w.cfg.KVTokens, maxRunning: w.cfg.MaxRunning}
	}
	if u := w.admin.Load().KVUsage; u > 0 {
		l.usedTokens = int(u * float64(l.maxTotalTokens))
	}
	return l
}

// cacheCounters is the prefix cache's cumulative hits and queries, in tokens (engine mode).
func (w *Worker) cacheCounters() (hits, queries uint64) {
	if w.engine != nil {
		return w.engine.counters()
	}
	return 0, 0
}

// exchange is one request as a transport hands it to the worker: views into the transport's
// buffers, valid only during Worker.handle.
type exchange struct {
	method    []byte
	path      []byte // without the query string
	body      []byte
	fault     []byte // x-mock-fault header value
	requestID []byte // x-request-id header value
	trace     []byte // traceparent header value
}

// reply is what the transport must send.
type reply struct {
	status      int
	contentType string
	// body is a complete answer, ready now; it aliases the scratch passed to handle.
	body []byte
	// answer, when set, is a generation the transport renders as it progresses: a stream
	// (stream set) or, in engine mode, a non-streamed answer rendered once complete.
	answer *answer
	stream bool
	// seq, in engine mode, is the sequence to submit to the engine when the answer starts.
	seq *seq
	// delay holds the first byte of the response this long.
	delay time.Duration
	// fault is the request's x-mock-fault (reset, hang, abort, slowTTFT are the transport's).
	fault fault
	// tracked: a generation request; the transport calls Worker.finish exactly once when the
	// response is complete or abandoned.
	tracked bool
	// pd, on a PD worker: a decode's KV to fetch before the answer starts (resolvePD), or an
	// engine-mode prefill's KV to publish at its first token (publishingSource).
	pd *pdState
}

// tokenLimit is how many of the answer's tokens are sent: all of them, or, when an abort-after
// fault cuts the answer (cut), the fault's count.
func (r *reply) tokenLimit() (limit int, cut bool) {
	if r.fault.abort && r.fault.abortAfter < r.answer.outputTokens {
		return r.fault.abortAfter, true
	}
	return r.answer.outputTokens, false
}

// waits reports whether the answer cannot be written at once.
func (r *reply) waits(tokenInterval time.Duration) bool {
	return r.delay > 0 || r.fault.hang || r.fault.slowTTFT > 0 || r.seq != nil ||
		(r.stream && tokenInterval > 0) || r.pd != nil
}

const (
	contentJSON    = "application/json"
	contentSSE     = "text/event-stream"
	contentText    = "text/plain; charset=utf-8"
	contentMetrics = "text/plain; version=0.0.4; charset=utf-8"
)

// handle routes one request. Routes are matched with a switch over the path bytes (the Go
// compiler does not allocate for string(b) in a switch).
func (w *Worker) handle(ex *exchange, dst []byte) reply {
	switch string(ex.path) {
	case "/v1/chat/completions":
		return w.onlyPost(ex, dst, kindChat)
	case "/v1/completions":
		return w.onlyPost(ex, dst, kindCompletion)
	case "/generate":
		return w.onlyPost(ex, dst, kindGenerate)
	case "/health_generate":
		if w.cfg.Dialect != DialectSGLang {
			break // vLLM has no such route
		}
		fallthrough
	case "/health":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		if st := w.admin.Load(); st.Unhealthy || (st.HealthFlap > 0 && !st.healthy(time.Now())) {
			return reply{status: 503, contentType: contentText, body: append(dst, "unhealthy\n"...)}
		}
		return reply{status: 200, contentType: contentText, body: dst}
	case "/v1/models":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		return reply{status: 200, contentType: contentJSON, body: w.appendModels(dst)}
	case "/model_info", "/get_model_info":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		return reply{status: 200, contentType: contentJSON, body: w.appendModelInfo(dst)}
	case "/v1/loads":
		if w.cfg.Dialect != DialectSGLang {
			break // vLLM has no such route
		}
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		return reply{status: 200, contentType: contentJSON, body: w.appendLoads(dst, time.Now())}
	case "/metrics":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		b := bytes.NewBuffer(dst)
		w.metrics.write(b)
		return reply{status: 200, contentType: contentMetrics, body: b.Bytes()}
	case "/admin/config":
		return w.handleAdmin(ex, dst)
	case "/admin/trace":
		return w.handleTrace(ex, dst)
	case "/get_server_info":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		return reply{status: 200, contentType: contentJSON, body: w.appendServerInfo(dst)}
	case "/flush_cache":
		if string(ex.method) != "POST" {
			return methodNotAllowed(dst)
		}
		// Engine mode empties the prefix cache, as SGLang does, and refuses while requests run.
		if w.engine != nil && !w.engine.flush() {
			return reply{status: 400, contentType: contentText, body: append(dst, "Cache not flushed: requests are running.\n"...)}
		}
		return reply{status: 200, contentType: contentText, body: append(dst, "Cache flushed.\n"...)}
	}
	if kind, ok := passthroughRoute(ex.path); ok {
		return w.passthrough(ex, dst, kind)
	}
	return reply{status: 404, contentType: contentJSON,
		body: appendErrorBody(dst, 404, "not_found_error", "no route "+string(ex.path)+" (mockworker)")}
}

func isGet(m []byte) bool { return string(m) == "GET" || string(m) == "HEAD" }

func methodNotAllowed(dst []byte) reply {
	return reply{status: 405, contentType: contentJSON,
		body: appendErrorBody(dst, 405, "invalid_request_error", "method not allowed")}
}

func (w *Worker) onlyPost(ex *exchange, dst []byte, kind genKind) reply {
	if string(ex.method) != "POST" {
		return methodNotAllowed(dst)
	}
	w.trace.note(ex.trace)
	return w.generate(ex, dst, kind)
}

func badRequest(dst []byte, err error) reply {
	return reply{status: 400, contentType: contentJSON,
		body: appendErrorBody(dst, 400, "invalid_request_error", err.Error())}
}

// trackedBadRequest is badRequest for a request already counted active: its reply is
// tracked, so that finishing it counts it out.
func trackedBadRequest(dst []byte, err error) reply {
	r := badRequest(dst, err)
	r.tracked = true
	return r
}

// generate answers a generation request: faults first, then the parsed request.
func (w *Worker) generate(ex *exchange, dst []byte, kind genKind) reply {
	f, err := parseFault(ex.fault)
	if err != nil {
		return badRequest(dst, err)
	}
	admin := w.admin.Load()
	w.active.Add(1)
	r := reply{delay: admin.Delay, tracked: true, fault: f}
	if f.reset || f.hang {
		return r
	}
	if injected, ok := w.injectedAnswer(ex, dst, f, admin, r); ok {
		return injected
	}
	// The request's prompt and ids live in sp until the answer is rendered.
	sp, _ := w.scratch.Get().(*parseScratch)
	if sp == nil {
		sp = new(parseScratch)
	}
	defer w.scratch.Put(sp)
	req, pd, err := w.parseGeneration(sp, kind, ex.body)
	if err == nil && w.prompts != nil && len(req.prompt) > 0 {
		if req.ids, err = w.prompts.ids(req.ids, kind, ex.body, req.prompt); err == nil {
			req.prompt, req.promptTokens, sp.ids = req.prompt[:0], len(req.ids), req.ids[:0]
		}
	}
	if err != nil {
		if w.cfg.Role != RoleUnified {
			w.countPD(pdRejected)
		}
		return trackedBadRequest(dst, err)
	}

	a := answer{
		kind:         kind,
		model:        w.model,
		created:      time.Now().Unix(),
		promptTokens: req.promptTokens,
		outputTokens: cmp.Or(req.maxTokens, w.cfg.OutputTokens),
		includeUsage: req.includeUsage,
	}
	var kvParams []byte // kept apart from a: a.id may point at the stack
	if pd != nil {
		// A prefill answers one token, whatever the maximum: the decode generates the rest.
		if !pd.decode {
			a.outputTokens = 1
		}
		kv, ok := w.preparePD(pd, &r, dst)
		if !ok {
			w.countPD(pdRejected)
			r.tracked = true
			return r
		}
		a.kvParams, kvParams = kv, kv
	}
	var idBuf [48]byte
	id := a.appendID(idBuf[:0], w, req.rid)
	if w.engine != nil {
		if r.seq = w.engineSeq(&req, a.outputTokens); r.seq == nil {
			return trackedBadRequest(dst, errTooLong)
		}
	}
	w.served.Add(1)
	r.status = 200
	// An answer that is streamed, computed by the engine, slow to start or cut is rendered by
	// the transport as its tokens come.
	if req.stream || r.seq != nil || r.pd != nil || f.slowTTFT > 0 || (f.abort && f.abortAfter < a.outputTokens) {
		r.answer = a.detached(w.model, id, kvParams)
		r.stream, r.body = req.stream, dst
		r.contentType = contentJSON
		if req.stream {
			r.contentType = contentSSE
		}
		return r
	}
	a.id = id
	r.contentType = contentJSON
	r.body = a.appendBody(dst)
	return r
}

// detached is a copy of a whose rendering outlives the call that made a (a streamed answer).
// Only a's scalars are read: its model, id and kvParams are passed in, because a.id may point
// at the caller's stack, and reading any of a's references here would move that to the heap.
func (a *answer) detached(model string, id, kvParams []byte) *answer {
	return &answer{
		kind:         a.kind,
		model:        model,
		id:           append([]byte(nil), id...),
		created:      a.created,
		promptTokens: a.promptTokens,
		outputTokens: a.outputTokens,
		includeUsage: a.includeUsage,
		kvParams:     kvParams,
	}
}

// injectedStatus is the error status a request gets instead of an answer: its fault's, else
// the admin status, else a FailureRate draw's; 0 when it is served.
func (w *Worker) injectedStatus(f fault, admin *adminState) int {
	status := cmp.Or(f.status, admin.Status)
	if status == 0 && admin.FailureRate > 0 && w.draw() < admin.FailureRate {
		status = admin.failureStatus()
	}
	return status
}

// injectedAnswer is the answer a fault or the admin settings impose instead of a generation:
// an error status (the request's fault, the admin status, or a FailureRate draw), or the
// digest of the body it received. ok is false when the request is served normally.
func (w *Worker) injectedAnswer(ex *exchange, dst []byte, f fault, admin *adminState, r reply) (_ reply, ok bool) {
	if status := w.injectedStatus(f, admin); status != 0 {
		r.status, r.contentType = status, contentJSON
		r.body = appendErrorBody(dst, status, "mock_fault", "mockworker injected status "+strconv.Itoa(status))
		return r, true
	}
	if f.bodySHA256 {
		sum := sha256.Sum256(ex.body)
		r.status, r.contentType = 200, contentJSON
		r.body = append(append(append(dst, `{"body_sha256":"`...), hex.EncodeToString(sum[:])...), `","body_bytes":`...)
		r.body = append(strconv.AppendInt(r.body, int64(len(ex.body)), 10), '}')
		return r, true
	}
	return r, false
}

// parseGeneration parses a generation request of kind into sp's buffers, with its
// prefill-decode part on a PD worker.
func (w *Worker) parseGeneration(sp *parseScratch, kind genKind, body []byte) (req genRequest, pd *pdState, err error) {
	p := w.parsers.Get()
	if w.cfg.Role == RoleUnified {
		req, err = parseGenRequest(p, kind, body, sp.text, sp.ids)
	} else {
		req, pd, err = w.parsePD(p, kind, body, sp.text, sp.ids)
	}
	w.parsers.Put(p)
	sp.text, sp.ids = req.prompt[:0], req.ids[:0]
	return req, pd, err
}

// engineSeq is req's sequence for the engine, generating maxTokens; nil when it cannot fit
// the engine's KV cache.
func (w *Worker) engineSeq(req *genRequest, maxTokens int) *seq {
	s := &seq{
		hashes:       promptBlockHashes(nil, req.prompt, req.ids, w.cfg.BlockSize),
		promptTokens: max(req.promptTokens, 1),
		maxTokens:    maxTokens,
		sink:         newTokenSink(),
	}
	if w.kvpub != nil {
		s.tokens = promptBlockTokens(req.prompt, req.ids, w.cfg.BlockSize)
	}
	if !w.engine.fits(s) {
		return nil
	}
	return s
}

// draw returns this request's number in [0, 1) for FailureRate: a SplitMix64 hash of the
// seed, the worker and the request's sequence number, repeatable across runs.
func (w *Worker) draw() float64 {
	x := w.cfg.Seed ^ uint64(w.index)<<48 ^ w.draws.Add(1)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / math.Exp2(53)
}

// appendID writes the response id: the client's rid on /generate, else a per-worker sequence.
func (a *answer) appendID(dst []byte, w *Worker, rid string) []byte {
	if a.kind == kindGenerate && rid != "" {
		return jsonx.AppendEscaped(dst, rid)
	}
	switch a.kind {
	case kindChat:
		dst = append(dst, "chatcmpl-mock-"...)
	case kindCompletion:
		dst = append(dst, "cmpl-mock-"...)
	default:
		dst = append(dst, "gen-mock-"...)
	}
	dst = strconv.AppendInt(dst, int64(w.index), 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, w.seq.Add(1), 10)
}

// finish ends a tracked generation request; transports call it exactly once per tracked reply.
func (w *Worker) finish() { w.active.Add(-1) }

func (w *Worker) appendModels(dst []byte) []byte {
	dst = append(dst, `{"object":"list","data":[{"id":"`...)
	dst = append(dst, w.model...)
	dst = append(dst, `","object":"model","created":`...)
	dst = strconv.AppendInt(dst, w.born, 10)
	dst = append(dst, `,"owned_by":"mockworker","max_model_len":`...)
	dst = strconv.AppendInt(dst, int64(w.cfg.KVTokens), 10)
	return append(dst, `}]}`...)
}

// appendModelInfo writes SGLang's /model_info (formerly /get_model_info).
func (w *Worker) appendModelInfo(dst []byte) []byte {
	dst = append(dst, `{"model_path":"`...)
	dst = append(dst, w.model...)
	dst = append(dst, `","tokenizer_path":"`...)
	dst = append(dst, w.model...)
	return append(dst, `","is_generation":true,"preferred_sampling_params":null,"weight_version":"default","has_image_understanding":false,"has_audio_understanding":false,"model_type":"mock","architectures":["MockForCausalLM"]}`...)
}

func (w *Worker) handleAdmin(ex *exchange, dst []byte) reply {
	switch string(ex.method) {
	case "GET", "HEAD":
	case "POST", "PUT":
		p := w.parsers.Get()
		c, err := parseAdminConfig(p, ex.body, w.admin.Load().AdminConfig)
		w.parsers.Put(p)
		if err != nil {
			return badRequest(dst, err)
		}
		if (c.KVEventsDrop > 0 || c.KVEventsRestart) && w.kvpub == nil {
			return badRequest(dst, errors.New("kv_events_drop and kv_events_restart need a worker that publishes KV events (--kv-events-port)"))
		}
		if c.LosePrefixCache && w.engine == nil {
			return badRequest(dst, errors.New("lose_prefix_cache needs an engine-mode worker (--mode engine)"))
		}
		w.storeAdmin(c)
	default:
		return methodNotAllowed(dst)
	}
	return reply{status: 200, contentType: contentJSON, body: appendAdminConfig(dst, w.admin.Load().AdminConfig)}
}

// Header names shared by the transports.
const (
	headerWorkerID  = "x-mock-worker-id"
	headerRequestID = "x-request-id"
)
