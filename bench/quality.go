package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// QualityConfig configures the routing-quality suite: a fleet of engine-mode mocks (continuous
// batching, prefix-cached KV, time-scaled) behind the gateway, the shared-prefix workload at a
// fixed open-loop rate, one fresh fleet and gateway per policy. Zero values take the defaults,
// which docs/benchmarks.md derives ("Routing quality: the setup").
type QualityConfig struct {
	Bin Binaries
	// Policies measured, in table order. Default cache_aware, prefix_hash, round_robin,
	// random, least_load, power_of_two.
	Policies []string
	// Workers is the fleet size. Default 8.
	Workers int
	// TimeScale runs the engine model this many times faster than the wall clock. Default 4.
	TimeScale float64
	// KVTokens is each mock's KV-cache capacity in tokens. Default 65,536: about two fifths
	// of the workload's distinct shared prefixes (64 × ~2,590 tokens) fit in one worker, all
	// of them in the fleet.
	KVTokens int
	// ModelRate is the fleet's arrival rate in requests per second of model time; loadgen
	// sends ModelRate × TimeScale per wall-clock second. Default 39: 70% of the 56 requests/s
	// the fleet served under round robin at saturation (the calibration in docs/benchmarks.md).
	ModelRate float64
	// Duration of each measured run (wall clock). Default 25 s.
	Duration time.Duration
	// WarmupSeconds of arrivals are sent before measuring, so the caches are past their cold
	// start. Default 4.
	WarmupSeconds float64
	// MaxConcurrency caps requests in flight, so an overloaded policy queues at the client
	// instead of spiralling in connections (docs/benchmarks-loadgen.md). Default 1,024.
	MaxConcurrency int
	// The shared-prefix workload (loadgen's gsp flags). Defaults 64 groups of 16 questions,
	// 2,048-word system prompts and 128-word questions (SGLang's bench_serving defaults; the mock
	// counts about 1.26 tokens per word), 32 output tokens (bench_serving: 256; fewer keep the
	// SSE events within what 2 shared cores relay while the engines stay prefill-bound).
	Groups, PromptsPerGroup, SystemPromptLen, QuestionLen, OutputLen int
	// Seed of the workload (prompts, order, arrivals). Default 1.
	Seed int64
	// WorkDir receives the loadgen results. Default a temporary directory, removed afterwards.
	WorkDir string
}

// DefaultQualityPolicies are the policies of the routing-quality table.
var DefaultQualityPolicies = []string{"cache_aware", "prefix_hash", "round_robin", "random", "least_load", "power_of_two"}

func (c *QualityConfig) fillDefaults() {
	if len(c.Policies) == 0 {
		c.Policies = DefaultQualityPolicies
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Workers, 8)
	def(&c.KVTokens, 65536)
	def(&c.MaxConcurrency, 1024)
	def(&c.Groups, 64)
	def(&c.PromptsPerGroup, 16)
	def(&c.SystemPromptLen, 2048)
	def(&c.QuestionLen, 128)
	def(&c.OutputLen, 32)
	if c.TimeScale == 0 {
		c.TimeScale = 4
	}
	if c.ModelRate == 0 {
		c.ModelRate = 39
	}
	if c.Duration == 0 {
		c.Duration = 25 * time.Second
	}
	if c.WarmupSeconds == 0 {
		c.WarmupSeconds = 4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
}

// Validate reports configuration errors after defaults are applied.
func (c *QualityConfig) Validate() error {
	var errs []error
	if c.Workers < 2 {
		errs = append(errs, fmt.Errorf("quality workers %d: use at least 2, routing needs a choice", c.Workers))
	}
	if c.TimeScale <= 0 || c.ModelRate <= 0 {
		errs = append(errs, fmt.Errorf("quality time scale %g, model rate %g: both must be positive", c.TimeScale, c.ModelRate))
	}
	if c.Duration < time.Second || c.WarmupSeconds < 0 {
		errs = append(errs, fmt.Errorf("quality duration %v, warm-up %gs: use a duration of at least 1s and a warm-up ≥ 0", c.Duration, c.WarmupSeconds))
	}
	if c.Groups < 1 || c.PromptsPerGroup < 1 || c.SystemPromptLen < 1 || c.QuestionLen < 1 || c.OutputLen < 1 {
		errs = append(errs, errors.New("quality workload: groups, prompts per group, system prompt, question and output lengths must all be ≥ 1"))
	}
	// A request the KV cache can never hold is rejected by the mock with 400 (mockworker/doc.go).
	if need := 2 * (c.SystemPromptLen + c.QuestionLen + c.OutputLen); c.KVTokens < need {
		errs = append(errs, fmt.Errorf("quality kv tokens %d: a request needs about %d (prompt + output, at ~2 mock tokens per loadgen word); raise --quality-kv-tokens", c.KVTokens, need))
	}
	if c.MaxConcurrency < 1 {
		errs = append(errs, fmt.Errorf("quality max concurrency %d: use at least 1", c.MaxConcurrency))
	}
	return errors.Join(errs...)
}

// WallRate is the open-loop arrival rate loadgen is given, requests per wall-clock second.
func (c *QualityConfig) WallRate() float64 { return c.ModelRate * c.TimeScale }

// QualityRow is one policy's run.
type QualityRow struct {
	Policy       string  `json:"policy"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	// OutputThroughput is generated tokens per second of model time (the wall-clock figure
	// divided by the time scale), comparable with a real engine's.
	OutputThroughput float64 `json:"output_throughput_model"`
	RequestRate      float64 `json:"requests_per_s_model"`
	// TTFT in model-time milliseconds (wall-clock × time scale).
	TTFTP50MS float64 `json:"ttft_p50_ms_model"`
	TTFTP99MS float64 `json:"ttft_p99_ms_model"`
	Completed int64   `json:"completed"`
	Failed    int64   `json:"failed"`
	// BusiestShare is the busiest worker's share of the requests, × the fleet size: 1 is
	// perfectly even, Workers means one worker took everything.
	BusiestShare float64 `json:"busiest_share"`
}

// QualityResult is the suite's outcome.
type QualityResult struct {
	Config QualityConfig `json:"config"`
	Rows   []QualityRow  `json:"rows"`
}

// Row returns the row of policy, or nil.
func (r *QualityResult) Row(policy string) *QualityRow {
	for i := range r.Rows {
		if r.Rows[i].Policy == policy {
			return &r.Rows[i]
		}
	}
	return nil
}

// Quality runs the suite, unpinned (the engines' pacing needs both cores more than the
// measurement needs attribution).
func Quality(cfg QualityConfig) (*QualityResult, error) {
	cfg.fillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.WorkDir == "" {
		d, err := os.MkdirTemp("", "smg-bench-quality-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.WorkDir = d
	}
	res := &QualityResult{Config: cfg}
	for _, policy := range cfg.Policies {
		row, err := cfg.run(policy)
		if err != nil {
			return res, fmt.Errorf("routing quality, %s: %w", policy, err)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// run measures one policy on a fresh fleet, so no policy inherits another's warm caches.
func (cfg *QualityConfig) run(policy string) (QualityRow, error) {
	row := QualityRow{Policy: policy}
	mocks, err := start(-1, cfg.Bin.MockWorker, "--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(cfg.Workers),
		"--model", "mock-model", "--mode", "engine", "--time-scale", strconv.FormatFloat(cfg.TimeScale, 'f', -1, 64),
		"--kv-tokens", strconv.Itoa(cfg.KVTokens), "--seed", strconv.FormatInt(cfg.Seed, 10))
	if err != nil {
		return row, err
	}
	defer mocks.stop()
	urls, err := mocks.waitOutput(listenLine, cfg.Workers, 10*time.Second)
	if err != nil {
		return row, err
	}
	// Loads are polled every wall-clock second (TimeScale seconds of model time) instead of
	// the default 10 s, so the load-aware policies see the engines at the pace they change.
	gw, base, err := launchSMG(-1, cfg.Bin.SMG, policy, workerURLArgs(urls), "--load-monitor-interval", "1")
	if err != nil {
		return row, err
	}
	defer gw.stop()
	out := filepath.Join(cfg.WorkDir, policy+".json")
	rate := cfg.WallRate()
	r, err := runLoadgen(-1, cfg.Bin.LoadGen, out, "run", "--base-url", base+"/v1", "--model", "mock-model",
		"--workload", "shared-prefix", "--stream=true", "--request-rate", strconv.FormatFloat(rate, 'f', 2, 64),
		"--max-concurrency", strconv.Itoa(cfg.MaxConcurrency), "--duration", cfg.Duration.String(),
		"--warmup", strconv.Itoa(int(rate*cfg.WarmupSeconds)), "--seed", strconv.FormatInt(cfg.Seed, 10),
		"--gsp-num-groups", strconv.Itoa(cfg.Groups), "--gsp-prompts-per-group", strconv.Itoa(cfg.PromptsPerGroup),
		"--gsp-system-prompt-len", strconv.Itoa(cfg.SystemPromptLen), "--gsp-question-len", strconv.Itoa(cfg.QuestionLen),
		"--gsp-output-len", strconv.Itoa(cfg.OutputLen), "--progress", "off", "--output", out)
	if err != nil {
		return row, err
	}
	row.CacheHitRate = r.CacheHitRate
	row.OutputThroughput = r.OutputThroughput / cfg.TimeScale
	row.RequestRate = r.RequestThroughput / cfg.TimeScale
	row.TTFTP50MS, row.TTFTP99MS = r.TTFT.Median*cfg.TimeScale, r.TTFT.P99*cfg.TimeScale
	row.Completed, row.Failed = r.Completed, r.Failed
	row.BusiestShare = busiestShare(r.Workers, cfg.Workers)
	// A few failures (a request the full KV cache cannot admit yet is queued, not failed, so
	// any failure is unexpected) would bias the figures: more than 1% fails the run.
	if r.Failed*100 > r.Completed {
		return row, fmt.Errorf("%d of %d requests failed (%v)", r.Failed, r.Completed+r.Failed, r.ErrorExamples)
	}
	return row, nil
}

// busiestShare is max(requests per worker) × workers / total.
func busiestShare(perWorker map[string]int64, workers int) float64 {
	var total, most int64
	for _, n := range perWorker {
		total += n
		most = max(most, n)
	}
	if total == 0 {
		return 0
	}
	return float64(most) * float64(workers) / float64(total)
}
