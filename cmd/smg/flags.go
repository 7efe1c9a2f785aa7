package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/kvevents/kvindex"
	"github.com/smg-go/smg/mesh"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/telemetry"
	"github.com/smg-go/smg/telemetry/trace"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
	"github.com/smg-go/smg/worker/health"
	"github.com/smg-go/smg/worker/loadmon"
	"github.com/smg-go/smg/worker/stall"
)

// options is everything `smg launch` reads from its command line.
type options struct {
	gateway  fastpath.Config
	policies all.Config
	loadmon  loadmon.Config
	health   health.Config
	mesh     mesh.Config
	disc     discovery.Config
	breaker  breaker.Config
	stall    stall.Config
	pd       pdOptions
	// telemetry is the request telemetry's config; disableAccessLog is --disable-access-log.
	telemetry        telemetry.Config
	disableAccessLog bool
	trace            trace.Config

	apiKeyFile        string
	workerURLs        []string
	policy            string
	prometheusHost    string
	prometheusPort    int
	disablePprof      bool
	pprofAllowRemote  bool
	logLevel          string
	logJSON           bool
	shutdownGrace     time.Duration
	maxConnsPerWorker int
	maxWorkers        int
	// kvEvents are --kv-events-port and --kv-events-replay-port: the fleet-wide ports of the
	// HTTP engines' KV-cache event sockets.
	kvEvents kvEventPorts
	// kvIndexMaxBlocks is --kv-index-max-blocks: each model's KV block index bound.
	kvIndexMaxBlocks int
	// workerCAFile is --worker-ca-file; validate loads it into workerTLS (workerca.go).
	workerCAFile string
	workerTLS    *tls.Config
	// modelPath and enableIGW are spec flags accepted so that SMG command lines run
	// unchanged; compat.go says what each does here.
	modelPath string
	enableIGW bool
	// tokenizerPath is --tokenizer-path: the gRPC workers' tokenizer directory.
	tokenizerPath string
}

// dataPlaneEvloop is the one value --data-plane takes.
const dataPlaneEvloop = "evloop"

// checkDataPlane accepts --data-plane evloop, which earlier versions took to choose the event
// loops over the fasthttp generation path; that path is gone, so the flag chooses
// nothing and fasthttp is refused with what to run instead.
func checkDataPlane(v string) error {
	switch v {
	case dataPlaneEvloop:
		return nil
	case "fasthttp":
		return errors.New("the fasthttp data plane was removed: the event loops serve every route and every worker, TLS included (docs/differences.md)")
	}
	return errors.New("not a data plane")
}

// newFlagSet registers every flag of `smg launch` on o, section by section in help order.
func newFlagSet(o *options) *cli.FlagSet {
	fs := cli.NewFlagSet("smg launch")
	o.gateway = fastpath.DefaultConfig() // the flags below set what they name; the rest keeps its default

	fs.Group("Server")
	registerServerFlags(fs, o)

	fs.Group("Admission")
	registerAdmissionFlags(fs, &o.gateway.Admission)

	fs.Group("Health checks")
	registerHealthFlags(fs, &o.health)
	o.stall = stall.DefaultConfig()
	fs.Duration("worker-stall-secs", &o.stall.MinSilence, o.stall.MinSilence, fmt.Sprintf("A worker whose waiting requests get no first byte for this long, and %dx the fleet's typical time to first byte, takes no new requests; if it does not answer a probe either, they are retried elsewhere (0: off; docs/reliability.md)", stall.DefaultFactor))

	fs.Group("Circuit breaker")
	registerBreakerFlags(fs, &o.breaker)

	fs.Group("Retries")
	registerRetryFlags(fs, &o.gateway.Retry)

	fs.Group("Workers and routing")
	registerWorkerFlags(fs, o)
	registerPolicyFlags(fs, &o.policies, &o.gateway.RoutingKeyHeaders)

	fs.Group("PD disaggregation")
	registerPDFlags(fs, &o.pd)

	fs.Group("Load monitoring")
	registerLoadFlags(fs, &o.loadmon)

	fs.Group("Service discovery (Kubernetes)")
	registerDiscoveryFlags(fs, &o.disc)
	fs.Bool("enable-igw", &o.enableIGW, false, "IGW mode: per-model routing (always on here) and no two-worker minimum for a power_of_two PD leg; --service-discovery turns it on")

	fs.Group("High availability (mesh)")
	registerMeshFlags(fs, &o.mesh)

	fs.Group("Observability")
	registerObservabilityFlags(fs, o)
	registerVersionFlag(fs)
	refuseSpecFlags(fs)
	return fs
}

// registerServerFlags registers the gateway listener's flags: address, limits, timeouts and
// the worker API's key.
func registerServerFlags(fs *cli.FlagSet, o *options) {
	g := &o.gateway
	fs.String("host", &g.Host, fastpath.DefaultHost, "Address the gateway listens on").WithMetavar("ADDR")
	fs.Int("port", &g.Port, fastpath.DefaultPort, "Port the gateway listens on").WithMetavar("PORT")
	fs.Int("max-payload-size", &g.MaxPayloadSize, fastpath.DefaultMaxPayloadSize, "Largest request body in bytes; larger bodies get 413").WithMetavar("BYTES")
	fs.Int("max-buffered-request-bytes", &g.MaxBufferedBody, g.MaxBufferedBody, "Largest generation request body read whole and parsed; a larger one is streamed to the worker unparsed: routed without its text, never retried (PD and EPD bodies are always read whole, up to --max-payload-size)").WithMetavar("BYTES")
	fs.Int("max-request-body-memory", &g.MaxBodyMemory, fastpath.DefaultMaxBodyMemory, "Bytes of request bodies the gateway holds at once; past it requests get 503 (at least --max-payload-size)")
	fs.Int("max-header-size", &g.MaxHeaderSize, fastpath.DefaultMaxHeaderSize, "Largest request header block in bytes; larger ones get 431 (each client connection holds a read buffer this large)")
	fs.Duration("request-timeout-secs", &g.RequestTimeout, fastpath.DefaultRequestTimeout, "Time a worker has to finish a request, in seconds")
	fs.Duration("first-byte-timeout-secs", &g.FirstByteTimeout, 0, "Time a worker has to start its answer, per try, before the request is retried elsewhere and the worker's breaker counts a fault (0: none); a non-streamed answer starts when complete")
	fs.String("api-key", &g.APIKey, "", "Bearer token the worker API (/workers) requires; empty leaves it open (also --api-key-file, or $SMG_API_KEY)").WithMetavar("KEY")
	fs.String("api-key-file", &o.apiKeyFile, "", "File holding --api-key on one line; unlike the flag, process listings do not show it").WithMetavar("FILE")
	fs.Func("data-plane", dataPlaneEvloop, dataPlaneEvloop, "Accepted for the command lines of earlier versions: evloop, the epoll event loops (one per core), is the only data plane; fasthttp was removed (docs/differences.md)", checkDataPlane).WithMetavar("PLANE")
	fs.Duration("shutdown-grace-period-secs", &o.shutdownGrace, 180*time.Second, "On SIGTERM, how long in-flight requests may take to finish before exit")

	fs.Duration("drain-settle-secs", &g.DrainSettle, fastpath.DefaultDrainSettle, "How long a removed worker (and the gateway itself on SIGTERM) keeps serving what it has before it leaves; 0 leaves at once")
}

// registerAdmissionFlags registers the admission control's flags into a.
func registerAdmissionFlags(fs *cli.FlagSet, a *fastpath.AdmissionConfig) {
	fs.Int("max-concurrent-requests", &a.MaxConcurrent, -1, "Generation requests served at once; more wait in the queue (-1: no cap)")
	fs.Int("queue-size", &a.QueueSize, fastpath.DefaultQueueSize, "Requests that may wait for a slot; more get 429 admission_queue_full (0: none waits)")
	fs.Duration("queue-timeout-secs", &a.QueueTimeout, fastpath.DefaultQueueTimeout, "How long a request may wait for a slot before 503 admission_queue_timeout")
	fs.Float("rate-limit-tokens-per-second", &a.RatePerSecond, 0, "Generation requests admitted per second, with a burst of one second's worth or one request; more get 429 (0: no limit)")
}

// registerBreakerFlags registers the circuit breaker's flags into b.
func registerBreakerFlags(fs *cli.FlagSet, b *breaker.Config) {
	*b = breaker.DefaultConfig()
	fs.Int("cb-failure-threshold", &b.FailureThreshold, b.FailureThreshold, "Faults in a row (within the window) that open a worker's breaker")
	fs.Int("cb-success-threshold", &b.SuccessThreshold, b.SuccessThreshold, "Successful half-open probes that close it again")
	fs.Duration("cb-timeout-duration-secs", &b.Timeout, b.Timeout, "Seconds an open breaker waits before letting probes through")
	fs.Duration("cb-window-duration-secs", &b.Window, b.Window, "Seconds a fault counts toward the failure threshold")
	fs.Bool("disable-circuit-breaker", &b.Disabled, false, "Never open breakers")
}

// registerRetryFlags registers the retry flags into r.
func registerRetryFlags(fs *cli.FlagSet, r *fastpath.RetryConfig) {
	*r = fastpath.DefaultRetryConfig()
	fs.Int("retry-max-retries", &r.MaxRetries, r.MaxRetries, "Retries of a request whose worker failed before answering (another worker each time)")
	fs.Func("retry-initial-backoff-ms", msString(r.InitialBackoff), "a number of milliseconds such as "+msString(r.InitialBackoff), "Pause before the first retry, in milliseconds", millis(&r.InitialBackoff)).WithMetavar("MS")
	fs.Func("retry-max-backoff-ms", msString(r.MaxBackoff), "a number of milliseconds such as "+msString(r.MaxBackoff), "Longest pause between retries, in milliseconds", millis(&r.MaxBackoff)).WithMetavar("MS")
	fs.Float("retry-backoff-multiplier", &r.Multiplier, r.Multiplier, "Growth of the pause per retry")
	fs.Float("retry-jitter-factor", &r.Jitter, r.Jitter, "Random spread of each pause, as a fraction (0 to 1)")
	fs.Bool("disable-retries", &r.Disabled, false, "Never retry: deliver the first worker's answer or failure")
}

// registerWorkerFlags registers the flags of the workers the gateway starts with and of how
// it reaches them; the policies' flags are registerPolicyFlags'.
func registerWorkerFlags(fs *cli.FlagSet, o *options) {
	fs.StringList("worker-urls", &o.workerURLs, "Worker base URLs, space-separated (http://host:port; grpc://host:port or grpc://host:port@RANK for an engine's gRPC service)").WithMetavar("URL")
	fs.Alias("worker-url", "worker-urls")
	fs.String("model-path", &o.modelPath, "", "Tokenizer source for gRPC workers (grpc://): a local directory holding the model's tokenizer.json and tokenizer_config.json (without one, each engine's own, fetched with GetTokenizer); HTTP workers' requests are routed on their text, or, for a model cache_aware routes on the engines' KV events, on the tokens this tokenizer gives").WithMetavar("PATH")
	fs.String("tokenizer-path", &o.tokenizerPath, "", "The gRPC workers' tokenizer directory when it differs from --model-path").WithMetavar("DIR")
	fs.String("policy", &o.policy, all.DefaultPolicy, "Load-balancing policy: "+strings.Join(all.Names(), ", ")).WithMetavar("POLICY")
	fs.Int("max-connections-per-worker", &o.maxConnsPerWorker, worker.DefaultClientOptions().MaxConns, "Connections the gateway may open to one worker")
	fs.String("worker-ca-file", &o.workerCAFile, "", "PEM bundle of the CA certificates that verify https workers, instead of the system's roots (for a cluster with its own CA)").WithMetavar("FILE")
	fs.Int("max-workers", &o.maxWorkers, worker.DefaultMaxWorkers, "Workers the gateway may hold (API, discovery, mesh, command line); past it registration gets 409 WORKER_LIMIT_REACHED")
	fs.Int("kv-events-port", &o.kvEvents.Pub, 0, "Port of every HTTP engine's KV-cache event publisher (vLLM/SGLang --kv-events-config, ZMQ PUB): a worker without its own kv_events_endpoint is followed on tcp://<its host>:PORT, and cache_aware routes its model on the events; 0: none").WithMetavar("PORT")
	fs.Int("kv-index-max-blocks", &o.kvIndexMaxBlocks, kvindex.DefaultMaxBlocks, "Bound of each model's index of the engines' KV-cache blocks, in (worker, block) pairs of at most 64 bytes: past it the worker holding most loses its oldest blocks").WithMetavar("N")
	fs.Int("kv-events-dp-size", &o.kvEvents.DPSize, 1, "Data-parallel ranks behind each HTTP worker whose KV-cache events smg follows: rank r publishes on the event ports + r (vLLM and SGLang offset them so)").WithMetavar("N")
	fs.Int("kv-events-replay-port", &o.kvEvents.Replay, 0, "Port of every HTTP engine's KV-cache event replay socket (ROUTER), with --kv-events-port; 0: none (a gap in the events then drops the worker's blocks)").WithMetavar("PORT")
}

// registerObservabilityFlags registers the metrics, pprof, log, telemetry and trace flags.
func registerObservabilityFlags(fs *cli.FlagSet, o *options) {
	fs.String("prometheus-host", &o.prometheusHost, "0.0.0.0", "Address of the Prometheus /metrics and /debug/pprof/ listener").WithMetavar("ADDR")
	fs.Int("prometheus-port", &o.prometheusPort, 29000, "Port of the Prometheus /metrics and /debug/pprof/ listener").WithMetavar("PORT")
	fs.Bool("disable-pprof", &o.disablePprof, false, "Do not serve /debug/pprof/ on the Prometheus port")
	registerPprofFlags(fs, &o.pprofAllowRemote)
	fs.Enum("log-level", &o.logLevel, "info", []string{"debug", "info", "warn", "error"}, "Log level")
	fs.Bool("log-json", &o.logJSON, false, "Log JSON lines instead of text")
	registerTelemetryFlags(fs, o)
	registerTraceFlags(fs, &o.gateway.Trace, &o.trace)
}

// msString is d as --retry-*-backoff-ms shows it: whole milliseconds, or fractional ones.
func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

// millis parses a flag given in milliseconds into d.
func millis(d *time.Duration) func(string) error {
	return func(v string) error {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 {
			return fmt.Errorf("not a non-negative number of milliseconds")
		}
		*d = time.Duration(ms * float64(time.Millisecond))
		return nil
	}
}
