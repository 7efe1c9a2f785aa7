package mockworker

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fastjson"
)

// Worker is one mock engine listening on its own port. Its methods are safe for concurrent use.
type Worker struct {
	index  int
	id     string
	addr   string
	cfg    *Config // the fleet's, with defaults applied; read-only
	model  string  // cfg.Model escaped for embedding in JSON strings
	born   int64   // unix seconds, the "created" of /v1/models
	admin  atomic.Pointer[AdminConfig]
	seq    atomic.Uint64 // response ids
	active atomic.Int64  // generation requests received and not yet finished
	// served counts generation requests answered with a generation (not faults); for tests.
	served  atomic.Uint64
	parsers fastjson.ParserPool
	scratch sync.Pool // *[]byte prompt scratch for the parser
}

func newWorker(index int, addr string, cfg *Config, born int64) *Worker {
	w := &Worker{index: index, addr: addr, cfg: cfg, born: born}
	w.model = string(appendJSONEscaped(nil, cfg.Model))
	w.id = addr
	if cfg.WorkerIDPrefix != "" {
		w.id = cfg.WorkerIDPrefix + strconv.Itoa(index)
	}
	w.admin.Store(&AdminConfig{})
	return w
}

// ID is the worker's name, sent as x-mock-worker-id on every response.
func (w *Worker) ID() string { return w.id }

// Addr is the worker's listening "host:port".
func (w *Worker) Addr() string { return w.addr }

// URL is the worker's base URL, "http://host:port".
func (w *Worker) URL() string { return "http://" + w.addr }

// Served is the number of generation requests this worker has answered with a generation.
func (w *Worker) Served() uint64 { return w.served.Load() }

// Active is the number of generation requests in progress (delayed, hanging or streaming).
func (w *Worker) Active() int64 { return w.active.Load() }

// Config returns the worker's current runtime configuration.
func (w *Worker) Config() AdminConfig { return *w.admin.Load() }

// Configure replaces the worker's runtime configuration, as POST /admin/config does.
func (w *Worker) Configure(c AdminConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	w.admin.Store(&c)
	return nil
}

// exchange is one request as a transport hands it to the worker: views into the transport's
// buffers, valid only during Worker.handle.
type exchange struct {
	method    []byte
	path      []byte // without the query string
	body      []byte
	fault     []byte // x-mock-fault header value
	requestID []byte // x-request-id header value
}

// reply is what the transport must send. body aliases the scratch passed to handle.
type reply struct {
	status      int
	contentType string
	body        []byte
	// stream, when set, is an SSE answer: the transport writes stream.appendEvent(i) for every
	// token i, paced by Config.TokenInterval, after the headers.
	stream *answer
	// delay holds the first byte of the response this long.
	delay time.Duration
	// hang: send nothing until the client or the worker closes.
	hang bool
	// tracked: a generation request; the transport calls Worker.finish exactly once when the
	// response is complete or abandoned.
	tracked bool
}

const (
	contentJSON = "application/json"
	contentSSE  = "text/event-stream"
	contentText = "text/plain; charset=utf-8"
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
	case "/health", "/health_generate":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		if w.admin.Load().Unhealthy {
			return reply{status: 503, contentType: contentText, body: append(dst, "unhealthy\n"...)}
		}
		return reply{status: 200, contentType: contentText, body: dst}
	case "/v1/models":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		return reply{status: 200, contentType: contentJSON, body: w.appendModels(dst)}
	case "/v1/loads":
		if !isGet(ex.method) {
			return methodNotAllowed(dst)
		}
		return reply{status: 200, contentType: contentJSON, body: w.appendLoads(dst, time.Now())}
	case "/admin/config":
		return w.handleAdmin(ex, dst)
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
	return w.generate(ex, dst, kind)
}

func badRequest(dst []byte, err error) reply {
	return reply{status: 400, contentType: contentJSON,
		body: appendErrorBody(dst, 400, "invalid_request_error", err.Error())}
}

// generate answers a generation request: faults first, then the parsed request.
func (w *Worker) generate(ex *exchange, dst []byte, kind genKind) reply {
	f, err := parseFault(ex.fault)
	if err != nil {
		return badRequest(dst, err)
	}
	admin := w.admin.Load()
	w.active.Add(1)
	r := reply{delay: admin.Delay, tracked: true}
	if f.hang {
		r.hang = true
		return r
	}
	status := f.status
	if status == 0 {
		status = admin.Status
	}
	if status != 0 {
		r.status, r.contentType = status, contentJSON
		r.body = appendErrorBody(dst, status, "mock_fault", "mockworker injected status "+strconv.Itoa(status))
		return r
	}

	sp, _ := w.scratch.Get().(*[]byte)
	if sp == nil {
		sp = new([]byte)
	}
	p := w.parsers.Get()
	req, err := parseGenRequest(p, kind, ex.body, *sp)
	w.parsers.Put(p)
	*sp = req.prompt[:0]
	w.scratch.Put(sp)
	if err != nil {
		br := badRequest(dst, err)
		br.tracked = true
		return br
	}

	a := answer{
		kind:         kind,
		model:        w.model,
		created:      time.Now().Unix(),
		promptTokens: req.promptTokens,
		outputTokens: req.maxTokens,
		includeUsage: req.includeUsage,
	}
	if a.outputTokens == 0 {
		a.outputTokens = w.cfg.OutputTokens
	}
	w.served.Add(1)
	r.status = 200
	var idBuf [48]byte
	id := a.appendID(idBuf[:0], w, req.rid)
	if req.stream {
		// A stream outlives this call: it gets its own copy.
		s := &answer{
			kind:         kind,
			model:        w.model,
			id:           append([]byte(nil), id...),
			created:      a.created,
			promptTokens: a.promptTokens,
			outputTokens: a.outputTokens,
			includeUsage: a.includeUsage,
		}
		r.contentType, r.stream, r.body = contentSSE, s, dst
		return r
	}
	a.id = id
	r.contentType = contentJSON
	r.body = a.appendBody(dst)
	return r
}

// appendID writes the response id: the client's rid on /generate, else a per-worker sequence.
func (a *answer) appendID(dst []byte, w *Worker, rid string) []byte {
	if a.kind == kindGenerate && rid != "" {
		return appendJSONEscaped(dst, rid)
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
	return append(dst, `,"owned_by":"mockworker"}]}`...)
}

func (w *Worker) handleAdmin(ex *exchange, dst []byte) reply {
	switch string(ex.method) {
	case "GET", "HEAD":
	case "POST", "PUT":
		p := w.parsers.Get()
		c, err := parseAdminConfig(p, ex.body, *w.admin.Load())
		w.parsers.Put(p)
		if err != nil {
			return badRequest(dst, err)
		}
		w.admin.Store(&c)
	default:
		return methodNotAllowed(dst)
	}
	return reply{status: 200, contentType: contentJSON, body: appendAdminConfig(dst, *w.admin.Load())}
}

// Header names shared by the transports.
const (
	headerWorkerID  = "x-mock-worker-id"
	headerRequestID = "x-request-id"
)
