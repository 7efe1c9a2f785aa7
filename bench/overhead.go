package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/telemetry/trace/tracetest"
)

// OverheadConfig configures the overhead suite. Start from DefaultOverheadConfig, which sets
// every default; a zero means zero (no warm-up, no retries, rows skipped) where a field says so.
type OverheadConfig struct {
	Bin Binaries
	// Duration of each measured run. Default 3 s.
	Duration time.Duration
	// Rounds: every proxy is measured this many times, the proxies alternating within a
	// round, and the round with the least proxy CPU per request is kept (other processes'
	// interference only adds cost, so the minimum is the least disturbed estimate; for the
	// direct run, the round with the most requests/s). Default 3.
	Rounds int
	// Connections is the closed-loop client count. Default 32.
	Connections int
	// Workers is the mock fleet size. Default 4 (the foundation issue's setup).
	Workers int
	// Policies are the gateway --policy values measured, one row each. Default cache_aware
	// (the goal is stated for it) and round_robin (what the peers do).
	Policies []string
	// ProxyCore runs the proxy under test; LoadCore runs the load generator and the mock
	// workers. Defaults 0 and 1 (docs/benchmarks.md).
	ProxyCore, LoadCore int
	// Warmup requests before each measured run. Default 2,000.
	Warmup int
	// StreamTokens is the SSE events per streamed request; StreamIntervalMS spaces them at the
	// mock so that each event is its own read and write. Defaults 32 and 1 ms. StreamTokens < 0
	// skips the streamed runs (so does 0).
	StreamTokens     int
	StreamIntervalMS float64
	// Paced SSE rows: the same streams with the tokens PacedIntervalMS apart at the mock (a
	// fleet of its own), as a real engine's inter-token latency spaces them, so that every
	// proxy reads and writes each event on its own. A stream then lasts StreamTokens ×
	// PacedIntervalMS, so the closed loop needs many more connections to relay thousands of
	// events per run. PacedRounds 0 is as many as Rounds; < 0 skips the paced rows (the smoke
	// does), as does StreamTokens ≤ 0. Defaults: 20 ms, 256 connections, 4 s per run after
	// PacedWarmup streams (0: PacedConnections, one per connection). The bare fasthttp
	// proxy is not measured (it does not stream: its row says so).
	PacedRounds      int
	PacedIntervalMS  float64
	PacedConnections int
	PacedDuration    time.Duration
	PacedWarmup      int
	// Peers maps "nginx" and "haproxy" to their programs (EnsurePeers); a missing one gets a
	// "not installed" row.
	Peers map[string]string
	// PDRounds is the rounds of the PD rows (one prefill and one decode mock; loadgen
	// straight to both, then through `smg --pd-disaggregation`). 0 is as many as Rounds; < 0 skips
	// them. PDPolicy is the gateway's --policy there, default round_robin. PDSkipSSE leaves
	// out the streamed PD runs (the smoke does).
	PDRounds  int
	PDPolicy  string
	PDSkipSSE bool
	// WorkDir receives the loadgen results and the peers' configurations. Default a
	// temporary directory, removed afterwards.
	WorkDir string

	// The rows of the data plane's other targets, each with every proxy of the run:
	//
	// Open loop: loadgen sends OpenLoopRate non-streamed requests a second, evenly spaced
	// (--arrival constant, at most 64 in flight), for OpenLoopDuration after Warmup
	// requests; OpenLoopRounds rounds, the least proxy CPU kept. Defaults 2,000 req/s, 5 s,
	// 2 rounds; OpenLoopRounds ≤ 0 skips them.
	OpenLoopRate     float64
	OpenLoopDuration time.Duration
	OpenLoopRounds   int
	// Unloaded stream: one stream at a time of UnloadedTokens events PacedIntervalMS apart at
	// the mock, for UnloadedDuration; a proxy's added TTFB is its TTFT p50 minus the direct
	// run's. UnloadedRounds rounds, the lowest TTFT p50 kept. Defaults 4 tokens, 3 s, 2
	// rounds; ≤ 0 skips them.
	UnloadedTokens   int
	UnloadedDuration time.Duration
	UnloadedRounds   int
	// System calls: the JSON closed loop (and the paced SSE one when the paced rows run)
	// again, with `perf stat -e raw_syscalls:sys_enter -p <proxy>` counting every system
	// call of the proxy over the whole load, warm-up included; SyscallRounds rounds, the
	// fewest calls kept. Default 1; ≤ 0 skips them; without perf (Perf, default looked up on
	// PATH; "" none) the rows say so.
	SyscallRounds int
	Perf          string
	// Scaling: the JSON closed loop through each proxy on ProxyCore alone (GOMAXPROCS=1, one
	// nginx worker, one HAProxy thread) and on ProxyCore and LoadCore together (GOMAXPROCS=2,
	// so two event loops; two nginx workers; two HAProxy threads), the load generator and
	// the mocks staying on LoadCore. ScalingRounds rounds, the least CPU kept. Default 2;
	// ≤ 0 skips them.
	ScalingRounds int
	// Tracing: the JSON closed loop through smg (the first policy) as is and with
	// `--enable-trace --trace-sample-ratio 1`, every request's spans exported over OTLP/gRPC
	// to a receiver in this process; TracingRounds rounds, the least CPU kept. Default 2;
	// ≤ 0 skips them.
	TracingRounds int
	// StealRetries: a row whose every round had more hypervisor steal than stealLimit (10%)
	// is measured again up to this many times, until a round below it (keepBest). Default 2;
	// ≤ 0 never.
	StealRetries int

	// proxyAt overrides where the proxies run (the scaling rows); zero: ProxyCore alone.
	proxyAt placement
}

// DefaultOverheadConfig returns the suite's defaults (each field says its own), perf looked
// up on PATH. Start from it: Validate refuses the zeros that make no sense. PDRounds and
// PacedRounds 0 (as many as Rounds) and PacedWarmup 0 (one stream per paced connection) are
// derived when the suite runs.
func DefaultOverheadConfig() OverheadConfig {
	perf, _ := exec.LookPath("perf")
	return OverheadConfig{
		Duration: 3 * time.Second, Rounds: 3, Connections: 32, Workers: 4,
		Policies: []string{"cache_aware", "round_robin"}, ProxyCore: 0, LoadCore: 1, Warmup: 2000,
		StreamTokens: 32, StreamIntervalMS: 1,
		PacedIntervalMS: 20, PacedConnections: 256, PacedDuration: 4 * time.Second,
		PDPolicy:     "round_robin",
		OpenLoopRate: 2000, OpenLoopDuration: 5 * time.Second, OpenLoopRounds: 2,
		UnloadedTokens: 4, UnloadedDuration: 3 * time.Second, UnloadedRounds: 2,
		SyscallRounds: 1, Perf: perf, ScalingRounds: 2, TracingRounds: 2, StealRetries: 2,
	}
}

// derive sets the zeros whose meaning depends on other fields (see DefaultOverheadConfig).
func (c *OverheadConfig) derive() {
	if c.PDRounds == 0 {
		c.PDRounds = c.Rounds
	}
	if c.PacedRounds == 0 {
		c.PacedRounds = c.Rounds
	}
	if c.PacedWarmup == 0 {
		c.PacedWarmup = c.PacedConnections
	}
}

// Validate reports configuration errors (after derive), each saying how to fix it; a Config
// not built from DefaultOverheadConfig fails here on its zero fields.
func (c *OverheadConfig) Validate() error {
	var errs []error
	const start = " (start from bench.DefaultOverheadConfig())"
	if c.Duration < time.Second {
		errs = append(errs, fmt.Errorf("overhead duration %v: use at least 1s so CPU time (10 ms ticks) is measurable"+start, c.Duration))
	}
	if c.Rounds < 1 {
		errs = append(errs, fmt.Errorf("overhead rounds %d: use at least 1"+start, c.Rounds))
	}
	if c.Connections < 1 || c.Workers < 1 || c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("overhead connections %d, workers %d, warmup %d: use connections and workers ≥ 1, warmup ≥ 0"+start, c.Connections, c.Workers, c.Warmup))
	}
	if len(c.Policies) == 0 {
		errs = append(errs, errors.New("overhead policies: name at least one gateway --policy"+start))
	}
	if c.PDRounds > 0 && c.PDPolicy == "" {
		errs = append(errs, errors.New("overhead PD policy empty: name the PD rows' gateway --policy"+start))
	}
	if c.ProxyCore == c.LoadCore && c.ProxyCore >= 0 {
		errs = append(errs, fmt.Errorf("proxy core and load core are both %d: give the proxy a core of its own", c.ProxyCore))
	}
	if c.StreamTokens > 0 && !(c.StreamIntervalMS > 0) {
		errs = append(errs, fmt.Errorf("stream interval %v ms: use a positive interval"+start, c.StreamIntervalMS))
	}
	if c.paced() {
		if !(c.PacedIntervalMS > 0) || c.PacedConnections < 1 || c.PacedWarmup < 0 {
			errs = append(errs, fmt.Errorf("paced interval %v ms, connections %d, warmup %d: use a positive interval, connections ≥ 1, warmup ≥ 0"+start,
				c.PacedIntervalMS, c.PacedConnections, c.PacedWarmup))
		} else if stream := c.pacedStream(); c.PacedDuration < 2*stream || c.PacedDuration < time.Second {
			errs = append(errs, fmt.Errorf("paced duration %v: use at least 1s and two streams' length (%d tokens × %v ms = %v each)",
				c.PacedDuration, c.StreamTokens, c.PacedIntervalMS, stream))
		}
	}
	if c.OpenLoopRounds > 0 && (c.OpenLoopRate <= 0 || c.OpenLoopDuration < time.Second) {
		errs = append(errs, fmt.Errorf("open loop at %v req/s for %v: use a positive rate and at least 1s"+start, c.OpenLoopRate, c.OpenLoopDuration))
	}
	if c.UnloadedRounds > 0 && c.StreamTokens > 0 && (c.UnloadedTokens < 1 || c.UnloadedDuration < time.Second) {
		errs = append(errs, fmt.Errorf("unloaded streams of %d tokens for %v: use at least 1 token and 1s"+start, c.UnloadedTokens, c.UnloadedDuration))
	}
	return errors.Join(errs...)
}

// paced reports whether the paced SSE rows run.
func (c *OverheadConfig) paced() bool { return c.PacedRounds > 0 && c.StreamTokens > 0 }

// pacedStream is how long a paced stream lasts at the mock.
func (c *OverheadConfig) pacedStream() time.Duration {
	return time.Duration(float64(c.StreamTokens) * c.PacedIntervalMS * float64(time.Millisecond))
}

// Measurement is one closed-loop run of the overhead suite.
type Measurement struct {
	// Key identifies the proxy in metric names: direct, smg-evloop-<policy> (the gateway's
	// rows keep the name they had beside the fasthttp plane's smg-<policy>, since
	// removed, so that the baselines and the history read on; smg-<policy> is the PD
	// gateway's), bare, nginx, haproxy.
	Key  string `json:"key"`
	Name string `json:"name"`
	// NotInstalled explains a row that was not measured (a peer not installed, a proxy that
	// does not fit the run); every other field is then zero.
	NotInstalled string  `json:"not_installed,omitempty"`
	RPS          float64 `json:"requests_per_s"`
	P50MS        float64 `json:"p50_ms"`
	P99MS        float64 `json:"p99_ms"`
	// TTFT of streamed runs (first content event).
	TTFTP50MS float64 `json:"ttft_p50_ms,omitempty"`
	TTFTP99MS float64 `json:"ttft_p99_ms,omitempty"`
	// ITL of streamed runs: the gaps between content events as loadgen saw them.
	ITLP50MS  float64 `json:"itl_p50_ms,omitempty"`
	ITLP99MS  float64 `json:"itl_p99_ms,omitempty"`
	Completed int64   `json:"completed"`
	Failed    int64   `json:"failed"`
	// ProxyCPUS is the proxy's CPU seconds over the run, warm-up included (0 for direct).
	ProxyCPUS float64 `json:"proxy_cpu_s"`
	// CPUPerRequestUS is ProxyCPUS per request (warm-up included in both), µs.
	CPUPerRequestUS float64 `json:"proxy_cpu_us_per_request"`
	// CPUPerEventUS is ProxyCPUS per SSE content event, µs (streamed runs; each stream also
	// carries a usage event and [DONE], the same for every proxy).
	CPUPerEventUS float64 `json:"proxy_cpu_us_per_event,omitempty"`
	// Syscalls is the proxy's system calls over the run (system-call rows), per request
	// (warm-up included, like the CPU) and per SSE content event.
	Syscalls           int64   `json:"syscalls,omitempty"`
	SyscallsPerRequest float64 `json:"syscalls_per_request,omitempty"`
	SyscallsPerEvent   float64 `json:"syscalls_per_event,omitempty"`
	// Cores the proxy had (scaling rows).
	Cores int `json:"cores,omitempty"`
	// StealPct is the share of the proxy's and the load core's time the hypervisor stole
	// over the run, in percent (steal.go): above a few percent the row measured the machine.
	StealPct float64 `json:"steal_pct"`
}

// OverheadResult is the suite's outcome: one non-streamed, one streamed and one paced
// streamed run per proxy.
type OverheadResult struct {
	Config OverheadConfig `json:"config"`
	JSON   []Measurement  `json:"json"`
	SSE    []Measurement  `json:"sse,omitempty"`
	// SSEPaced holds the paced SSE rows (OverheadConfig.PacedRounds); nil when skipped.
	SSEPaced []Measurement `json:"sse_paced,omitempty"`
	// PD holds the prefill-decode rows; nil when skipped.
	PD *PDOverhead `json:"pd,omitempty"`
	// JSONOpen holds the open-loop rows (OverheadConfig.OpenLoopRate), SSEUnloaded the
	// unloaded paced-stream rows, Syscalls the system-call rows and Scaling the 1- and
	// 2-core rows (two per proxy); nil when skipped.
	JSONOpen    []Measurement `json:"json_open,omitempty"`
	SSEUnloaded []Measurement `json:"sse_unloaded,omitempty"`
	Syscalls    *SyscallRows  `json:"syscalls,omitempty"`
	Scaling     []Measurement `json:"scaling,omitempty"`
	// Tracing holds the tracing rows: smg untraced (its usual key), then traced (the key
	// with tracedSuffix); nil when skipped.
	Tracing []Measurement `json:"tracing,omitempty"`
}

// SyscallRows are the system-call rows: the JSON closed loop, and the paced SSE one.
type SyscallRows struct {
	JSON     []Measurement `json:"json"`
	SSEPaced []Measurement `json:"sse_paced,omitempty"`
}

// PDOverhead is the PD rows: key "direct" is loadgen straight to the prefill and decode
// mocks (SGLang's mini load balancer's part), "smg-<PDPolicy>" the gateway in PD mode.
type PDOverhead struct {
	JSON []Measurement `json:"json"`
	SSE  []Measurement `json:"sse,omitempty"`
}

// find returns the measurement with key, or nil.
func find(ms []Measurement, key string) *Measurement {
	for i := range ms {
		if ms[i].Key == key && ms[i].NotInstalled == "" {
			return &ms[i]
		}
	}
	return nil
}

var listenLine = regexp.MustCompile(`listening on (http://\S+)`)

// grpcListenLine is a mockworker --protocol grpc worker's ready line.
var grpcListenLine = regexp.MustCompile(`listening on (grpc://\S+)`)

// proxyUnderTest starts one proxy over the worker URLs and returns it with its base URL.
type proxyUnderTest struct {
	key, name string
	start     func(urls []string) (*proc, string, error)
}

// Overhead runs the suite: mocks on LoadCore; loadgen straight to a mock, then through each
// proxy alone on ProxyCore, non-streamed and streamed.
func Overhead(cfg OverheadConfig) (*OverheadResult, error) {
	cfg.derive()
	cleanup, err := prepareSuite(cfg.Validate, &cfg.WorkDir, "smg-bench-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &OverheadResult{Config: cfg}
	// One fleet serves both kinds of run: instant mode answers non-streamed requests at once
	// and paces only streams by --token-interval-ms.
	mocks, urls, err := cfg.startMocks(cfg.StreamIntervalMS)
	if err != nil {
		return nil, err
	}
	defer mocks.stop()

	// Straight to one mock worker: the mocks answer instantly, so one absorbs the whole load.
	// A run that fails is reported and the suite goes on, so one broken proxy does not hide
	// the others' figures; its row is missing and the gates that need it are skipped, while
	// the error makes smgbench fail.
	var errs []error
	runs := append([]proxyUnderTest{directRun}, cfg.proxies()...)
	for _, l := range cfg.loads() {
		ms, err := cfg.measureRounds(runs, urls, l, cfg.Rounds)
		if err != nil {
			errs = append(errs, err)
		}
		if l.stream {
			res.SSE = ms
		} else {
			res.JSON = ms
		}
	}
	if cfg.OpenLoopRounds > 0 {
		ms, err := cfg.measureRounds(runs, urls, cfg.openLoad(), cfg.OpenLoopRounds)
		res.JSONOpen = ms
		if err != nil {
			errs = append(errs, fmt.Errorf("open loop: %w", err))
		}
	}
	if cfg.SyscallRounds > 0 {
		res.Syscalls = &SyscallRows{}
		var err error
		if res.Syscalls.JSON, err = cfg.measureSyscalls(urls, cfg.regularLoad(false)); err != nil {
			errs = append(errs, fmt.Errorf("system calls: %w", err))
		}
	}
	if cfg.ScalingRounds > 0 {
		ms, err := cfg.overheadScaling(urls)
		res.Scaling = ms
		if err != nil {
			errs = append(errs, fmt.Errorf("scaling: %w", err))
		}
	}
	if cfg.TracingRounds > 0 {
		ms, err := cfg.overheadTracing(urls)
		res.Tracing = ms
		if err != nil {
			errs = append(errs, fmt.Errorf("tracing: %w", err))
		}
	}
	if cfg.paced() || cfg.unloaded() {
		if err := cfg.overheadPaced(res); err != nil {
			errs = append(errs, fmt.Errorf("paced SSE: %w", err))
		}
	}
	if cfg.PDRounds > 0 {
		pd, err := cfg.overheadPD()
		res.PD = pd
		if err != nil {
			errs = append(errs, fmt.Errorf("PD: %w", err))
		}
	}
	return res, errors.Join(errs...)
}

var directRun = proxyUnderTest{key: "direct", name: "direct to a mock worker"}

// measureRounds measures every run of runs rounds times under load l, the runs alternating
// within a round, and returns the least disturbed round of each (keepBest), in runs' order.
// A failed run is an error and leaves the others' figures.
func (cfg *OverheadConfig) measureRounds(runs []proxyUnderTest, urls []string, l load, rounds int) ([]Measurement, error) {
	return cfg.keepBest(runs, l, rounds, func(p proxyUnderTest) (Measurement, error) {
		if p.key == "direct" {
			return cfg.drive(Measurement{Key: p.key, Name: p.name}, "", baseURLArgs(urls[0]), nil, l)
		}
		return cfg.measureProxy(p, urls, l)
	})
}

// keepBest measures every run rounds times, the runs alternating within a round, and keeps
// each run's least disturbed round (load.better). A run whose kept round had more steal than
// stealLimit is then measured again, up to StealRetries times, until a round below it: a
// stretch of the host's steal lasts seconds to minutes, so a later round usually escapes it
// (the gate does not judge a stolen row, Baseline.Check).
func (cfg *OverheadConfig) keepBest(runs []proxyUnderTest, l load, rounds int, measure func(proxyUnderTest) (Measurement, error)) ([]Measurement, error) {
	var errs []error
	best := map[string]Measurement{}
	try := func(p proxyUnderTest, what string) {
		m, err := measure(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		if b, ok := best[p.key]; !ok || l.better(m, b) {
			best[p.key] = m
		}
	}
	for round := range rounds {
		for _, p := range runs {
			try(p, fmt.Sprintf("round %d", round+1))
		}
	}
	for _, p := range runs {
		for retry := 1; retry <= cfg.StealRetries; retry++ {
			if b, ok := best[p.key]; !ok || b.NotInstalled != "" || b.StealPct <= stealLimit {
				break
			}
			try(p, fmt.Sprintf("steal retry %d", retry))
		}
	}
	var ms []Measurement
	for _, p := range runs {
		if m, ok := best[p.key]; ok {
			ms = append(ms, m)
		}
	}
	return ms, errors.Join(errs...)
}

// startMocks starts the suite's instant mock fleet on the load core, its streams writing a
// token every intervalMS, and returns it with its workers' URLs.
func (cfg *OverheadConfig) startMocks(intervalMS float64) (*proc, []string, error) {
	return startListening(pinned(cfg.LoadCore), cfg.Bin.MockWorker, listenLine, cfg.Workers, 10*time.Second,
		"--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(cfg.Workers),
		"--model", "mock-model", "--event-loops", "1", "--token-interval-ms", strconv.FormatFloat(intervalMS, 'f', -1, 64))
}

// overheadPaced measures the rows of the paced fleet (its streams write a token every
// PacedIntervalMS): the paced SSE rows and their system calls, and the unloaded stream rows,
// loadgen straight to one mock and through each proxy but the bare one, which buffers whole
// answers and so has no per-event cost or first byte to compare.
func (cfg *OverheadConfig) overheadPaced(res *OverheadResult) error {
	mocks, urls, err := cfg.startMocks(cfg.PacedIntervalMS)
	if err != nil {
		return err
	}
	defer mocks.stop()
	runs := []proxyUnderTest{directRun}
	for _, p := range cfg.proxies() {
		if p.key != "bare" {
			runs = append(runs, p)
		}
	}
	var errs []error
	if cfg.paced() {
		ms, err := cfg.measureRounds(runs, urls, cfg.pacedLoad(), cfg.PacedRounds)
		res.SSEPaced = withSkippedBare(ms)
		errs = append(errs, err)
		if cfg.SyscallRounds > 0 {
			if res.Syscalls == nil {
				res.Syscalls = &SyscallRows{}
			}
			ms, err := cfg.measureSyscalls(urls, cfg.pacedLoad())
			res.Syscalls.SSEPaced = withSkippedBare(ms)
			errs = append(errs, err)
		}
	}
	if cfg.unloaded() {
		ms, err := cfg.measureRounds(runs, urls, cfg.unloadedLoad(), cfg.UnloadedRounds)
		res.SSEUnloaded = withSkippedBare(ms)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unloaded reports whether the unloaded stream rows run.
func (c *OverheadConfig) unloaded() bool { return c.UnloadedRounds > 0 && c.StreamTokens > 0 }

// measureSyscalls runs load l through every proxy (the bare one but for JSON) with the
// proxy's system calls counted, SyscallRounds times, the fewest kept.
func (cfg *OverheadConfig) measureSyscalls(urls []string, l load) ([]Measurement, error) {
	var runs []proxyUnderTest
	for _, p := range cfg.proxies() {
		if !l.stream || p.key != "bare" {
			runs = append(runs, p)
		}
	}
	if cfg.Perf == "" {
		ms := make([]Measurement, len(runs))
		for i, p := range runs {
			ms[i] = Measurement{Key: p.key, Name: p.name, NotInstalled: "not measured: perf is not installed"}
		}
		return ms, nil
	}
	l.kind, l.countSyscalls = l.kind+"-syscalls", true
	return cfg.measureRounds(runs, urls, l, cfg.SyscallRounds)
}

// overheadScaling measures the JSON closed loop through every proxy on one core, then on
// two (ProxyCore and LoadCore), the first policy's smg rows only.
func (cfg *OverheadConfig) overheadScaling(urls []string) ([]Measurement, error) {
	var ms []Measurement
	var errs []error
	for _, cores := range []int{1, 2} {
		c := *cfg
		c.Policies = cfg.Policies[:1]
		c.proxyAt = pinned(cfg.ProxyCore)
		if cores == 2 {
			c.proxyAt = placement{cpus: fmt.Sprintf("%d,%d", cfg.ProxyCore, cfg.LoadCore), procs: 2}
		}
		l := cfg.regularLoad(false)
		l.kind = fmt.Sprintf("json-%dcore", cores)
		got, err := c.measureRounds(c.proxies(), urls, l, cfg.ScalingRounds)
		errs = append(errs, err)
		for i := range got {
			got[i].Cores = cores
		}
		ms = append(ms, got...)
	}
	return ms, errors.Join(errs...)
}

// tracedSuffix ends the key of a traced gateway row.
const tracedSuffix = "-traced"

// overheadTracing measures the JSON closed loop through smg (the first policy) untraced and
// traced, every request sampled and its spans exported to a receiver in this process, which
// must get them: a run whose spans did not arrive measured nothing of tracing.
func (cfg *OverheadConfig) overheadTracing(urls []string) ([]Measurement, error) {
	rcv, stop, err := tracetest.Listen(tracetest.Options{CountOnly: true})
	if err != nil {
		return nil, err
	}
	defer stop()
	policy := cfg.Policies[0]
	key := "smg-evloop-" + policy
	runs := []proxyUnderTest{
		{key, "smg (" + policy + "), tracing off", func(urls []string) (*proc, string, error) {
			return cfg.startSMG(policy, urls, "--disable-load-monitoring")
		}},
		{key + tracedSuffix, "smg (" + policy + "), --enable-trace --trace-sample-ratio 1", func(urls []string) (*proc, string, error) {
			return cfg.startSMG(policy, urls, "--disable-load-monitoring",
				"--enable-trace", "--trace-sample-ratio", "1", "--otlp-traces-endpoint", rcv.Addr())
		}},
	}
	l := cfg.regularLoad(false)
	l.kind = "json-tracing"
	ms, err := cfg.measureRounds(runs, urls, l, cfg.TracingRounds)
	if err == nil && rcv.Received() == 0 {
		err = errors.New("no span reached the OTLP receiver from the traced gateway")
	}
	return ms, err
}

// bareSkipped is the paced table's bare-proxy row.
const bareSkipped = "not measured: buffers whole answers, does not stream"

// withSkippedBare puts the bare proxy's "not measured" row after the smg rows, where the
// other runs have it.
func withSkippedBare(ms []Measurement) []Measurement {
	out := make([]Measurement, 0, len(ms)+1)
	added := false
	for _, m := range ms {
		if !added && m.Key != "direct" && !strings.HasPrefix(m.Key, "smg-") {
			out = append(out, Measurement{Key: "bare", Name: "bare fasthttp proxy", NotInstalled: bareSkipped})
			added = true
		}
		out = append(out, m)
	}
	if !added {
		out = append(out, Measurement{Key: "bare", Name: "bare fasthttp proxy", NotInstalled: bareSkipped})
	}
	return out
}

// load is one kind of run; kind names its result files.
type load struct {
	kind        string // "json", "sse", "sse_paced", "json_open", "sse_unloaded", …
	stream      bool
	connections int // closed loop: clients; open loop: the cap on requests in flight
	duration    time.Duration
	warmup      int
	// rate > 0 makes an open loop of that many requests a second, evenly spaced.
	rate float64
	// tokens per stream; 0: StreamTokens.
	tokens int
	// byTTFT keeps the round with the lowest TTFT p50 (the unloaded rows), not the least CPU.
	byTTFT bool
	// countSyscalls counts the proxy's system calls over the run (perf stat).
	countSyscalls bool
}

// better reports whether round a is a less disturbed measurement than round b: a round the
// host stole at most stealLimit from beats one it stole more from; then less proxy CPU per
// request (fewer system calls for the system-call rows, a lower TTFT p50 for the unloaded
// rows), or for the direct run (no proxy) more requests/s.
func (l load) better(a, b Measurement) bool {
	if aStolen, bStolen := a.StealPct > stealLimit, b.StealPct > stealLimit; aStolen != bStolen {
		return bStolen
	}
	switch {
	case l.byTTFT:
		return a.TTFTP50MS < b.TTFTP50MS
	case l.countSyscalls:
		return a.Syscalls < b.Syscalls
	}
	return better(a, b)
}

// streamTokens is the events per stream of load l.
func (cfg *OverheadConfig) streamTokens(l load) int {
	if l.tokens > 0 {
		return l.tokens
	}
	return cfg.StreamTokens
}

// loads are the regular runs: non-streamed, then streamed unless StreamTokens ≤ 0.
func (cfg *OverheadConfig) loads() []load {
	ls := []load{cfg.regularLoad(false)}
	if cfg.StreamTokens > 0 {
		ls = append(ls, cfg.regularLoad(true))
	}
	return ls
}

func (cfg *OverheadConfig) regularLoad(stream bool) load {
	l := load{kind: "json", stream: stream, connections: cfg.Connections, duration: cfg.Duration, warmup: cfg.Warmup}
	if stream {
		l.kind = "sse"
	}
	return l
}

func (cfg *OverheadConfig) pacedLoad() load {
	return load{kind: "sse_paced", stream: true, connections: cfg.PacedConnections, duration: cfg.PacedDuration, warmup: cfg.PacedWarmup}
}

// openLoad is the open loop: OpenLoopRate requests a second after the regular warm-up (a
// closed loop of 64 clients).
func (cfg *OverheadConfig) openLoad() load {
	return load{kind: "json_open", connections: 64, duration: cfg.OpenLoopDuration, warmup: cfg.Warmup, rate: cfg.OpenLoopRate}
}

// unloadedLoad is one paced stream at a time, after a few warm-up streams.
func (cfg *OverheadConfig) unloadedLoad() load {
	return load{kind: "sse_unloaded", stream: true, connections: 1, duration: cfg.UnloadedDuration, warmup: 5, tokens: cfg.UnloadedTokens, byTTFT: true}
}

// pdLine is a PD mock's startup line: its URL and its rendezvous' bootstrap port.
var pdLine = regexp.MustCompile(`listening on (http://\S+) \(.*bootstrap port (\d+)\)`)

// startPDMock starts one instant mock worker of a PD or EPD fleet on core, in role, its
// rendezvous asking bootstrapPort ("0": its own), and returns it with its URL and its
// rendezvous' bootstrap port.
func startPDMock(core int, bin, role, bootstrapPort string, extra ...string) (p *proc, url, port string, err error) {
	args := append([]string{"--host", "127.0.0.1", "--port", "0", "--model", "mock-model", "--event-loops", "1",
		"--role", role, "--bootstrap-port", bootstrapPort}, extra...)
	if p, _, err = startListening(pinned(core), bin, pdLine, 1, 10*time.Second, args...); err != nil {
		return nil, "", "", err
	}
	m := pdLine.FindStringSubmatch(p.out.String())
	return p, m[1], m[2], nil
}

// overheadPD measures the PD rows: a prefill and a decode mock (instant, on LoadCore, the
// decode asking the prefill's rendezvous), then per round loadgen straight to both and
// loadgen through smg --pd-disaggregation alone on ProxyCore.
func (cfg *OverheadConfig) overheadPD() (*PDOverhead, error) {
	interval := strconv.FormatFloat(cfg.StreamIntervalMS, 'f', -1, 64)
	prefill, prefillURL, port, err := startPDMock(cfg.LoadCore, cfg.Bin.MockWorker, "prefill", "0", "--token-interval-ms", interval)
	if err != nil {
		return nil, err
	}
	defer prefill.stop()
	decode, decodeURL, _, err := startPDMock(cfg.LoadCore, cfg.Bin.MockWorker, "decode", port, "--token-interval-ms", interval)
	if err != nil {
		return nil, err
	}
	defer decode.stop()

	res := &PDOverhead{}
	direct := proxyUnderTest{key: "direct", name: "loadgen straight to prefill + decode"}
	gateway := proxyUnderTest{key: "smg-" + cfg.PDPolicy, name: "smg PD (" + cfg.PDPolicy + ")"}
	modes := cfg.loads()
	if cfg.PDSkipSSE {
		modes = modes[:1]
	}
	var errs []error
	for _, l := range modes {
		ms, err := cfg.keepBest([]proxyUnderTest{direct, gateway}, l, cfg.PDRounds, func(p proxyUnderTest) (Measurement, error) {
			m := Measurement{Key: p.key, Name: p.name}
			if p.key == "direct" {
				return cfg.drive(m, "pd-", []string{"--pd-prefill", prefillURL, "--pd-bootstrap-port", port, "--pd-decode", decodeURL}, nil, l)
			}
			return cfg.measurePDGateway(m, prefillURL, port, decodeURL, l)
		})
		if err != nil {
			errs = append(errs, err)
		}
		if l.stream {
			res.SSE = append(res.SSE, ms...)
		} else {
			res.JSON = append(res.JSON, ms...)
		}
	}
	return res, errors.Join(errs...)
}

// measurePDGateway runs one PD measurement through a fresh smg --pd-disaggregation.
func (cfg *OverheadConfig) measurePDGateway(m Measurement, prefillURL, port, decodeURL string, l load) (Measurement, error) {
	pr, base, err := launchSMG(cfg.ProxyCore, cfg.Bin.SMG, cfg.PDPolicy,
		[]string{"--pd-disaggregation", "--prefill", prefillURL, port, "--decode", decodeURL}, "--disable-load-monitoring")
	if err != nil {
		return m, err
	}
	defer pr.stop()
	return cfg.drive(m, "pd-", baseURLArgs(base), pr, l)
}

// baseURLArgs are loadgen's arguments to send to the server at base.
func baseURLArgs(base string) []string { return []string{"--base-url", base + "/v1"} }

// better compares two rounds by cost alone (load.better first compares their steal): less
// proxy CPU per request, or for the direct run (no proxy) more requests/s.
func better(a, b Measurement) bool {
	if a.Key == "direct" {
		return a.RPS > b.RPS
	}
	return a.CPUPerRequestUS < b.CPUPerRequestUS
}

// proxies lists the gateway (one per policy), the bare fasthttp proxy and the peers.
func (cfg *OverheadConfig) proxies() []proxyUnderTest {
	var ps []proxyUnderTest
	for _, policy := range cfg.Policies {
		ps = append(ps, proxyUnderTest{"smg-evloop-" + policy, "smg (" + policy + ")", func(urls []string) (*proc, string, error) {
			return cfg.startSMG(policy, urls, "--disable-load-monitoring")
		}})
	}
	ps = append(ps, proxyUnderTest{"bare", "bare fasthttp proxy", func(urls []string) (*proc, string, error) {
		p, u, err := startListening(cfg.proxyPlacement(), cfg.Bin.BareProxy, listenLine, 1, 10*time.Second,
			"--listen", "127.0.0.1:0", "--workers", strings.Join(urls, ","))
		if err != nil {
			return nil, "", err
		}
		return p, u[0], nil
	}})
	for _, peer := range []struct {
		key   string
		start func(program, workDir string, pl placement, port int, workers []string) (*proc, error)
	}{{"nginx", startNginx}, {"haproxy", startHAProxy}} {
		ps = append(ps, proxyUnderTest{peer.key, peer.key, func(urls []string) (*proc, string, error) {
			program := cfg.Peers[peer.key]
			if program == "" {
				return nil, "", errNotInstalled
			}
			port, err := freePort()
			if err != nil {
				return nil, "", err
			}
			p, err := peer.start(program, cfg.WorkDir, cfg.proxyPlacement(), port, hostPorts(urls))
			if err != nil {
				return nil, "", err
			}
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			if err := waitHTTP(base, 10*time.Second); err != nil {
				p.stop()
				return nil, "", fmt.Errorf("%s: %w\n%s", peer.key, err, tail(p.out.String()))
			}
			return p, base, nil
		}})
	}
	return ps
}

var errNotInstalled = errors.New("not installed")

// startSMG launches the gateway on ProxyCore in front of urls.
func (cfg *OverheadConfig) startSMG(policy string, urls []string, extra ...string) (*proc, string, error) {
	return launchSMGAt(cfg.proxyPlacement(), cfg.Bin.SMG, policy, workerURLArgs(urls), extra...)
}

// proxyPlacement is where the proxies run: ProxyCore alone unless the scaling rows say.
func (cfg *OverheadConfig) proxyPlacement() placement {
	if cfg.proxyAt.cpus != "" {
		return cfg.proxyAt
	}
	return pinned(cfg.ProxyCore)
}

// workerURLArgs are smg's arguments for a regular fleet.
func workerURLArgs(urls []string) []string { return append([]string{"--worker-urls"}, urls...) }

// launchSMG starts `smg launch` on core with the given policy and workers (workerArgs: e.g.
// workerURLArgs, or the PD flags) and waits until it answers.
func launchSMG(core int, bin, policy string, workerArgs []string, extra ...string) (*proc, string, error) {
	return launchSMGAt(pinned(core), bin, policy, workerArgs, extra...)
}

// launchSMGAt is launchSMG where pl says.
func launchSMGAt(pl placement, bin, policy string, workerArgs []string, extra ...string) (*proc, string, error) {
	p, base, _, err := launchSMGMetrics(pl, bin, policy, workerArgs, extra...)
	return p, base, err
}

// launchSMGMetrics is launchSMGAt that also returns the gateway's metrics URL.
func launchSMGMetrics(pl placement, bin, policy string, workerArgs []string, extra ...string) (*proc, string, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	prom, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	args := []string{"launch", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--prometheus-host", "127.0.0.1", "--prometheus-port", strconv.Itoa(prom), "--log-level", "warn", "--policy", policy}
	args = append(append(args, extra...), workerArgs...)
	p, err := startAt(pl, bin, args...)
	if err != nil {
		return nil, "", "", err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHTTP(base, 10*time.Second); err != nil {
		p.stop()
		return nil, "", "", fmt.Errorf("smg: %w\n%s", err, tail(p.out.String()))
	}
	return p, base, fmt.Sprintf("http://127.0.0.1:%d/metrics", prom), nil
}

func (cfg *OverheadConfig) measureProxy(p proxyUnderTest, urls []string, l load) (Measurement, error) {
	m := Measurement{Key: p.key, Name: p.name}
	pr, base, err := p.start(urls)
	if errors.Is(err, errNotInstalled) {
		m.NotInstalled = "not installed"
		return m, nil
	}
	if err != nil {
		return m, err
	}
	defer pr.stop()
	return cfg.drive(m, "", baseURLArgs(base), pr, l)
}

// drive runs loadgen's load l against target (loadgen's arguments naming where to send:
// baseURLArgs, or PD mode's) and, when proxy is set, charges the proxy's CPU time (and with
// l.countSyscalls its system calls) over the whole run, warm-up included, to the requests
// of the run. file prefixes the result file's name.
func (cfg *OverheadConfig) drive(m Measurement, file string, target []string, proxy *proc, l load) (Measurement, error) {
	kind, stream, tokens := l.kind, l.stream, cfg.streamTokens(l)
	out := filepath.Join(cfg.WorkDir, file+m.Key+"-"+kind+".json")
	var cpu0 float64
	var counter *syscallCounter
	if proxy != nil {
		if l.countSyscalls {
			var err error
			if counter, err = countSyscalls(cfg.Perf, cfg.LoadCore, proxy, out+".perf"); err != nil {
				return m, fmt.Errorf("%s (%s): %w", m.Name, kind, err)
			}
			defer counter.stop()
		}
		var err error
		if cpu0, err = proxy.cpuTime(); err != nil {
			return m, err
		}
	}
	ticks0, stealErr := coreTicks(cfg.ProxyCore, cfg.LoadCore)
	args := append([]string{"run"}, target...)
	args = append(args, "--model", "mock-model", "--workload", "raw",
		"--stream="+strconv.FormatBool(stream), "--max-concurrency", strconv.Itoa(l.connections),
		"--duration", l.duration.String(), "--warmup", strconv.Itoa(l.warmup), "--progress", "off", "--output", out)
	if l.rate > 0 {
		args = append(args, "--request-rate", strconv.FormatFloat(l.rate, 'f', -1, 64), "--arrival", "constant")
	}
	if stream {
		args = append(args, "--output-tokens", strconv.Itoa(tokens))
	}
	r, err := runLoadgen(cfg.LoadCore, cfg.Bin.LoadGen, out, args...)
	if err != nil {
		return m, fmt.Errorf("%s (%s): %w", m.Name, kind, err)
	}
	m.RPS, m.P50MS, m.P99MS, m.Completed, m.Failed = r.RequestThroughput, r.E2E.Median, r.E2E.P99, r.Completed, r.Failed
	if ticks1, err := coreTicks(cfg.ProxyCore, cfg.LoadCore); err == nil && stealErr == nil {
		m.StealPct = stealPercent(ticks0, ticks1)
	}
	if stream {
		m.TTFTP50MS, m.TTFTP99MS = r.TTFT.Median, r.TTFT.P99
		m.ITLP50MS, m.ITLP99MS = r.ITL.Median, r.ITL.P99
	}
	if proxy != nil {
		cpu1, err := proxy.cpuTime()
		if err != nil {
			return m, err
		}
		m.ProxyCPUS = cpu1 - cpu0
		n := r.Completed + r.Failed + int64(l.warmup)
		if n > 0 {
			m.CPUPerRequestUS = m.ProxyCPUS / float64(n) * 1e6
			if stream {
				m.CPUPerEventUS = m.CPUPerRequestUS / float64(tokens)
			}
		}
		if counter != nil {
			if m.Syscalls, err = counter.stop(); err != nil {
				return m, fmt.Errorf("%s (%s): %w", m.Name, kind, err)
			}
			if n > 0 {
				m.SyscallsPerRequest = float64(m.Syscalls) / float64(n)
				if stream {
					m.SyscallsPerEvent = m.SyscallsPerRequest / float64(tokens)
				}
			}
		}
	}
	if m.Failed > 0 {
		return m, fmt.Errorf("%s (%s): %d requests failed (%v)", m.Name, kind, m.Failed, r.ErrorExamples)
	}
	return m, nil
}

// syscallCounter is `perf stat` counting a process's system calls (every thread, those it
// starts included) until stopped.
type syscallCounter struct {
	p       *proc
	out     string
	count   int64
	err     error
	stopped bool
}

// countSyscalls attaches perf stat to proxy, on core, writing its count to out.
func countSyscalls(perf string, core int, proxy *proc, out string) (*syscallCounter, error) {
	p, err := start(core, perf, "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-o", out,
		"-p", strconv.Itoa(proxy.cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	// perf attaches to the threads within milliseconds; the load's warm-up covers the rest.
	time.Sleep(200 * time.Millisecond)
	select {
	case <-p.done:
		return nil, fmt.Errorf("perf stat exited early (is raw_syscalls:sys_enter readable? perf_event_paranoid, tracefs):\n%s", tail(p.out.String()))
	default:
	}
	return &syscallCounter{p: p, out: out}, nil
}

// stop ends the count and returns it (the first call reads it; later calls repeat it).
func (c *syscallCounter) stop() (int64, error) {
	if c.stopped {
		return c.count, c.err
	}
	c.stopped = true
	c.p.stop()
	c.count, c.err = parsePerfCount(c.out)
	return c.count, c.err
}

// parsePerfCount reads the count of `perf stat -x ,` output: "12345,,raw_syscalls:sys_enter,…".
func parsePerfCount(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("perf stat wrote no count: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ",")
		if len(f) >= 3 && strings.HasPrefix(f[2], "raw_syscalls:sys_enter") {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("perf stat count %q: %w", f[0], err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("perf stat output without a raw_syscalls:sys_enter count:\n%s", tail(string(b)))
}
