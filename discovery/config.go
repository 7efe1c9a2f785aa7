package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/worker"
)

// Defaults of the spec's flags (service-discovery.md: Parameters, Fleet Scale, Worker
// Startup) and of the loop's timing (How It Works).
const (
	DefaultPort                       = 80
	DefaultWorkerStartupDelay         = 0
	DefaultWorkerStartupCheckInterval = 30 * time.Second
	DefaultWorkerStartupTimeout       = 1800 * time.Second
	DefaultDrainSettle                = 5 * time.Second
	// DefaultDebounce coalesces a burst of watch events into one pass.
	DefaultDebounce = time.Second
	// DefaultResync is the periodic pass from the cache alone.
	DefaultResync = 60 * time.Second
	// DefaultProbeTimeout bounds one startup probe.
	DefaultProbeTimeout = 5 * time.Second
)

// Config configures discovery. Flags fill the first block (cmd/smg); cmd/smg fills
// DrainSettle from --drain-settle-secs and the mesh fields from the mesh flags, because those
// flags belong to other packages.
type Config struct {
	// Enabled is --service-discovery.
	Enabled bool
	// Selector is --selector key=value ...: every pair must match. Required unless a role
	// selector is given.
	Selector []string
	// PrefillSelector, DecodeSelector and EncodeSelector are the PD role selectors.
	PrefillSelector, DecodeSelector, EncodeSelector []string
	// Namespace is --service-discovery-namespace; empty watches all namespaces.
	Namespace string
	// Port is --service-discovery-port (default 80), for pods without smg.ai/worker-ports.
	Port int
	// ModelIDFrom is --model-id-from: namespace, label:<key> or annotation:<key>.
	ModelIDFrom string
	// ModelAliases is --model-alias alias=canonical (repeatable): a worker serving canonical
	// also serves alias.
	ModelAliases []string
	// JobQueueCapacity (default 1000) and JobQueueConcurrency (default 200) size the job queue.
	JobQueueCapacity, JobQueueConcurrency int
	// WorkerStartupDelay (default 0) is waited before the first startup probe.
	WorkerStartupDelay time.Duration
	// WorkerStartupCheckInterval (default 30 s) is the time between startup probes.
	WorkerStartupCheckInterval time.Duration
	// WorkerStartupTimeout (default 1800 s) bounds how long registration waits for the engine.
	WorkerStartupTimeout time.Duration
	// KVConnectorAnnotation (default smg.ai/kv-connector) and KVEngineIDAnnotation (default
	// smg.ai/kv-engine-id) name the vLLM KV annotations.
	KVConnectorAnnotation, KVEngineIDAnnotation string
	// RouterSelector is --router-selector: peer gateway pods for the mesh.
	RouterSelector []string

	// DrainSettle is --drain-settle-secs (default 5 s): how long a Ready worker drains before
	// it is removed. 0 removes at once.
	DrainSettle time.Duration
	// MeshEnabled (--enable-mesh) and MeshPort (--mesh-port) come from the mesh flags.
	MeshEnabled bool
	MeshPort    int

	// Debounce (default 1 s) coalesces watch events; Resync (default 60 s) is the periodic
	// pass. Not flags: tests shorten them.
	Debounce, Resync time.Duration
	// ProbeTimeout bounds one startup probe (default 5 s).
	ProbeTimeout time.Duration
	// ProbeGRPC, when set, is the startup probe's gRPC half: nil once the engine at
	// host:port answers its gRPC HealthCheck. Registration then keeps the protocol that
	// answers, HTTP when both do (spec: Registration Flow); nil probes HTTP only.
	ProbeGRPC func(ctx context.Context, hostPort string) error
	// DiscoverModels asks a registering worker (http:// or grpc:// URL) which models it serves.
	// Nil: worker.DiscoverModels, over HTTP.
	DiscoverModels func(ctx context.Context, url, apiKey string) ([]string, error)
	// Clock drives every wait. Required; DefaultConfig sets clock.Real.
	Clock clock.Clock
	// Metrics receives the smg_discovery_* series. Required; DefaultConfig sets a private set.
	Metrics *metrics.Set
	// Logger is required; DefaultConfig sets slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the spec's defaults, with the real clock, a private metrics set and the
// default logger.
func DefaultConfig() Config {
	return Config{
		Port:                       DefaultPort,
		JobQueueCapacity:           DefaultJobQueueCapacity,
		JobQueueConcurrency:        DefaultJobQueueConcurrency,
		WorkerStartupDelay:         DefaultWorkerStartupDelay,
		WorkerStartupCheckInterval: DefaultWorkerStartupCheckInterval,
		WorkerStartupTimeout:       DefaultWorkerStartupTimeout,
		KVConnectorAnnotation:      DefaultKVConnectorAnnotation,
		KVEngineIDAnnotation:       DefaultKVEngineIDAnnotation,
		DrainSettle:                DefaultDrainSettle,
		Debounce:                   DefaultDebounce,
		Resync:                     DefaultResync,
		ProbeTimeout:               DefaultProbeTimeout,
		Clock:                      clock.Real{},
		Metrics:                    metrics.NewSet(),
		Logger:                     slog.Default(),
	}
}

// Validate reports a setting that cannot work, naming the flag to fix. It checks nothing when
// discovery is off.
func (c *Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	if _, err := c.Mapping(); err != nil {
		return err
	}
	if len(c.Selector) == 0 && !c.pdMode() {
		return fmt.Errorf("--service-discovery needs --selector key=value (or --prefill-selector / --decode-selector in PD mode)")
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("--service-discovery-port %d: give a port from 1 to 65535 (default %d)", c.Port, DefaultPort)
	}
	if _, err := c.aliases(); err != nil {
		return err
	}
	switch {
	case c.JobQueueCapacity < 1:
		return fmt.Errorf("--job-queue-capacity %d: give a positive count, at least the number of discovered workers (default %d)", c.JobQueueCapacity, DefaultJobQueueCapacity)
	case c.JobQueueConcurrency < 1:
		return fmt.Errorf("--job-queue-concurrency %d: give a positive count (default %d)", c.JobQueueConcurrency, DefaultJobQueueConcurrency)
	case c.WorkerStartupDelay < 0 || c.DrainSettle < 0:
		return fmt.Errorf("--worker-startup-delay and --drain-settle-secs must not be negative (0: none)")
	case c.WorkerStartupCheckInterval <= 0:
		return fmt.Errorf("--worker-startup-check-interval %v: give a positive number of seconds (default %v)", c.WorkerStartupCheckInterval.Seconds(), DefaultWorkerStartupCheckInterval.Seconds())
	case c.WorkerStartupTimeout <= 0:
		return fmt.Errorf("--worker-startup-timeout-secs %v: give a positive number of seconds (default %v)", c.WorkerStartupTimeout.Seconds(), DefaultWorkerStartupTimeout.Seconds())
	case c.Debounce <= 0 || c.Resync <= 0 || c.ProbeTimeout <= 0:
		return fmt.Errorf("discovery debounce %v, resync %v and probe timeout %v must be positive: start from discovery.DefaultConfig() (%v, %v, %v)", c.Debounce, c.Resync, c.ProbeTimeout, DefaultDebounce, DefaultResync, DefaultProbeTimeout)
	}
	if err := worker.CheckCollaborators("discovery", c.Clock, c.Metrics, c.Logger); err != nil {
		return err
	}
	for name, v := range map[string]string{"--kv-connector-annotation": c.KVConnectorAnnotation, "--kv-engine-id-annotation": c.KVEngineIDAnnotation} {
		if v == "" || strings.TrimSpace(v) != v {
			return fmt.Errorf("%s %q: give an annotation key without surrounding whitespace (defaults %s, %s)", name, v, DefaultKVConnectorAnnotation, DefaultKVEngineIDAnnotation)
		}
	}
	if len(c.RouterSelector) > 0 {
		if _, err := ParseSelector(c.RouterSelector); err != nil {
			return fmt.Errorf("--router-selector: %w", err)
		}
	}
	return nil
}

func (c *Config) pdMode() bool {
	return len(c.PrefillSelector) > 0 || len(c.DecodeSelector) > 0 || len(c.EncodeSelector) > 0
}

// Mapping builds the pod → worker mapping the flags describe.
func (c *Config) Mapping() (*Mapping, error) {
	m := &Mapping{Port: c.Port, KVConnectorAnnotation: c.KVConnectorAnnotation, KVEngineIDAnnotation: c.KVEngineIDAnnotation}
	var err error
	if m.Selector, err = ParseSelector(c.Selector); err != nil {
		return nil, fmt.Errorf("--selector: %w", err)
	}
	for _, r := range []struct {
		flag string
		in   []string
		out  *Selector
	}{{"--prefill-selector", c.PrefillSelector, &m.Prefill}, {"--decode-selector", c.DecodeSelector, &m.Decode}, {"--encode-selector", c.EncodeSelector, &m.Encode}} {
		if len(r.in) == 0 {
			continue
		}
		if *r.out, err = ParseSelector(r.in); err != nil {
			return nil, fmt.Errorf("%s: %w", r.flag, err)
		}
	}
	if m.ModelID, err = ParseModelIDSource(c.ModelIDFrom); err != nil {
		return nil, err
	}
	return m, nil
}

// WatchSelector is the label selector sent to the API server: --selector, or in PD mode the
// pairs all role selectors share (the exact role match happens locally).
func (c *Config) WatchSelector() (Selector, error) {
	m, err := c.Mapping()
	if err != nil {
		return nil, err
	}
	if !m.PDMode() {
		return m.Selector, nil
	}
	var roles []Selector
	for _, s := range []Selector{m.Encode, m.Prefill, m.Decode} {
		if s != nil {
			roles = append(roles, s)
		}
	}
	return Common(roles...), nil
}

// aliases parses --model-alias into canonical → aliases.
func (c *Config) aliases() (map[string][]string, error) {
	out := map[string][]string{}
	for _, a := range c.ModelAliases {
		alias, canonical, ok := strings.Cut(a, "=")
		alias, canonical = strings.TrimSpace(alias), strings.TrimSpace(canonical)
		if !ok || alias == "" || canonical == "" {
			return nil, fmt.Errorf("invalid --model-alias %q: give alias=canonical, such as gpt-4o=meta-llama/Llama-3.1-8B-Instruct", a)
		}
		out[canonical] = append(out[canonical], alias)
	}
	return out, nil
}
