package fastpath

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/fastpath/extract"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/traceparent"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Server is the gateway's HTTP front end: the event loops (fastpath/evloop) serve every
// client connection; the generation and pass-through routes run on them, every other route
// is bridged to the fasthttp handler (serveBridged) on a goroutine.
type Server struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock // cfg.Clock
	// origin is the time of the clock's Nanos 0 (clock.OriginOf).
	origin time.Time
	reg    *worker.Registry
	router *policy.Router
	loops  *evloop.Server // set by Serve, then loopsReady is closed
	// resolveUpstream maps worker addresses for the event loops (tests); nil: none.
	resolveUpstream func(string) string
	loopsReady      chan struct{} // closed once Serve has built s.loops
	m               *httpMetrics
	adm             *admission
	bodies          bodyBudget
	answers         bodyBudget                  // workers' answers read whole (body.go)
	hopID           []byte                      // this gateway's id in X-SMG-Hop (loops.go)
	listen          atomic.Pointer[net.TCPAddr] // the address Serve listens on
	draining        atomic.Bool
	started         time.Time

	meshStatus atomic.Pointer[func() []byte]
	// adminCursor rotates the worker single-worker admin routes ask first.
	adminCursor atomic.Uint64
	// logDecisions is set when the logger takes debug records: every routing decision is then
	// logged (spec: Observability). Decided once, so the hot path tests one bool.
	logDecisions bool
	// traceRatio samples the new traces of generation requests (Config.Trace).
	traceRatio traceparent.Ratio

	// DiscoverModels asks a new worker which models it serves when its spec names none.
	// Replaceable in tests. Default worker.DiscoverModels.
	DiscoverModels func(ctx context.Context, url, apiKey string) ([]string, error)
}

// New returns a Server that routes with router over the workers of reg.
func New(cfg Config, reg *worker.Registry, router *policy.Router) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if g := cfg.GRPC; g != nil {
		g.sem = make(chan struct{}, g.Tokenizers)
	}
	s := &Server{
		cfg:            cfg,
		log:            cfg.Logger,
		clock:          cfg.Clock,
		origin:         clock.OriginOf(cfg.Clock),
		reg:            reg,
		router:         router,
		m:              newHTTPMetrics(cfg.Metrics),
		adm:            newAdmission(cfg.Admission, cfg.Clock),
		started:        time.Now(),
		bodies:         bodyBudget{limit: int64(cfg.MaxBodyMemory)},
		answers:        bodyBudget{limit: int64(cfg.MaxAnswerMemory)},
		hopID:          newHopID(),
		logDecisions:   cfg.Logger.Enabled(context.Background(), slog.LevelDebug),
		traceRatio:     traceparent.NewRatio(cfg.Trace.SampleRatio),
		DiscoverModels: worker.DiscoverModels,
		loopsReady:     make(chan struct{}),
	}
	return s, nil
}

// nanosOf is t, a time of the server's clock, as its Nanos reading.
func (s *Server) nanosOf(t time.Time) int64 { return int64(t.Sub(s.origin)) }

// Addr is the configured listen address.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
}

// Serve serves connections from ln, a TCP listener, on the event loops until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.listen.Store(a)
	}
	loops, err := s.startLoops()
	if err != nil {
		return err
	}
	s.loops = loops
	close(s.loopsReady)
	return loops.Serve(ln)
}

// Drain makes readiness answer 503 "draining" so load balancers stop sending; requests keep
// being served until Shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// Shutdown stops accepting connections and waits, until ctx ends, for requests in progress,
// streams included, to finish.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	select {
	case <-s.loopsReady:
		return s.loops.Shutdown(ctx)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveBridged is the fasthttp handler of the requests the event loops bridge
// (loopPlane.bridge): the worker API, the probes, /v1/models, the admin routes, and any
// method but POST on a generation or pass-through route. It routes by path with one switch.
//
// It routes on the path as the client sent it (routePath): no percent-decoding, no
// dot-segment resolution, no merged slashes, as the event loops route generation requests and
// as Envoy routes by default (normalize_path off, escaped slashes kept). fasthttp's ctx.Path()
// decodes %2F before resolving "..", so "/v1/x%2f..%2f..%2fworkers" was the worker API: a
// front proxy that allowed only /v1/ was bypassed. Now a path the gateway serves is byte for
// byte the path any front proxy matched.
func (s *Server) serveBridged(ctx *fasthttp.RequestCtx) {
	defer s.recoverPanic(ctx)
	path := routePath(ctx)
	if route, _, ok := generationRoute(path); ok { // the loops serve their POSTs
		s.methodNotAllowed(ctx, route, "POST")
		return
	}
	switch string(path) {
	case "/v1/models":
		s.serveModels(ctx)
	case "/health", "/liveness":
		s.serveLiveness(ctx)
	case "/readiness":
		s.serveReadiness(ctx)
	case "/workers":
		s.serveWorkers(ctx)
	case "/mesh/status":
		s.serveMeshStatus(ctx)
	case "/get_loads":
		s.serveAdmin(ctx, fasthttp.MethodGet, true, (*Server).serveGetLoads)
	case "/flush_cache":
		s.serveAdmin(ctx, fasthttp.MethodPost, true, (*Server).serveFlushCache)
	case "/get_model_info", "/get_server_info":
		s.serveAdmin(ctx, fasthttp.MethodGet, false, (*Server).serveFromOneWorker)
	case "/health_generate":
		s.serveAdmin(ctx, fasthttp.MethodGet, false, (*Server).serveHealthGenerate)
	case "/engine_metrics":
		s.serveAdmin(ctx, fasthttp.MethodGet, false, (*Server).serveEngineMetrics)
	default:
		if id, ok := workerIDFromPath(path); ok {
			s.serveWorker(ctx, id)
			return
		}
		writeError(ctx, errNotFound, "no route for "+string(ctx.Method())+" "+string(path))
		s.observe(routeOther, ctx.Response.StatusCode(), s.bridgedStart(ctx))
	}
}

// routePath is the request's path as sent, without the query: what serveBridged routes on.
func routePath(ctx *fasthttp.RequestCtx) []byte {
	if p := ctx.URI().PathOriginal(); len(p) > 0 {
		return p
	}
	return ctx.Path()
}

// generationRoute maps the paths of the generation and engine pass-through routes to their
// route and extraction; ok is false for every other path.
func generationRoute(path []byte) (route int, er extract.Route, ok bool) {
	switch string(path) {
	case "/v1/chat/completions":
		return routeChat, extract.RouteChat, true
	case "/v1/completions":
		return routeCompletions, extract.RouteCompletions, true
	case "/generate":
		return routeGenerate, extract.RouteGenerate, true
	case "/v1/embeddings":
		return routeEmbeddings, extract.RouteEmbeddings, true
	case "/v1/rerank":
		return routeRerank, extract.RouteRerank, true
	case "/rerank":
		return routeRerankNative, extract.RouteRerank, true
	case "/v1/classify":
		return routeClassify, extract.RouteClassify, true
	case "/v1/tokenize":
		return routeTokenize, extract.RouteTokenize, true
	case "/v1/detokenize":
		return routeDetokenize, extract.RouteDetokenize, true
	case "/v1/responses":
		return routeResponses, extract.RouteResponses, true
	case "/v1/messages":
		return routeMessages, extract.RouteMessages, true
	}
	return 0, 0, false
}

// SetMeshStatus installs the body of GET /mesh/status (the mesh's members, incarnations,
// statuses and streams). Without it the route answers 404.
func (s *Server) SetMeshStatus(status func() []byte) { s.meshStatus.Store(&status) }

func (s *Server) serveMeshStatus(ctx *fasthttp.RequestCtx) {
	defer func() { s.observe(routeOther, ctx.Response.StatusCode(), s.bridgedStart(ctx)) }()
	if !s.authorized(ctx) {
		return
	}
	f := s.meshStatus.Load()
	if f == nil {
		writeAPIError(ctx, fasthttp.StatusNotFound, "MESH_DISABLED", "the mesh is off; start the gateway with --enable-mesh")
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody((*f)())
}

// recoverPanic turns a panic in a handler into a 500 for that request instead of a crash of
// the gateway; the in-flight guards of the proxy have already run by then.
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx) {
	if p := recover(); p != nil {
		s.log.Error("Panic while serving a request", "method", string(ctx.Method()), "path", string(ctx.Path()), "panic", p, "stack", string(debug.Stack()))
		writeError(ctx, errInternal, "internal error; the gateway logged the details")
	}
}

func (s *Server) methodNotAllowed(ctx *fasthttp.RequestCtx, route int, allow string) {
	writeError(ctx, errMethod, string(ctx.Method())+" is not allowed on "+string(ctx.Path())+"; use "+allow)
	ctx.Response.Header.Set("Allow", allow)
	s.observe(route, ctx.Response.StatusCode(), s.bridgedStart(ctx))
}

// fasthttpLogger sends fasthttp's own messages (mostly clients that misbehave at the
// connection level) to slog at debug level, so a noisy client cannot flood the logs.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	if f.l.Enabled(context.Background(), slog.LevelDebug) {
		f.l.Debug("fasthttp: " + fmt.Sprintf(format, args...))
	}
}
