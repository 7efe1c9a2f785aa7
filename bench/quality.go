package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smg-go/smg/loadgen"
)

// The routing-quality suite (docs/benchmarks-history.md): engine-mode mocks (continuous batching,
// prefix-cached KV, time-scaled) behind the gateway, one fresh fleet and gateway per row.
// Per case (a workload on a fleet), first the saturation rows: every policy in a closed loop
// with enough clients to keep every engine busy, capacity = completed requests per second of
// model time. Then the load rows: LoadFraction (70%) of round robin's measured capacity
// offered in an open loop to round robin and the load-aware policies, Repeats times.

// QualityCase is one workload on one fleet shape.
type QualityCase struct {
	// Name is the case's key in metric names and tables: shared-prefix, multi-turn,
	// mixed-size, heterogeneous.
	Name string `json:"name"`
	// About says in a line what the case exercises, for the table.
	About string `json:"about"`
	// Loadgen selects and shapes the workload: --workload and its flags.
	Loadgen []string `json:"loadgen"`
	// Mock are extra mockworker flags (the heterogeneous fleet's --decode-factors).
	Mock []string `json:"mock,omitempty"`
	// SatTimeScale and LoadTimeScale are the engines' time scales in the saturation and the
	// load rows. Saturation runs each policy as fast as the engines allow, so its wall-clock
	// request rate is the policy's capacity × the time scale: a lower scale there keeps the
	// fastest policy's rate within what the 2-core machine relays (docs/benchmarks-history.md, "Is
	// the machine the limit?"); the load rows run at a known rate and use a higher scale for
	// more requests per wall-clock second. Not too high: a stall of the shared machine (the
	// loadgen's arrival lag, the hypervisor's steal) of x ms of wall clock delays a request by
	// x × the scale of model time, and the TTFT p99 of a 10 s row follows those stalls; at
	// time scale 4 round robin's p99 on shared-prefix moved 365-534 ms over 5 repeats of one
	// minute, at 2 334-362 ms (docs/benchmarks-history.md, "The measurement's noise").
	SatTimeScale  float64 `json:"sat_time_scale"`
	LoadTimeScale float64 `json:"load_time_scale"`
	// SatClients is the saturation rows' closed-loop client count: enough that every engine
	// keeps a queue under the best policy.
	SatClients int `json:"sat_clients"`
	// SatNoStream asks for non-streamed answers in the saturation rows: one response per
	// request instead of an SSE event per token, so the rows relay a few hundred responses per
	// wall-clock second at a time scale that streamed tokens would need forty times as many
	// events for. A case whose closed loop needs many seconds of model time to settle uses it
	// (heterogeneous); its saturation rows then have no TTFT or TPOT.
	SatNoStream bool `json:"sat_no_stream,omitempty"`
	// SatSettle is wall-clock time a saturation row's closed loop runs before its measured
	// SatDuration (and that duration's ramp), for a case whose loop takes longer to reach its
	// steady state than the ramp allows: round robin's on the heterogeneous fleet, where the
	// clients pile up on the slow engines over some 20 s of model time. Default 0.
	SatSettle time.Duration `json:"sat_settle_ns,omitempty"`
	// GRPC serves the case from gRPC engines (mockworker --protocol grpc with
	// QualityConfig.TokenizerDir's tokenizer, smg --model-path the same): the gateway renders
	// and tokenizes every prompt and cache_aware routes on token trees.
	GRPC bool `json:"grpc,omitempty"`
	// Policies, when set, are the case's own rows instead of the suite's: its saturation
	// rows, and its load rows besides round robin. EventsPolicy names cache_aware over
	// engines that publish KV-cache events (event mode); cache_aware then runs over engines
	// that do not (the approximate tree).
	Policies []string `json:"policies,omitempty"`
	// KVTokens, when positive, is the engines' KV-cache capacity in tokens instead of
	// QualityConfig.KVTokens: a case whose engines must evict.
	KVTokens int `json:"kv_tokens,omitempty"`
	// Gateways is how many gateways, meshed, share the fleet (0 or 1: one, no mesh); each
	// is sent an equal share of the traffic by its own loadgen, the same prompts out of step
	// (loadgen --start-at).
	Gateways int `json:"gateways,omitempty"`
	// RestartAt, when positive, is the fraction of the measured run after which worker 0
	// restarts as the gateways see it: its prefix cache is lost and, with events, its event
	// sequence starts again (mockworker lose_prefix_cache and kv_events_restart). The time
	// counts from the loadgens' start plus a load row's warm-up at its rate; a saturation
	// row's warm-up (one request per client) is not known ahead and counts as none, so its
	// restart falls that much earlier in the measured run.
	RestartAt float64 `json:"restart_at,omitempty"`
}

// EventsPolicy is the row name of cache_aware over engines that publish KV-cache events, so
// the gateway routes on what the engines report they hold (event mode).
const EventsPolicy = "cache_aware_events"

// gatewayPolicy is the gateway's --policy for a row's policy.
func gatewayPolicy(policy string) string {
	if policy == EventsPolicy {
		return "cache_aware"
	}
	return policy
}

// The cases' workloads. Words are loadgen's; the mock counts about 1.26 tokens per word.
var (
	// sharedPrefixArgs is SGLang bench_serving's generated-shared-prefix with its defaults
	// (64 groups of 16 questions, 2,048-word system prompts, 128-word questions) and 32 output
	// tokens instead of 256, so the SSE events stay within what 2 shared cores relay while
	// the engines stay prefill-bound.
	sharedPrefixArgs = []string{"--workload", "shared-prefix", "--gsp-num-groups", "64", "--gsp-prompts-per-group", "16",
		"--gsp-system-prompt-len", "2048", "--gsp-question-len", "128", "--gsp-output-len", "32"}
	// multiTurnArgs: 256 users, each conversation 6 rounds of 128-word turns after a 512-word
	// system prompt of its own, 32 output tokens per answer, no think time; each turn resends
	// the whole conversation, so the previous turn's worker holds all but the new turn. The
	// conversations (~1,050 tokens on average, 269k in all) fit in half the fleet's KV
	// (8 × 65,536): with 512 they filled it, so an LRU cache serving their
	// cycle evicted each conversation just before its next turn under any routing and the
	// policies' tails differed by noise (docs/benchmarks-history.md, "The multi-turn case's size").
	// The users' first conversations are staggered (--mt-stagger), so the rounds are spread
	// over the run instead of arriving in step, the longest one as a burst near capacity.
	// Its closed loop has one client per conversation (256): round robin's prefill queues
	// saturate the fleet with that, cache_aware's hits do not, so its capacity is a lower bound.
	multiTurnArgs = []string{"--workload", "multi-turn", "--mt-users", "256", "--mt-rounds", "6", "--mt-stagger",
		"--mt-system-prompt-len", "512", "--mt-turn-len", "128", "--mt-output-len", "32"}
	// mixedSizeArgs: loadgen's mixed-size defaults, 4,096 distinct prompts, 10% of them 7,680
	// words (30× the others' 256), 32 output tokens; no shared prefix.
	mixedSizeArgs = []string{"--workload", "mixed-size", "--ms-num-prompts", "4096", "--ms-short-len", "256",
		"--ms-long-len", "7680", "--ms-long-fraction", "0.1", "--ms-output-len", "32"}
	// heterogeneousArgs: one size of distinct prompts (128 words) with 64 output tokens, so
	// decoding is most of an engine's work (69% on a full batch of a fast engine, 82% of a
	// slow one) and the slow decoders' handicap shows.
	heterogeneousArgs = []string{"--workload", "random", "--random-input-len", "128", "--random-output-len", "64",
		"--random-range-ratio", "1", "--random-num-prompts", "4096"}
)

// DefaultQualityCases are the suite's cases, in table order.
func DefaultQualityCases() []QualityCase {
	return []QualityCase{
		{Name: "shared-prefix", About: "64 groups × 16 questions sharing 2,048-word system prompts (SGLang bench_serving's generated-shared-prefix); 32 output tokens",
			Loadgen: sharedPrefixArgs, SatTimeScale: 2, LoadTimeScale: 2, SatClients: 384},
		{Name: "multi-turn", About: "256 conversations of 6 rounds (512-word system prompt, 128-word turns, 32-token answers), the users out of step; each turn resends the conversation",
			Loadgen: multiTurnArgs, SatTimeScale: 2, LoadTimeScale: 2, SatClients: 256},
		{Name: "mixed-size", About: "distinct prompts, 90% of 256 words and 10% of 7,680 (30×); 32 output tokens; nothing to share",
			Loadgen: mixedSizeArgs, SatTimeScale: 2, LoadTimeScale: 2, SatClients: 384},
		// Round robin gives every engine an equal share, so on this fleet it sustains the fleet
		// size × what one slow engine completes: that is its capacity, and what its closed
		// loop converges to once the clients have piled up on the slow engines (a few seconds
		// of model time: SatSettle). The engines batch at most 32 sequences (--max-running), so
		// 384 clients keep every engine's batch full under any policy and that convergence is
		// short; the saturation rows are not streamed (SatNoStream), so time scale 4 gives
		// them 56 s of model time in 14 s of wall clock. The load rows are streamed at time
		// scale 1 (about 7,000 events per wall-clock second at 70%).
		{Name: "heterogeneous", About: "workers 6 and 7 decode twice as slowly (mockworker --decode-factors 6=2,7=2), engines batch at most 32 sequences; distinct 128-word prompts, 64 output tokens; saturation rows not streamed",
			Loadgen: heterogeneousArgs, Mock: []string{"--decode-factors", "6=2,7=2", "--max-running", "32"},
			SatTimeScale: 4, LoadTimeScale: 1, SatClients: 384, SatNoStream: true, SatSettle: 6 * time.Second},
		// The shared-prefix workload through gRPC engines: the gateway's tokenizer, token trees
		// and the gRPC relay instead of text trees and the HTTP relay.
		{Name: "shared-prefix-grpc", About: "shared-prefix over gRPC engines (SGLang's service): the gateway tokenizes with Qwen3's tokenizer and cache_aware routes on token trees",
			Loadgen: sharedPrefixArgs, SatTimeScale: 2, LoadTimeScale: 2, SatClients: 384, GRPC: true},
		// Where the approximate tree is wrong: the engines evict (their KV holds about half
		// of what the prefixes routed to each need), a second gateway routes half the
		// traffic (its tree deltas reach the first one late, over the mesh) and one engine
		// restarts mid-run. cache_aware on its tree against cache_aware on the engines' KV
		// events, with round robin and least_load as the load-only references.
		{Name: "kv-events-grpc", About: "shared-prefix over gRPC engines that evict (KV 20,480 tokens each, about half the prefixes cache_aware sends each), two meshed gateways with half the traffic each, worker 0 restarted half-way; cache_aware on its tree vs on the engines' KV events",
			Loadgen: sharedPrefixArgs, SatTimeScale: 2, LoadTimeScale: 2, SatClients: 384, GRPC: true,
			Policies: []string{"round_robin", "least_load", "cache_aware", EventsPolicy}, KVTokens: 20480, Gateways: 2, RestartAt: 0.5},
	}
}

// QualityCaseNames are the names of DefaultQualityCases, in order.
func QualityCaseNames() []string {
	var names []string
	for _, c := range DefaultQualityCases() {
		names = append(names, c.Name)
	}
	return names
}

// QualityConfig configures the suite. Start from DefaultQualityConfig, which sets every
// default (docs/benchmarks-history.md derives them); an empty policy list means none, a zero
// Capacity or WarmupSeconds means what their fields say.
type QualityConfig struct {
	Bin Binaries `json:"-"`
	// Cases measured, in order. Default DefaultQualityCases.
	Cases []QualityCase `json:"cases"`
	// Policies of the saturation rows, in table order. Default the seven gated ones; empty:
	// none. Without round_robin among them Capacity must be set.
	Policies []string `json:"policies"`
	// LoadPolicies of the load rows, besides round_robin (always measured first: the
	// reference). Default least_load, power_of_two, cache_aware; empty: no load rows.
	LoadPolicies []string `json:"load_policies"`
	// Workers is the fleet size. Default 8.
	Workers int `json:"workers"`
	// KVTokens is each mock's KV-cache capacity in tokens. Default 65,536: a fifth to two
	// fifths of a case's distinct prefixes fit in one worker, all of them in the fleet.
	KVTokens int `json:"kv_tokens"`
	// SatDuration is each saturation row's measured closed loop (wall clock). Default 8 s.
	SatDuration time.Duration `json:"sat_duration_ns"`
	// SatRampFraction of SatDuration is left out of the capacity: the closed loop starts on
	// idle engines (loadgen's warm-up drains before measuring) and takes a moment to fill
	// the queues. Default 0.25.
	SatRampFraction float64 `json:"sat_ramp_fraction"`
	// LoadDuration is each load row's measured open loop (wall clock). Default 10 s.
	LoadDuration time.Duration `json:"load_duration_ns"`
	// LoadFraction of round robin's capacity is offered in the load rows. Default 0.7.
	LoadFraction float64 `json:"load_fraction"`
	// Repeats of the load rows (each a fresh fleet per policy). Default 3.
	Repeats int `json:"repeats"`
	// Capacity, when positive, is round robin's capacity (requests/s of model time) the load
	// rows take LoadFraction of, instead of a saturation row's: the smoke, which runs no
	// saturation rows, gives the calibrated figure. Default 0 (measure).
	Capacity float64 `json:"capacity_override,omitempty"`
	// WarmupSeconds of requests (model time at the load rate; the saturation rows send one
	// request per client) are sent before measuring, so the caches are past their cold start:
	// a load row's are the open loop's first arrivals at its rate, measured from the steady
	// state they lead into (loadgen Config.Warmup).
	// Default 16 s of model time; 0: none.
	WarmupSeconds float64 `json:"warmup_model_s"`
	// LoadReportSeconds is the gateway's --load-monitor-interval in model time (the flag gets
	// it ÷ the time scale), so the load-aware policies see reports as often in every row.
	// Default 4 (1 s of wall clock at time scale 4).
	LoadReportSeconds float64 `json:"load_report_model_s"`
	// MaxWallEvents is the SSE events per wall-clock second a row may relay (the answers'
	// tokens, through the gateway and loadgen): a saturation row that relayed more is measured
	// again at a lower time scale, and a load row whose rate would pass it runs at a lower
	// scale than its case's. Default 8,000 (docs/benchmarks-history.md, "Is the machine the limit?").
	MaxWallEvents float64 `json:"max_wall_events"`
	// MaxConcurrency caps requests in flight in the load rows, so an overloaded policy queues
	// at the client instead of spiralling in connections (docs/benchmarks-loadgen.md).
	// Default 1,024.
	MaxConcurrency int `json:"max_concurrency"`
	// Seed of the workloads (prompts, order, arrivals). Default 1.
	Seed int64 `json:"seed"`
	// TokenizerDir is the model directory the gRPC cases' engines and gateway tokenize with.
	// Default the Qwen3 tokenizer of the test data (hack/tokenizer/fetch.sh, make tools).
	TokenizerDir string `json:"-"`
	// WorkDir receives the loadgen results. Default a temporary directory, removed afterwards.
	WorkDir string `json:"-"`
	// RequestLogDir, when set, keeps each row's per-request records: the mocks' request log
	// (mockworker --request-log) as <row>.mock.jsonl and loadgen's result as <row>.json, for
	// a routing study of a real run (docs/benchmarks-history.md, run QMT1). Default none.
	RequestLogDir string `json:"-"`
	// Logf reports progress (one line per row); nil is silent.
	Logf func(format string, args ...any) `json:"-"`
}

// DefaultQualityPolicies are the saturation rows' policies, in table order.
var DefaultQualityPolicies = []string{"round_robin", "random", "cache_aware", "prefix_hash", "least_load", "power_of_two", "consistent_hashing"}

// DefaultLoadPolicies are the load rows' policies besides round robin: the load-aware ones.
var DefaultLoadPolicies = []string{"least_load", "power_of_two", "cache_aware"}

// referencePolicy is what every ratio divides by.
const referencePolicy = "round_robin"

// DefaultQualityConfig returns the suite's defaults (each field says its own;
// docs/benchmarks-history.md derives them). Start from it: Validate refuses the zeros that make
// no sense.
func DefaultQualityConfig() QualityConfig {
	return QualityConfig{
		Cases: DefaultQualityCases(), Policies: slices.Clone(DefaultQualityPolicies), LoadPolicies: slices.Clone(DefaultLoadPolicies),
		Workers: 8, KVTokens: 65536, SatDuration: 8 * time.Second, SatRampFraction: 0.25,
		LoadDuration: 10 * time.Second, LoadFraction: 0.7, Repeats: 3, WarmupSeconds: 16,
		LoadReportSeconds: 4, MaxWallEvents: 8000, MaxConcurrency: 1024, Seed: 1,
		TokenizerDir: defaultTokenizerDir(),
	}
}

// defaultTokenizerDir is the Qwen3 tokenizer of the test data: $SMG_TOKENIZER_DATA/qwen3, else
// ~/.cache/smg-tokenizers/v1/qwen3.
func defaultTokenizerDir() string {
	d := os.Getenv("SMG_TOKENIZER_DATA")
	if d == "" {
		home, _ := os.UserHomeDir()
		d = filepath.Join(home, ".cache", "smg-tokenizers", "v1")
	}
	return filepath.Join(d, "qwen3")
}

// Validate reports configuration errors, each saying how to fix it; a Config not built from
// DefaultQualityConfig fails here on its zero fields.
func (c *QualityConfig) Validate() error {
	var errs []error
	if c.Workers < 2 {
		errs = append(errs, fmt.Errorf("quality workers %d: use at least 2, routing needs a choice (start from bench.DefaultQualityConfig())", c.Workers))
	}
	if c.SatDuration < time.Second || c.LoadDuration < time.Second {
		errs = append(errs, fmt.Errorf("quality durations %v (saturation), %v (load): use at least 1s each (start from bench.DefaultQualityConfig())", c.SatDuration, c.LoadDuration))
	}
	if !(c.SatRampFraction > 0 && c.SatRampFraction < 1) || !(c.LoadFraction > 0 && c.LoadFraction <= 1) {
		errs = append(errs, fmt.Errorf("quality ramp fraction %g, load fraction %g: use a ramp in (0, 1) and a load in (0, 1] (start from bench.DefaultQualityConfig())", c.SatRampFraction, c.LoadFraction))
	}
	if c.Repeats < 1 || c.KVTokens < 1 || c.MaxConcurrency < 1 || c.WarmupSeconds < 0 || !(c.LoadReportSeconds > 0) || !(c.MaxWallEvents > 0) {
		errs = append(errs, fmt.Errorf("quality repeats %d, kv tokens %d, max concurrency %d, warm-up %gs, load report interval %gs, event budget %g/s: use positive values (warm-up may be 0) (start from bench.DefaultQualityConfig())",
			c.Repeats, c.KVTokens, c.MaxConcurrency, c.WarmupSeconds, c.LoadReportSeconds, c.MaxWallEvents))
	}
	if c.Capacity < 0 {
		errs = append(errs, fmt.Errorf("quality capacity %g: use 0 (measure round robin's) or a positive rate", c.Capacity))
	}
	if c.Capacity == 0 && len(c.LoadPolicies) > 0 && !slices.Contains(c.Policies, referencePolicy) {
		errs = append(errs, errors.New("the load rows need round robin's capacity: include round_robin in the saturation policies or give --quality-capacity"))
	}
	seen := map[string]bool{}
	for _, k := range c.Cases {
		if k.Name == "" || seen[k.Name] || strings.ContainsAny(k.Name, " ./") {
			errs = append(errs, fmt.Errorf("quality case %q: give every case a distinct name without spaces, dots or slashes", k.Name))
		}
		seen[k.Name] = true
		if k.Gateways < 0 || k.KVTokens < 0 || !(k.RestartAt >= 0 && k.RestartAt < 1) || (k.Policies != nil && !slices.Contains(k.Policies, referencePolicy)) {
			errs = append(errs, fmt.Errorf("quality case %s: %d gateways, kv tokens %d, restart at %g, policies %v: use 0 or more gateways and kv tokens, a restart point in [0, 1) and case policies that include round_robin",
				k.Name, k.Gateways, k.KVTokens, k.RestartAt, k.Policies))
		}
		if !(k.SatTimeScale > 0) || !(k.LoadTimeScale > 0) || k.SatClients < 1 || len(k.Loadgen) == 0 || k.SatSettle < 0 {
			errs = append(errs, fmt.Errorf("quality case %s: time scales %g and %g, %d clients, loadgen %v, settling time %v: give positive time scales and clients, a workload and no negative settling time",
				k.Name, k.SatTimeScale, k.LoadTimeScale, k.SatClients, k.Loadgen, k.SatSettle))
		}
	}
	if len(c.Cases) == 0 {
		errs = append(errs, errors.New("no quality case to run: name at least one"))
	}
	if slices.ContainsFunc(c.Cases, func(k QualityCase) bool { return k.GRPC }) {
		if _, err := os.Stat(filepath.Join(c.TokenizerDir, "tokenizer.json")); err != nil {
			errs = append(errs, fmt.Errorf("the gRPC quality cases need a tokenizer directory (%v): run make tools, or leave out the -grpc cases", err))
		}
	}
	return errors.Join(errs...)
}

// SelectQualityCases returns the default cases named in names (all of them when names is
// empty), in the given order, or an error naming an unknown one.
func SelectQualityCases(names []string) ([]QualityCase, error) {
	all := DefaultQualityCases()
	if len(names) == 0 {
		return all, nil
	}
	var out []QualityCase
	for _, n := range names {
		i := slices.IndexFunc(all, func(c QualityCase) bool { return c.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown quality case %q: use %s", n, strings.Join(QualityCaseNames(), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// Row kinds.
const (
	KindSaturation = "saturation"
	KindLoad       = "load"
)

// QualityRow is one run: a policy on a fresh fleet and gateway. Rates and latencies are in
// model time (wall clock × the row's time scale).
type QualityRow struct {
	Case   string `json:"case"`
	Policy string `json:"policy"`
	Kind   string `json:"kind"`
	// Repeat is the load row's repeat, from 1; 0 for saturation rows.
	Repeat    int     `json:"repeat,omitempty"`
	TimeScale float64 `json:"time_scale"`
	// Clients (saturation) or OfferedRate (load, requests/s of model time).
	Clients     int     `json:"clients,omitempty"`
	OfferedRate float64 `json:"offered_rate_model,omitempty"`
	// NoStream: the row asked for non-streamed answers (QualityCase.SatNoStream); it has no
	// TTFT or TPOT.
	NoStream bool `json:"no_stream,omitempty"`
	// Capacity is the completed requests per second of model time over the run's steady
	// part: the timeline after the ramp (QualityConfig.SatRampFraction of the run), up to
	// the end of the run. The drain of the requests still in flight at the end is left out:
	// counted, it would lower a load row's rate by the share of the run an answer takes.
	Capacity float64 `json:"requests_per_s_model"`
	// SentRate (load rows) is the requests per second of model time the open loop started
	// over the whole run: the offered rate, unless loadgen could not keep its schedule.
	SentRate         float64 `json:"sent_per_s_model,omitempty"`
	OutputThroughput float64 `json:"output_tokens_per_s_model"`
	CacheHitRate     float64 `json:"cache_hit_rate"`
	// PredictedHitRate (EventsPolicy rows, and cache_aware's on gRPC engines) is the hit the
	// engines' events or the token tree foretold for the gateways' picks, predicted cached
	// tokens ÷ prompt tokens, and EngineHitRate the hit
	// the engines reported for the same gateways' gRPC requests: both from the gateways'
	// counters over the whole run, warm-up included.
	PredictedHitRate float64 `json:"predicted_hit_rate,omitempty"`
	EngineHitRate    float64 `json:"engine_hit_rate,omitempty"`
	// Gateways is how many meshed gateways shared the fleet; with more than one, each sent
	// its share through its own loadgen, and the TTFT p50 is the requests' weighted mean of
	// theirs and the p99 the larger of theirs (a percentile of the union lies between).
	Gateways  int     `json:"gateways,omitempty"`
	TTFTP50MS float64 `json:"ttft_p50_ms_model"`
	TTFTP99MS float64 `json:"ttft_p99_ms_model"`
	TPOTP50MS float64 `json:"tpot_p50_ms_model"`
	// BusiestShare is the busiest worker's requests × the fleet size ÷ all requests: 1 is
	// perfectly even, Workers means one worker took everything.
	BusiestShare float64 `json:"busiest_share"`
	Completed    int64   `json:"completed"`
	Failed       int64   `json:"failed"`
	// The machine check: CPU the row's own processes (mocks, gateway, loadgen) used per
	// wall-clock second of the loadgen run, the whole machine's busy cores over the same
	// time (other users included), and (load rows) how late loadgen's open loop started
	// requests against its schedule, wall-clock ms.
	// EventsPerRequest is the SSE events of a streamed answer (content events, usage,
	// [DONE]); wallEvents() = Capacity × TimeScale × EventsPerRequest is what the row relayed
	// (one response per request when not streamed).
	EventsPerRequest float64 `json:"events_per_request"`
	// Rejected are earlier attempts of a saturation row at higher time scales, whose event
	// rate passed QualityConfig.MaxWallEvents (the machine may have been the limit).
	Rejected    []RejectedScale `json:"rejected_time_scales,omitempty"`
	CPUCores    float64         `json:"cpu_cores"`
	CPUMocks    float64         `json:"cpu_cores_mocks"`
	CPUGateway  float64         `json:"cpu_cores_gateway"`
	CPULoadgen  float64         `json:"cpu_cores_loadgen"`
	MachineBusy float64         `json:"machine_busy_cores"`
	// StealPercent is the share of all cores' time the hypervisor stole during the row
	// (/proc/stat's steal, as the overhead suite records it): a row that saw a lot of it ran
	// on a slower machine than its peers of the same repeat.
	StealPercent    float64 `json:"steal_percent"`
	ArrivalLagP99MS float64 `json:"arrival_lag_p99_ms,omitempty"`
}

// RejectedScale is a saturation attempt measured again at a lower time scale.
type RejectedScale struct {
	TimeScale  float64 `json:"time_scale"`
	Capacity   float64 `json:"requests_per_s_model"`
	WallEvents float64 `json:"events_per_s_wall"`
}

// wallEvents is the SSE events per wall-clock second the row relayed.
func (row *QualityRow) wallEvents() float64 {
	if row.NoStream {
		return row.Capacity * row.TimeScale
	}
	return row.Capacity * row.TimeScale * row.EventsPerRequest
}

// QualityCaseResult is one case's rows.
type QualityCaseResult struct {
	Case QualityCase `json:"case"`
	// Capacity is round robin's saturation capacity (or QualityConfig.Capacity), requests/s
	// of model time; LoadRate = LoadFraction × Capacity is what the load rows were offered.
	Capacity   float64      `json:"round_robin_capacity_model"`
	LoadRate   float64      `json:"load_rate_model"`
	Saturation []QualityRow `json:"saturation"`
	Load       []QualityRow `json:"load"`
}

// QualityResult is the suite's outcome.
type QualityResult struct {
	Config QualityConfig       `json:"config"`
	Cases  []QualityCaseResult `json:"cases"`
}

// Quality runs the suite, unpinned (the engines' pacing needs both cores more than the
// measurement needs attribution). It returns what it measured so far with any error.
func Quality(cfg QualityConfig) (*QualityResult, error) {
	cleanup, err := prepareSuite(cfg.Validate, &cfg.WorkDir, "smg-bench-quality-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if cfg.RequestLogDir != "" {
		if err := os.MkdirAll(cfg.RequestLogDir, 0o755); err != nil {
			return nil, fmt.Errorf("cannot create the request-log directory (--quality-request-logs): %w", err)
		}
	}
	res := &QualityResult{Config: cfg}
	for _, k := range cfg.Cases {
		cr := QualityCaseResult{Case: k, Capacity: cfg.Capacity}
		res.Cases = append(res.Cases, cr)
		cur := &res.Cases[len(res.Cases)-1]
		satPolicies, loadPolicies := cfg.Policies, cfg.LoadPolicies
		if k.Policies != nil {
			satPolicies, loadPolicies = k.Policies, k.Policies
		}
		for _, policy := range satPolicies {
			row, err := cfg.saturation(k, policy)
			cur.Saturation = append(cur.Saturation, row)
			if err != nil {
				return res, fmt.Errorf("routing quality, %s, %s at saturation: %w", k.Name, policy, err)
			}
			if policy == referencePolicy && cfg.Capacity == 0 {
				cur.Capacity = row.Capacity
			}
		}
		if len(loadPolicies) == 0 {
			continue
		}
		if !(cur.Capacity > 0) {
			return res, fmt.Errorf("routing quality, %s: round robin completed nothing at saturation; no load rate to offer", k.Name)
		}
		cur.LoadRate = cfg.LoadFraction * cur.Capacity
		policies := append([]string{referencePolicy}, slices.DeleteFunc(slices.Clone(loadPolicies), func(p string) bool { return p == referencePolicy })...)
		var eventsPerRequest float64
		if rr := findRow(cur.Saturation, referencePolicy, 0); rr != nil {
			eventsPerRequest = rr.EventsPerRequest
		}
		for rep := 1; rep <= cfg.Repeats; rep++ {
			for _, policy := range policies {
				row, err := cfg.load(k, policy, rep, cur.LoadRate, eventsPerRequest)
				cur.Load = append(cur.Load, row)
				if err != nil {
					return res, fmt.Errorf("routing quality, %s, %s at %.0f%% load (repeat %d): %w", k.Name, policy, cfg.LoadFraction*100, rep, err)
				}
			}
		}
	}
	return res, nil
}

func (cfg *QualityConfig) logf(format string, args ...any) {
	if cfg.Logf != nil {
		cfg.Logf(format, args...)
	}
}

// saturation measures one policy's capacity in a closed loop. A row that relayed more than
// the event budget allows is measured again at the time scale that fits it (at most twice):
// its first figure may be the machine's limit rather than the engines'.
func (cfg *QualityConfig) saturation(k QualityCase, policy string) (QualityRow, error) {
	scale := k.SatTimeScale
	var rejected []RejectedScale
	for attempt := 0; ; attempt++ {
		row := QualityRow{Case: k.Name, Policy: policy, Kind: KindSaturation, TimeScale: scale, Clients: k.SatClients, NoStream: k.SatNoStream, Rejected: rejected}
		name := fmt.Sprintf("%s-sat-%s-%d", k.Name, policy, attempt)
		err := cfg.measure(&row, k, name, loop{clients: k.SatClients, warmup: k.SatClients}, k.SatSettle, cfg.SatDuration)
		events := row.wallEvents()
		cfg.logf("smgbench: quality %s %-18s saturation at time scale %.3g: %.1f req/s (model), hit %.3f, TTFT p99 %.0f ms, %.0f events/s wall, %s",
			k.Name, policy, scale, row.Capacity, row.CacheHitRate, row.TTFTP99MS, events, row.cpuNote())
		next := fitScale(scale, events, cfg.MaxWallEvents)
		if err != nil || attempt == 2 || next == scale {
			return row, err
		}
		rejected = append(rejected, RejectedScale{TimeScale: scale, Capacity: row.Capacity, WallEvents: events})
		scale = next
	}
}

// fitScale is the time scale at which a row that relayed events SSE events per wall-clock
// second at scale would relay budget: scale itself when events is within 15% of the budget,
// else scale × budget / events, rounded down to two significant digits.
func fitScale(scale, events, budget float64) float64 {
	if !(events > budget*1.15) {
		return scale
	}
	next := scale * budget / events
	p := math.Pow(10, math.Floor(math.Log10(next))-1)
	return math.Floor(next/p) * p
}

// load measures one policy at a fixed open-loop rate (requests/s of model time), at the
// case's time scale or, when the rate would pass the event budget there, the scale that fits
// it (eventsPerRequest: round robin's at saturation; 0 when unknown keeps the case's scale).
func (cfg *QualityConfig) load(k QualityCase, policy string, repeat int, rate, eventsPerRequest float64) (QualityRow, error) {
	scale := fitScale(k.LoadTimeScale, rate*k.LoadTimeScale*eventsPerRequest, cfg.MaxWallEvents)
	row := QualityRow{Case: k.Name, Policy: policy, Kind: KindLoad, Repeat: repeat, TimeScale: scale, OfferedRate: rate}
	wall := rate * scale
	name := fmt.Sprintf("%s-load%d-%s", k.Name, repeat, policy)
	l := loop{rate: wall, clients: cfg.MaxConcurrency, warmup: int(rate * cfg.WarmupSeconds), warmupWall: cfg.WarmupSeconds / scale}
	err := cfg.measure(&row, k, name, l, 0, cfg.LoadDuration)
	cfg.logf("smgbench: quality %s %-18s %.0f%% load, repeat %d, time scale %.3g: TTFT p50 %.0f p99 %.0f ms (model), completed %.1f, sent %.1f of %.1f req/s, %s, arrival lag p99 %.1f ms",
		k.Name, policy, cfg.LoadFraction*100, repeat, scale, row.TTFTP50MS, row.TTFTP99MS, row.Capacity, row.SentRate, rate, row.cpuNote(), row.ArrivalLagP99MS)
	return row, err
}

// loop is a row's loadgen loop: a closed loop of clients (rate 0) or an open loop at rate
// requests per wall-clock second with at most clients in flight; warmup requests first,
// taking about warmupWall seconds in an open loop.
type loop struct {
	clients, warmup int
	rate            float64
	warmupWall      float64
}

// args are loadgen's flags for share 1/of of the loop (one of several gateways' clients).
func (l loop) args(of int) []string {
	args := []string{"--max-concurrency", strconv.Itoa(max(1, l.clients/of)), "--warmup", strconv.Itoa(l.warmup / of)}
	if l.rate > 0 {
		args = append(args, "--request-rate", strconv.FormatFloat(l.rate/float64(of), 'f', 2, 64))
	}
	return args
}

// measure runs one row on a fresh fleet and gateways, so no row inherits another's warm
// caches or load history: loadgen with the case's workload and loop l for settle + d,
// measured over d after the settling time; with several gateways one loadgen per gateway.
func (cfg *QualityConfig) measure(row *QualityRow, k QualityCase, name string, l loop, settle, d time.Duration) error {
	mocks, urls, err := cfg.startQualityMocks(row, k, name)
	if err != nil {
		return err
	}
	defer mocks.stop()
	gatewayArgs := []string{"--load-monitor-interval", strconv.FormatFloat(cfg.LoadReportSeconds/row.TimeScale, 'f', -1, 64)}
	if k.GRPC {
		gatewayArgs = append(gatewayArgs, "--model-path", cfg.TokenizerDir)
	}
	row.Gateways = max(1, k.Gateways)
	gws, err := launchGateways(cfg.Bin.SMG, row.Gateways, gatewayPolicy(row.Policy), workerURLArgs(urls), gatewayArgs)
	for _, gw := range gws {
		defer gw.p.stop()
	}
	if err != nil {
		return err
	}
	run := &qualityRun{cfg: cfg, row: row, k: k, name: name, l: l, settle: settle, d: d, mocks: mocks, gws: gws}

	before, err := run.sampleCPU()
	if err != nil {
		return err
	}
	if k.RestartAt > 0 {
		restart := restartWorker(urls[0], row.Policy == EventsPolicy)
		timer := time.AfterFunc(time.Duration((l.warmupWall+settle.Seconds()+k.RestartAt*d.Seconds())*float64(time.Second)), restart.run)
		defer func() {
			timer.Stop()
			if err := restart.wait(); err != nil {
				cfg.logf("smgbench: quality %s: worker 0's restart failed: %v", name, err)
			}
		}()
	}
	t0 := time.Now()
	r, loadgenCPU, err := run.loadgens()
	if err != nil {
		return err
	}
	wall := time.Since(t0).Seconds()
	after, err := run.sampleCPU()
	if err != nil {
		return err
	}
	row.fillCPU(before, after, loadgenCPU, wall)
	row.fill(r, cfg.Workers, settle.Seconds()+d.Seconds()*cfg.SatRampFraction, (settle + d).Seconds())
	if row.Policy == EventsPolicy || row.Policy == "cache_aware" && k.GRPC {
		if err := row.readHits(gws); err != nil {
			return err
		}
	}
	// A request the full KV cache cannot admit yet is queued, not failed, so any failure is
	// unexpected; more than 1% would bias the figures and fails the row.
	if r.Failed*100 > r.Completed {
		return fmt.Errorf("%d of %d requests failed (%v)", r.Failed, r.Completed+r.Failed, r.ErrorExamples)
	}
	return nil
}

// startQualityMocks starts the row's fleet of mock engines (one process, cfg.Workers
// engines) and returns it with the engines' URLs.
func (cfg *QualityConfig) startQualityMocks(row *QualityRow, k QualityCase, name string) (*proc, []string, error) {
	kvTokens := cfg.KVTokens
	if k.KVTokens > 0 {
		kvTokens = k.KVTokens
	}
	args := append([]string{"--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(cfg.Workers),
		"--model", "mock-model", "--mode", "engine", "--time-scale", strconv.FormatFloat(row.TimeScale, 'f', -1, 64),
		"--kv-tokens", strconv.Itoa(kvTokens), "--seed", strconv.FormatInt(cfg.Seed, 10)}, k.Mock...)
	listening := listenLine
	if k.GRPC {
		args = append(args, "--protocol", "grpc", "--dialect", "sglang", "--tokenizer-path", cfg.TokenizerDir)
		listening = grpcListenLine
	}
	if row.Policy == EventsPolicy {
		args = append(args, "--kv-events-port", "0")
	}
	if cfg.RequestLogDir != "" {
		args = append(args, "--request-log", filepath.Join(cfg.RequestLogDir, name+".mock.jsonl"))
	}
	// 30 s: a loaded machine starts eight engines that each load a tokenizer slowly.
	return startListening(pinned(-1), cfg.Bin.MockWorker, listening, cfg.Workers, 30*time.Second, args...)
}

// qualityRun is one row's running fleet and how loadgen drives it: one loadgen per gateway.
type qualityRun struct {
	cfg    *QualityConfig
	row    *QualityRow
	k      QualityCase
	name   string
	l      loop
	settle time.Duration
	d      time.Duration
	mocks  *proc
	gws    []gateway
}

// output is the result file of the loadgen driving gateway i.
func (run *qualityRun) output(i int) string {
	dir := run.cfg.WorkDir
	if run.cfg.RequestLogDir != "" {
		dir = run.cfg.RequestLogDir
	}
	if run.row.Gateways == 1 {
		return filepath.Join(dir, run.name+".json")
	}
	return filepath.Join(dir, fmt.Sprintf("%s.gw%d.json", run.name, i))
}

// loadgenArgs is the command line of the loadgen driving gateway i.
func (run *qualityRun) loadgenArgs(i int) []string {
	a := append([]string{"run", "--base-url", run.gws[i].base + "/v1", "--model", "mock-model", "--stream=" + strconv.FormatBool(!run.row.NoStream),
		"--duration", (run.settle + run.d).String(), "--seed", strconv.FormatInt(run.cfg.Seed, 10), "--progress", "off", "--output", run.output(i)}, run.k.Loadgen...)
	if i > 0 { // the same prompts, out of step with the first gateway's clients
		a = append(a, "--start-at", strconv.Itoa(i*workloadSize(run.k.Loadgen)/run.row.Gateways))
	}
	return append(a, run.l.args(run.row.Gateways)...)
}

// loadgens runs one loadgen per gateway side by side and returns their merged result and
// their CPU seconds.
func (run *qualityRun) loadgens() (*loadgen.Result, float64, error) {
	n := run.row.Gateways
	results := make([]*loadgen.Result, n)
	cpus := make([]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], cpus[i], errs[i] = runLoadgenCPU(-1, run.cfg.Bin.LoadGen, run.output(i), run.loadgenArgs(i)...)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	var cpu float64
	for _, c := range cpus {
		cpu += c
	}
	return mergeResults(results), cpu, nil
}

// cpuSample is the CPU the fleet and the machine had used at one moment.
type cpuSample struct {
	mocks, gateways, machineBusy float64
	ticks                        cpuTicks
	ticksErr                     error
}

// sampleCPU reads the CPU seconds of the mocks, of the gateways, of the whole machine, and
// the cores' ticks (for the steal; a failure there leaves the steal out).
func (run *qualityRun) sampleCPU() (cpuSample, error) {
	var s cpuSample
	var err error
	if s.mocks, err = run.mocks.cpuSeconds(); err != nil {
		return s, err
	}
	for _, gw := range run.gws {
		g, err := gw.p.cpuSeconds()
		if err != nil {
			return s, err
		}
		s.gateways += g
	}
	if s.machineBusy, err = machineBusySeconds(); err != nil {
		return s, err
	}
	s.ticks, s.ticksErr = coreTicks(allCores()...)
	return s, nil
}

// fillCPU sets the row's CPU columns from two samples wall seconds apart and the loadgens'
// CPU seconds in between.
func (row *QualityRow) fillCPU(before, after cpuSample, loadgenCPU, wall float64) {
	row.CPUMocks, row.CPUGateway, row.CPULoadgen = (after.mocks-before.mocks)/wall, (after.gateways-before.gateways)/wall, loadgenCPU/wall
	row.CPUCores = row.CPUMocks + row.CPUGateway + row.CPULoadgen
	row.MachineBusy = (after.machineBusy - before.machineBusy) / wall
	if before.ticksErr == nil && after.ticksErr == nil {
		row.StealPercent = stealPercent(before.ticks, after.ticks)
	}
}

// cpuNote is the row's machine check in words, for the progress log.
func (row *QualityRow) cpuNote() string {
	return fmt.Sprintf("%.2f cores (mocks %.2f, smg %.2f, loadgen %.2f; machine busy %.2f, steal %.0f%%)", row.CPUCores, row.CPUMocks, row.CPUGateway, row.CPULoadgen, row.MachineBusy, row.StealPercent)
}

// allCores lists the machine's cores, for the steal of a whole row (its processes are not
// pinned).
func allCores() []int {
	cores := make([]int, runtime.NumCPU())
	for i := range cores {
		cores[i] = i
	}
	return cores
}

// fill sets the row's figures from loadgen's result: rates and latencies converted to model
// time. The completed rate counts the run's steady part only: the timeline from fromS to
// the run's end at endS (wall-clock seconds). A saturation row's closed loop starts on idle
// engines and needs a moment to fill them; a load row's open loop starts on drained engines,
// and its requests still in flight at the end (the drain) finish after it.
func (row *QualityRow) fill(r *loadgen.Result, workers int, fromS, endS float64) {
	s := row.TimeScale
	row.Completed, row.Failed = r.Completed, r.Failed
	if r.Completed > 0 {
		// Content events (one per token), the usage event and [DONE].
		row.EventsPerRequest = float64(r.TotalOutputTokens)/float64(r.Completed) + 2
	}
	row.CacheHitRate = r.CacheHitRate
	if !row.NoStream { // a non-streamed answer has no first token of its own
		row.TTFTP50MS, row.TTFTP99MS = r.TTFT.Median*s, r.TTFT.P99*s
		row.TPOTP50MS = r.TPOT.Median * s
	}
	row.BusiestShare = busiestShare(r.Workers, workers)
	row.ArrivalLagP99MS = r.ArrivalLag.P99
	row.Capacity = r.RequestThroughput / s
	row.OutputThroughput = r.OutputThroughput / s
	if rate, tokens, ok := steadyRates(r.Timeline, fromS, endS); ok {
		row.Capacity, row.OutputThroughput = rate/s, tokens/s
	}
	if row.Kind == KindLoad && endS > 0 {
		row.SentRate = float64(r.Completed+r.Failed) / endS / s
	}
}

// steadyRates are the completions and output tokens per second over the timeline buckets
// that lie wholly within [from, to) seconds; ok is false when none does.
func steadyRates(tl []loadgen.TimelinePoint, from, to float64) (requests, tokens float64, ok bool) {
	var n int64
	var tok, width float64
	for i, p := range tl {
		end := to
		if i+1 < len(tl) {
			end = tl[i+1].StartS
		} else if w := bucketWidth(tl); w > 0 {
			end = p.StartS + w
		}
		if p.StartS < from-1e-9 || end > to+1e-9 {
			continue
		}
		n += p.Completed
		tok += p.OutputThroughput * (end - p.StartS)
		width += end - p.StartS
	}
	if width <= 0 {
		return 0, 0, false
	}
	return float64(n) / width, tok / width, true
}

// bucketWidth is the timeline's bucket width (the gap between its first two points).
func bucketWidth(tl []loadgen.TimelinePoint) float64 {
	if len(tl) < 2 {
		return 0
	}
	return tl[1].StartS - tl[0].StartS
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

// machineBusySeconds is the CPU time all processors have spent busy since boot (every
// /proc/stat "cpu" field but idle and iowait), in seconds.
func machineBusySeconds() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat first line %q", line)
	}
	var busy float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/stat field %q", v)
		}
		busy += x
	}
	return busy / clockTicks, nil
}
