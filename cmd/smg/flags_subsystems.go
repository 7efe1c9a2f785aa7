package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/mesh"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/policy/prefixhash"
	"github.com/smg-go/smg/policy/sticky"
	"github.com/smg-go/smg/worker/health"
	"github.com/smg-go/smg/worker/loadmon"
)

// The flags of the subsystems: each function resets its config to the package's DefaultConfig
// and registers the spec's flags with those values as defaults, so no default is written
// twice. Flags live in cmd/ only (docs/architecture.md); the packages know nothing of the command
// line but the flag names their Validate messages cite.

// registerHealthFlags registers the health-check flags into cfg.
func registerHealthFlags(fs *cli.FlagSet, cfg *health.Config) {
	*cfg = health.DefaultConfig()
	fs.String("health-check-endpoint", &cfg.Endpoint, cfg.Endpoint,
		"Path of each worker's health endpoint, probed with GET").WithMetavar("PATH")
	fs.Duration("health-check-interval-secs", &cfg.Interval, cfg.Interval,
		"Seconds between two health probes of a worker")
	fs.Duration("health-check-timeout-secs", &cfg.Timeout, cfg.Timeout,
		"Seconds a health probe may take before it counts as failed")
	fs.Int("health-success-threshold", &cfg.SuccessThreshold, cfg.SuccessThreshold,
		"Probes in a row that must succeed to bring an unhealthy worker back to ready")
	fs.Int("health-failure-threshold", &cfg.FailureThreshold, cfg.FailureThreshold,
		fmt.Sprintf("Probes in a row that must fail to make a ready worker not_ready (%d times as many make it failed)", health.FailedFactor))
	fs.Bool("remove-unhealthy-workers", &cfg.RemoveUnhealthy, cfg.RemoveUnhealthy,
		"Remove workers that become failed (on by default with --service-discovery)")
	fs.Alias("worker-auto-recovery", "remove-unhealthy-workers")
	fs.Negation("no-remove-unhealthy-workers", "remove-unhealthy-workers") // the Python launcher's spelling
	fs.Bool("disable-health-check", &cfg.Disable, cfg.Disable,
		"Do not probe workers; they are ready as soon as they are registered")
}

// registerLoadFlags registers the load-monitoring flags into cfg.
func registerLoadFlags(fs *cli.FlagSet, cfg *loadmon.Config) {
	*cfg = loadmon.DefaultConfig()
	fs.Duration("load-monitor-interval", &cfg.Interval, cfg.Interval,
		"Seconds between polls of each worker's load (/v1/loads, else Prometheus /metrics)")
	fs.Bool("disable-load-monitoring", &cfg.Disable, cfg.Disable,
		"Stop polling worker loads unless a load-aware policy (cache_aware, least_load, power_of_two) or overload protection needs them")
	fs.Bool("engine-metrics", &cfg.EngineMetrics, cfg.EngineMetrics,
		"Poll each worker's Prometheus /metrics with the load monitor and re-export the engines' series on the metrics port, labelled worker=<url>")
	fs.Bool("worker-overload-protection", &cfg.Overload.Enabled, cfg.Overload.Enabled,
		"Veto workers whose load report passes the --worker-overload-* limits, under every policy")
	fs.Int("worker-overload-waiting-requests", &cfg.Overload.WaitingRequests, cfg.Overload.WaitingRequests,
		"Overload protection: waiting requests at which a worker is vetoed (0: no limit)")
	fs.Float("worker-overload-token-usage", &cfg.Overload.TokenUsage, cfg.Overload.TokenUsage,
		"Overload protection: KV-cache usage (0 to 1) at which a worker is vetoed (0: no limit)")
}

// registerDiscoveryFlags registers the service discovery flags into cfg. --drain-settle-secs,
// --remove-unhealthy-workers, --enable-mesh and --mesh-port are other subsystems' flags:
// options.validate copies them into cfg.
func registerDiscoveryFlags(fs *cli.FlagSet, cfg *discovery.Config) {
	*cfg = discovery.DefaultConfig()
	fs.Bool("service-discovery", &cfg.Enabled, cfg.Enabled, "Discover workers from Kubernetes pods")
	fs.StringList("selector", &cfg.Selector, "Label selector of worker pods, key=value pairs that must all match").WithMetavar("KEY=VALUE")
	fs.String("service-discovery-namespace", &cfg.Namespace, cfg.Namespace, "Namespace to watch (default: all namespaces)").WithMetavar("NAMESPACE")
	fs.Int("service-discovery-port", &cfg.Port, cfg.Port, "Worker port of pods without the smg.ai/worker-ports annotation").WithMetavar("PORT")
	fs.String("model-id-from", &cfg.ModelIDFrom, cfg.ModelIDFrom, "Take discovered workers' model id from namespace, label:<key> or annotation:<key>").WithMetavar("SOURCE")
	fs.StringList("model-alias", &cfg.ModelAliases, "Extra client-facing model name, alias=canonical (repeatable)").WithMetavar("ALIAS=MODEL")
	fs.Int("job-queue-capacity", &cfg.JobQueueCapacity, cfg.JobQueueCapacity, "Maximum pending control-plane jobs; a reconcile pass waits while the queue is full")
	fs.Int("job-queue-concurrency", &cfg.JobQueueConcurrency, cfg.JobQueueConcurrency, "Maximum control-plane jobs run at once")
	fs.Duration("worker-startup-delay", &cfg.WorkerStartupDelay, cfg.WorkerStartupDelay, "Seconds to wait after a worker is submitted before its first startup probe")
	fs.Duration("worker-startup-check-interval", &cfg.WorkerStartupCheckInterval, cfg.WorkerStartupCheckInterval, "Seconds between startup probes while registration waits for the engine")
	fs.Duration("worker-startup-timeout-secs", &cfg.WorkerStartupTimeout, cfg.WorkerStartupTimeout, "How long registration waits for the engine before the job fails")
	fs.StringList("prefill-selector", &cfg.PrefillSelector, "Label selector of prefill pods (PD mode)").WithMetavar("KEY=VALUE")
	fs.StringList("decode-selector", &cfg.DecodeSelector, "Label selector of decode pods (PD mode)").WithMetavar("KEY=VALUE")
	fs.StringList("encode-selector", &cfg.EncodeSelector, "Label selector of encode pods (EPD mode)").WithMetavar("KEY=VALUE")
	fs.String("kv-connector-annotation", &cfg.KVConnectorAnnotation, cfg.KVConnectorAnnotation, "Pod annotation that names the vLLM KV connector").WithMetavar("ANNOTATION")
	fs.String("kv-engine-id-annotation", &cfg.KVEngineIDAnnotation, cfg.KVEngineIDAnnotation, "Pod annotation that lists the vLLM KV engine ids").WithMetavar("ANNOTATION")
	fs.StringList("router-selector", &cfg.RouterSelector, "Label selector of peer gateway pods for the mesh (needs --enable-mesh)").WithMetavar("KEY=VALUE")
}

// registerMeshFlags registers the mesh flags into cfg.
func registerMeshFlags(fs *cli.FlagSet, cfg *mesh.Config) {
	*cfg = mesh.DefaultConfig()
	fs.Group("Mesh (high availability)")
	fs.Bool("enable-mesh", &cfg.Enable, cfg.Enable, "Start the mesh listener and join the cluster")
	f := fs.String("mesh-server-name", &cfg.ServerName, cfg.ServerName,
		"Node name, unique within the cluster; non-empty, without ':'").WithMetavar("NAME")
	f.Default = "Mesh_ and 4 random alphanumerics" // the default is random: the help shows its shape
	fs.String("mesh-host", &cfg.Host, cfg.Host, "Bind IP address of the mesh listener").WithMetavar("IP")
	fs.String("mesh-advertise-host", &cfg.AdvertiseHost, cfg.AdvertiseHost,
		"IP address peers dial (default --mesh-host; required when --mesh-host is unspecified such as 0.0.0.0)").WithMetavar("IP")
	fs.Int("mesh-port", &cfg.Port, cfg.Port, "Mesh port, for binding and advertising; 0 is rejected").WithMetavar("PORT")
	fs.StringList("mesh-peer-urls", &cfg.PeerURLs, "Bootstrap peers as IP:port; every entry is dialled until first contact").WithMetavar("IP:PORT")
	fs.String("mesh-tls-cert", &cfg.TLSCert, cfg.TLSCert, "PEM certificate this router presents on the mesh port (mutual TLS)").WithMetavar("FILE")
	fs.String("mesh-tls-key", &cfg.TLSKey, cfg.TLSKey, "PEM private key of --mesh-tls-cert").WithMetavar("FILE")
	fs.String("mesh-tls-ca", &cfg.TLSCA, cfg.TLSCA, "PEM CA bundle that signs every mesh router's certificate; peers it did not sign are refused").WithMetavar("FILE")
	fs.Bool("mesh-allow-insecure", &cfg.AllowInsecure, cfg.AllowInsecure, "Import peers' workers over a plaintext mesh even when --api-key protects the worker API")
}

// registerPolicyFlags registers every policy flag of the spec into cfg, and
// --routing-key-headers into headers (the gateway reads those headers; policies see the
// value). --policy itself is registered with the gateway's flags.
func registerPolicyFlags(fs *cli.FlagSet, cfg *all.Config, headers *[]string) {
	*cfg = all.DefaultConfig()
	fs.Group("Routing policies")
	registerCacheAwareFlags(fs, &cfg.CacheAware)
	registerLeastLoadFlags(fs, &cfg.LeastLoad)
	fs.Enum("power-of-two-load-metric", &cfg.PowerOfTwo.LoadMetric, cfg.PowerOfTwo.LoadMetric, poweroftwo.Metrics,
		"power_of_two: what the two sampled workers are compared by")
	fs.StringList("routing-key-headers", headers,
		"Header names read for the routing key before X-SMG-Routing-Key (non-empty UTF-8, at most 128 bytes)").WithMetavar("HEADER")
	fs.Bool("routing-key-override", &cfg.RoutingKeyOverride, cfg.RoutingKeyOverride,
		"Sticky sessions on any policy: pin the body's rid (turn/retry suffixes stripped) or the routing key to a worker")
	registerPrefixHashFlags(fs, &cfg.PrefixHash, &cfg.CacheAware)
	registerManualFlags(fs, cfg)
}

// registerCacheAwareFlags registers cache_aware's flags into ca.
func registerCacheAwareFlags(fs *cli.FlagSet, ca *cacheaware.Config) {
	fs.Float("cache-threshold", &ca.CacheThreshold, ca.CacheThreshold,
		"cache_aware: route to a prefix holder only when the match ratio is above this (0-1)")
	fs.Alias("cache-match-threshold", "cache-threshold")
	fs.Int("balance-abs-threshold", &ca.BalanceAbsThreshold, ca.BalanceAbsThreshold,
		"cache_aware spill gate: a holder is hot above the fleet mean plus this many in-flight requests (bucket: characters)")
	fs.Alias("spill-abs-threshold", "balance-abs-threshold")
	fs.Float("balance-rel-threshold", &ca.BalanceRelThreshold, ca.BalanceRelThreshold,
		"cache_aware spill gate: and above this multiple of the fleet mean (>= 1)")
	fs.Alias("spill-rel-threshold", "balance-rel-threshold")
	fs.Duration("eviction-interval", &ca.EvictionInterval, ca.EvictionInterval,
		"cache_aware: seconds between evictions of trees over --max-tree-size")
	fs.Alias("eviction-interval-secs", "eviction-interval")
	fs.Func("max-tree-size", strconv.FormatInt(ca.MaxTreeSize, 10), "a positive character count such as 67108864",
		"cache_aware: per-model tree budget in characters (text) or tokens", func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("not an integer")
			}
			ca.MaxTreeSize = n
			return nil
		}).WithMetavar("SIZE")
	fs.Int("block-size", &ca.BlockSize, ca.BlockSize,
		"cache_aware: token tree page size; set it to the engines' KV page size")
	fs.Enum("cache-index", &ca.CacheIndex, ca.CacheIndex, []string{cacheaware.IndexTree, cacheaware.IndexHash},
		"cache_aware's prefix index: the radix trees, or a placement map of token-id heads cut at --cache-boundaries (requests without token ids are load-balanced)").WithMetavar("INDEX")
	fs.Duration("cache-ttl-secs", &ca.CacheTTL, ca.CacheTTL,
		"--cache-index hash: how long a worker stays a holder of a head it was sent")
}

// registerLeastLoadFlags registers least_load's flags into ll.
func registerLeastLoadFlags(fs *cli.FlagSet, ll *leastload.Config) {
	fs.Float("least-load-kv-pressure-weight", &ll.KVPressureWeight, ll.KVPressureWeight,
		"least_load: weight in seconds of the KV-pressure term; 0 removes it")
	fs.Float("least-load-default-throughput", &ll.DefaultThroughput, ll.DefaultThroughput,
		"least_load: generation rate in tokens/s assumed when no worker reports one (the score divides by the fleet's mean reported rate)")
	fs.Int("least-load-mean-prefill-tokens", &ll.MeanPrefillTokens, ll.MeanPrefillTokens,
		"least_load: tokens assumed per request when the real count is unknown")
	fs.Int("least-load-max-waiting-requests", &ll.MaxWaitingRequests, ll.MaxWaitingRequests,
		"least_load: skip a worker whose waiting requests reach this; 0 disables the cap")
}

// registerPrefixHashFlags registers prefix_hash's flags into ph; --cache-boundaries also
// sets ca's, which --cache-index hash cuts heads at.
func registerPrefixHashFlags(fs *cli.FlagSet, ph *prefixhash.Config, ca *cacheaware.Config) {
	fs.Int("prefix-token-count", &ph.PrefixTokenCount, ph.PrefixTokenCount,
		"prefix_hash: leading tokens hashed (4 characters per token for text)")
	fs.Func("cache-boundaries", boundaries(ph.CacheBoundaries), "ascending token positions such as 2048,8192",
		"prefix_hash and --cache-index hash: cut the request head at these token positions", func(v string) error {
			bs, err := parseBoundaries(v)
			if err != nil {
				return err
			}
			ph.CacheBoundaries, ca.CacheBoundaries = bs, bs
			return nil
		}).WithMetavar("POSITIONS")
	fs.Float("prefix-hash-load-factor", &ph.LoadFactor, ph.LoadFactor,
		"prefix_hash: a ring worker is overloaded above this multiple of the mean in-flight count (>= 1)")
	fs.Int("prefix-hash-balance-abs-threshold", &ph.BalanceAbsThreshold, ph.BalanceAbsThreshold,
		"prefix_hash: and above the mean plus this many requests; 0 makes the check purely relative")
}

// registerManualFlags registers manual's flags into cfg.Manual; given explicitly, they set
// the sticky sessions of --routing-key-override too.
func registerManualFlags(fs *cli.FlagSet, cfg *all.Config) {
	mn := &cfg.Manual
	fs.Func("assignment-mode", mn.AssignmentMode, "one of "+strings.Join(sticky.AssignmentModes, ", "),
		"manual and --routing-key-override: how a key without a usable pin gets a worker ("+strings.Join(sticky.AssignmentModes, ", ")+")",
		func(v string) error {
			if err := sticky.ValidateAssignmentMode(v); err != nil {
				return errors.New("not a valid choice")
			}
			mn.AssignmentMode = v
			cfg.Sticky.AssignmentMode = v // given explicitly: sticky sessions follow it too
			return nil
		}).WithMetavar("MODE")
	fs.Func("max-idle-secs", strconv.FormatFloat(mn.MaxIdle.Seconds(), 'f', -1, 64), "a number of seconds such as 14400",
		"manual and --routing-key-override: forget a key unused this many seconds", func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return errors.New("not a non-negative number of seconds")
			}
			mn.MaxIdle = time.Duration(f * float64(time.Second))
			cfg.Sticky.MaxIdle = mn.MaxIdle
			return nil
		}).WithMetavar("SECS")
}

// parseBoundaries parses --cache-boundaries: comma-separated ascending token positions.
func parseBoundaries(v string) ([]int, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var bs []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a token position", f)
		}
		bs = append(bs, n)
	}
	if err := prefixhash.ValidateBoundaries(bs); err != nil {
		return nil, err
	}
	return bs, nil
}

// boundaries shows token positions as --cache-boundaries takes them.
func boundaries(bs []int) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = strconv.Itoa(b)
	}
	return strings.Join(s, ",")
}
