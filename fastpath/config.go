package fastpath

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/telemetry"
	"github.com/smg-go/smg/worker"
)

// Defaults of Config, as the spec product's flags have them.
const (
	DefaultHost                = "0.0.0.0"
	DefaultPort                = 30000
	DefaultMaxPayloadSize      = 512 << 20 // --max-payload-size: 512 MiB
	DefaultRequestTimeout      = 1800 * time.Second
	DefaultReadTimeout         = 60 * time.Second
	DefaultIdleTimeout         = 120 * time.Second
	DefaultMaxConnections      = 65536 // the cap when RLIMIT_NOFILE allows it (DefaultConfig)
	DefaultRoutingKeyHeader    = "X-SMG-Routing-Key"
	DefaultTargetWorkerHeader  = "X-SMG-Target-Worker"
	DefaultRoutingTokensHeader = "x-smg-routing-tokens"
	DefaultDrainSettle         = 5 * time.Second
	DefaultMaxHeaderSize       = 64 << 10 // --max-header-size: 64 KiB
	DefaultMaxConnsPerWorker   = 2048     // --max-connections-per-worker
	DefaultMaxBufferedBody     = 1 << 20  // --max-buffered-request-bytes: 1 MiB
)

// Config configures the gateway's HTTP server. Start from DefaultConfig: a zero setting
// means zero, and New refuses the zeros that cannot work (Validate).
type Config struct {
	// Host and Port are where the gateway listens (--host, --port). Default 0.0.0.0:30000.
	Host string
	Port int
	// MaxPayloadSize bounds request bodies in bytes (--max-payload-size); larger bodies get 413.
	MaxPayloadSize int
	// MaxBodyMemory bounds the bytes of all request bodies held at once, being read or
	// forwarded (--max-request-body-memory, default DefaultMaxBodyMemory, 1 GiB); past it a
	// request gets 503 request_body_memory_exhausted. At least MaxPayloadSize.
	MaxBodyMemory int
	// MaxAnswerSize bounds a worker's answer the gateway reads whole before answering (every
	// non-streamed generation answer, PD prefill and EPD encode answers): a larger one fails
	// with 502 worker_answer_too_large, at its head when the worker declares the length.
	// Default DefaultMaxAnswerSize (256 MiB); no flag.
	MaxAnswerSize int
	// MaxAnswerMemory bounds the bytes of all such answers held at once, being read or
	// waiting to be sent to their clients (default DefaultMaxAnswerMemory, 1 GiB; no flag):
	// past it 503 answer_memory_exhausted. At least MaxAnswerSize.
	MaxAnswerMemory int
	// MaxBufferedBody (--max-buffered-request-bytes, default 1 MiB) is the largest generation
	// request body the gateway reads whole and parses (routing text, model, stream, rid); a
	// larger one is streamed to the worker unparsed as it arrives (streamed.go): picked
	// without its text, sent once (nothing to retry with), its answer relayed. 0 streams
	// every body. Other routes, and PD mode, always read the body whole.
	MaxBufferedBody int
	// EventLoops is the number of event loops of the data plane. Default GOMAXPROCS when
	// DefaultConfig runs. The process should run with GOMAXPROCS SchedulerProcs(EventLoops):
	// a loop waits for events in epoll_pwait2 on its own P, and the gateway's other goroutines
	// need one more (cmd/smg raises it itself; fastpath/evloop/wait.go says why).
	EventLoops int
	// MaxHeaderSize bounds a request's header block in bytes (--max-header-size, default
	// 64 KiB); larger ones get 431. It is the size of each client connection's read buffer.
	MaxHeaderSize int
	// FirstByteTimeout bounds how long a worker may take to start its answer (its status
	// line), per try (--first-byte-timeout-secs; 0, the default: only RequestTimeout). A
	// worker that does not start in time is cut, counted as a fault by its breaker, and the
	// request is retried elsewhere. A non-streamed answer starts only when it is complete,
	// so for a non-streamed request it bounds the whole answer.
	FirstByteTimeout time.Duration
	// RequestTimeout bounds a generation request from its admission to the end of its
	// answer, every retry and backoff pause included (--request-timeout-secs). Default 1800 s.
	RequestTimeout time.Duration
	// ReadTimeout bounds reading one request from a client, so slow clients cannot hold
	// connections forever. Default 60 s.
	ReadTimeout time.Duration
	// IdleTimeout closes keep-alive client connections idle this long. Default 120 s.
	IdleTimeout time.Duration
	// MaxConnections caps concurrent client connections; past it a new connection takes the
	// place of the oldest idle keep-alive one, or, with none idle, is refused with 503.
	// Default evloop.DefaultMaxConns(): 65,536 or, under a lower RLIMIT_NOFILE, half the
	// descriptors less 64, so that the cap answers before accept runs out of descriptors.
	MaxConnections int
	// APIKey, when set, protects the worker API: requests need "Authorization: Bearer <key>".
	APIKey string
	// RoutingKeyHeaders are read, in order, before X-SMG-Routing-Key for a routing key
	// (--routing-key-headers).
	RoutingKeyHeaders []string
	// KeyLoads, when set, counts in-flight requests per routing key (the sticky-session cap
	// reads it); RoutingKeyOverride says whether the body's rid is a routing key.
	KeyLoads           *policy.KeyLoads
	RoutingKeyOverride bool
	// GRPC serves the OpenAI routes of models whose workers are gRPC engines (grpc://): the
	// gateway tokenizes, runs the engine's Generate and writes the OpenAI answer. Nil: every
	// worker is forwarded to over HTTP.
	GRPC *GRPCBackend
	// DrainSettle is how long a worker removed through the API stays draining (no new
	// requests, those it has finish) before it leaves (--drain-settle-secs, default 5 s; the
	// gateway's own SIGTERM drain uses it too). 0: remove at once.
	DrainSettle time.Duration
	// InitialStatus gives a worker registered through the API its first status (pending
	// until the health checker has seen it answer). Nil: ready.
	InitialStatus func(*worker.Spec) worker.Status
	// ValidateSpec checks a registration beyond the URL (the per-worker health overrides).
	ValidateSpec func(*worker.Spec) error
	// Admission limits concurrent requests and their rate (--max-concurrent-requests, ...).
	Admission AdmissionConfig
	// Retry is the retry policy (default DefaultRetryConfig()). The zero value retries nothing
	// (MaxRetries 0).
	Retry RetryConfig
	// FanOut bounds the admin routes that ask every worker (GET /get_loads, POST /flush_cache,
	// GET /engine_metrics). Default DefaultFanOutConfig().
	FanOut FanOutConfig
	// Metrics receives the gateway's series. Required; DefaultConfig sets a private set.
	Metrics *metrics.Set
	// Logger receives the gateway's log. Required; DefaultConfig sets slog.Default().
	Logger *slog.Logger
	// Clock is the time of the request path: the event loops' deadlines and timers, each
	// request's deadline, the admission rate limit and the stamps of the worker bookkeeping
	// and the telemetry records. Required; DefaultConfig sets clock.Real.
	Clock clock.Clock
	// Telemetry takes one record per generation request when it ends (per-model metrics,
	// the access log, traces). Nil: none is made.
	Telemetry *telemetry.Sink
	// MaxConnsPerWorker caps the event loops' connections to one worker
	// (--max-connections-per-worker, which also caps the worker's HostClient, in
	// worker.ClientOptions, for probes and the admin routes). Default 2048.
	MaxConnsPerWorker int
	// Trace is the W3C trace context of generation requests (--enable-trace,
	// --trace-sample-ratio). Default DefaultTraceConfig(): off.
	Trace TraceConfig
}

// DefaultConfig returns the spec's defaults, every setting explicit (no zero
// stands for a default), and the standard collaborators: a private metrics set,
// slog.Default() and the system clock. Retry is DefaultRetryConfig; no API key, no
// first-byte timeout.
func DefaultConfig() Config {
	return Config{
		Host:              DefaultHost,
		Port:              DefaultPort,
		MaxPayloadSize:    DefaultMaxPayloadSize,
		MaxBodyMemory:     DefaultMaxBodyMemory,
		MaxAnswerSize:     DefaultMaxAnswerSize,
		MaxAnswerMemory:   DefaultMaxAnswerMemory,
		MaxHeaderSize:     DefaultMaxHeaderSize,
		MaxBufferedBody:   DefaultMaxBufferedBody,
		RequestTimeout:    DefaultRequestTimeout,
		ReadTimeout:       DefaultReadTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxConnections:    evloop.DefaultMaxConns(),
		DrainSettle:       DefaultDrainSettle,
		Admission:         DefaultAdmissionConfig(),
		Retry:             DefaultRetryConfig(),
		FanOut:            DefaultFanOutConfig(),
		MaxConnsPerWorker: DefaultMaxConnsPerWorker,
		EventLoops:        runtime.GOMAXPROCS(0),
		Trace:             DefaultTraceConfig(),
		Metrics:           metrics.NewSet(),
		Logger:            slog.Default(),
		Clock:             clock.Real{},
	}
}

// SchedulerProcs is the GOMAXPROCS a process serving with loops event loops should run with:
// a P per loop and one for the rest (evloop.SchedulerProcs).
func SchedulerProcs(loops int) int { return evloop.SchedulerProcs(loops) }

// Validate reports the first invalid setting, naming its flag.
func (c *Config) Validate() error {
	switch {
	case c.Host == "":
		return fmt.Errorf("--host is empty: give an address to listen on (default %s)", DefaultHost)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("--port %d: must be in 0-65535", c.Port)
	case c.MaxPayloadSize <= 0:
		return fmt.Errorf("--max-payload-size %d: must be a positive number of bytes (default %d)", c.MaxPayloadSize, DefaultMaxPayloadSize)
	case c.MaxBodyMemory < c.MaxPayloadSize:
		return fmt.Errorf("--max-request-body-memory %d: must be at least --max-payload-size (%d), or a request of the largest allowed size could never be read", c.MaxBodyMemory, c.MaxPayloadSize)
	case c.MaxAnswerSize <= 0 || c.MaxAnswerMemory < c.MaxAnswerSize:
		return fmt.Errorf("answer size limit %d and answer memory %d: the size must be positive and the memory at least the size: start from fastpath.DefaultConfig() (%d, %d)", c.MaxAnswerSize, c.MaxAnswerMemory, DefaultMaxAnswerSize, DefaultMaxAnswerMemory)
	case c.MaxBufferedBody < 0:
		return fmt.Errorf("--max-buffered-request-bytes %d: must be 0 or more", c.MaxBufferedBody)
	case c.MaxHeaderSize < 1024:
		return fmt.Errorf("--max-header-size %d: must be at least 1024 bytes (default %d)", c.MaxHeaderSize, DefaultMaxHeaderSize)
	case c.FirstByteTimeout < 0:
		return fmt.Errorf("--first-byte-timeout-secs: must be positive, or 0 for none")
	case c.RequestTimeout <= 0:
		return fmt.Errorf("--request-timeout-secs: must be positive (default %v)", DefaultRequestTimeout.Seconds())
	case c.ReadTimeout <= 0 || c.IdleTimeout <= 0:
		return fmt.Errorf("read timeout %v and idle timeout %v must be positive: start from fastpath.DefaultConfig() (%v, %v)", c.ReadTimeout, c.IdleTimeout, DefaultReadTimeout, DefaultIdleTimeout)
	case c.EventLoops <= 0:
		return fmt.Errorf("event loops %d must be positive: start from fastpath.DefaultConfig() (GOMAXPROCS)", c.EventLoops)
	case c.MaxConnections <= 0:
		return fmt.Errorf("max connections %d must be positive: start from fastpath.DefaultConfig() (%d)", c.MaxConnections, DefaultMaxConnections)
	case c.MaxConnsPerWorker <= 0:
		return fmt.Errorf("--max-connections-per-worker %d: must be positive (default %d)", c.MaxConnsPerWorker, DefaultMaxConnsPerWorker)
	case c.DrainSettle < 0:
		return fmt.Errorf("--drain-settle-secs: must not be negative (0: remove at once)")
	}
	if err := c.Retry.Validate(); err != nil {
		return err
	}
	if err := c.Admission.Validate(); err != nil {
		return err
	}
	if err := c.FanOut.Validate(); err != nil {
		return err
	}
	if err := c.Trace.Validate(); err != nil {
		return err
	}
	for _, h := range c.RoutingKeyHeaders {
		if !validHeaderName(h) {
			return fmt.Errorf("--routing-key-headers %q: not a valid HTTP header name: use letters, digits and !#$%%&'*+-.^_`|~", h)
		}
	}
	if c.GRPC != nil {
		if err := c.GRPC.validate(); err != nil {
			return err
		}
	}
	return worker.CheckCollaborators("fastpath", c.Clock, c.Metrics, c.Logger)
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token): a header of any
// other name can never arrive, so such a --routing-key-headers entry is a mistake.
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
