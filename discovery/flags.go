package discovery

import (
	"github.com/smg-go/smg/internal/cli"
)

// RegisterFlags registers the service discovery flags of the spec on fs, writing into cfg
// (which it first resets to DefaultConfig, keeping nothing). --drain-settle-secs,
// --remove-unhealthy-workers, --enable-mesh and --mesh-port belong to other packages: cmd/smg
// copies them into cfg.
func RegisterFlags(fs *cli.FlagSet, cfg *Config) {
	*cfg = DefaultConfig()
	fs.Bool("service-discovery", &cfg.Enabled, false, "Discover workers from Kubernetes pods")
	fs.StringList("selector", &cfg.Selector, "Label selector of worker pods, key=value pairs that must all match")
	fs.String("service-discovery-namespace", &cfg.Namespace, "", "Namespace to watch (default: all namespaces)")
	fs.Int("service-discovery-port", &cfg.Port, DefaultPort, "Worker port of pods without the smg.ai/worker-ports annotation")
	fs.String("model-id-from", &cfg.ModelIDFrom, "", "Take discovered workers' model id from namespace, label:<key> or annotation:<key>")
	fs.StringList("model-alias", &cfg.ModelAliases, "Extra client-facing model name, alias=canonical (repeatable)")
	fs.Int("job-queue-capacity", &cfg.JobQueueCapacity, DefaultJobQueueCapacity, "Maximum pending control-plane jobs; a reconcile pass waits while the queue is full")
	fs.Int("job-queue-concurrency", &cfg.JobQueueConcurrency, DefaultJobQueueConcurrency, "Maximum control-plane jobs run at once")
	fs.Duration("worker-startup-delay", &cfg.WorkerStartupDelay, DefaultWorkerStartupDelay, "Seconds to wait after a worker is submitted before its first startup probe")
	fs.Duration("worker-startup-check-interval", &cfg.WorkerStartupCheckInterval, DefaultWorkerStartupCheckInterval, "Seconds between startup probes while registration waits for the engine")
	fs.Duration("worker-startup-timeout-secs", &cfg.WorkerStartupTimeout, DefaultWorkerStartupTimeout, "How long registration waits for the engine before the job fails")
	fs.StringList("prefill-selector", &cfg.PrefillSelector, "Label selector of prefill pods (PD mode)")
	fs.StringList("decode-selector", &cfg.DecodeSelector, "Label selector of decode pods (PD mode)")
	fs.StringList("encode-selector", &cfg.EncodeSelector, "Label selector of encode pods (EPD mode)")
	fs.String("kv-connector-annotation", &cfg.KVConnectorAnnotation, DefaultKVConnectorAnnotation, "Pod annotation that names the vLLM KV connector")
	fs.String("kv-engine-id-annotation", &cfg.KVEngineIDAnnotation, DefaultKVEngineIDAnnotation, "Pod annotation that lists the vLLM KV engine ids")
	fs.StringList("router-selector", &cfg.RouterSelector, "Label selector of peer gateway pods for the mesh (needs --enable-mesh)")
}
