package main

import (
	"time"

	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/internal/cli"
)

// options is everything `smg launch` reads from its command line.
type options struct {
	gateway fastpath.Config

	workerURLs        []string
	policy            string
	prometheusHost    string
	prometheusPort    int
	disablePprof      bool
	logLevel          string
	logJSON           bool
	shutdownGrace     time.Duration
	maxConnsPerWorker int
}

// defaultPolicy is --policy's default. The spec's default is cache_aware; until that policy
// is built, round_robin (see docs/differences.md).
var defaultPolicy = "round_robin"

// newFlagSet registers every flag of `smg launch` on o.
func newFlagSet(o *options) *cli.FlagSet {
	fs := cli.NewFlagSet("smg launch")
	g := &o.gateway

	fs.Group("Server")
	fs.String("host", &g.Host, fastpath.DefaultHost, "Address the gateway listens on")
	fs.Int("port", &g.Port, fastpath.DefaultPort, "Port the gateway listens on")
	fs.Int("max-payload-size", &g.MaxPayloadSize, fastpath.DefaultMaxPayloadSize, "Largest request body in bytes; larger bodies get 413")
	fs.Duration("request-timeout-secs", &g.RequestTimeout, fastpath.DefaultRequestTimeout, "Time a worker has to finish a request, in seconds")
	fs.String("api-key", &g.APIKey, "", "Bearer token the worker API (/workers) requires; empty leaves it open")
	fs.Duration("shutdown-grace-period-secs", &o.shutdownGrace, 180*time.Second, "On SIGTERM, how long in-flight requests may take to finish before exit")

	fs.Group("Workers and routing")
	fs.StringList("worker-urls", &o.workerURLs, "Worker base URLs, space-separated (http://host:port)")
	fs.Alias("worker-url", "worker-urls")
	fs.String("policy", &o.policy, defaultPolicy, "Load-balancing policy")
	fs.Int("max-connections-per-worker", &o.maxConnsPerWorker, 2048, "Connections the gateway may open to one worker")

	fs.Group("Observability")
	fs.String("prometheus-host", &o.prometheusHost, "0.0.0.0", "Address of the Prometheus /metrics and /debug/pprof/ listener")
	fs.Int("prometheus-port", &o.prometheusPort, 29000, "Port of the Prometheus /metrics and /debug/pprof/ listener")
	fs.Bool("disable-pprof", &o.disablePprof, false, "Do not serve /debug/pprof/ on the Prometheus port")
	fs.Enum("log-level", &o.logLevel, "info", []string{"debug", "info", "warn", "error"}, "Log level")
	fs.Bool("log-json", &o.logJSON, false, "Log JSON lines instead of text")
	return fs
}
