package loadgen

import (
	"io"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Endpoint selects the API the load generator speaks.
type Endpoint string

// Endpoints. Chat and completions live under the base URL (".../v1/chat/completions",
// ".../v1/completions"); SGLang's native /generate lives at the server root, so a trailing
// "/v1" is stripped from the base URL for it.
const (
	EndpointChat        Endpoint = "chat"
	EndpointCompletions Endpoint = "completions"
	EndpointGenerate    Endpoint = "generate"
)

// WorkloadKind names a workload generator.
type WorkloadKind string

// Workloads.
const (
	// WorkloadRandom sends prompts of random length (bench_serving's "random" dataset).
	WorkloadRandom WorkloadKind = "random"
	// WorkloadSharedPrefix is bench_serving's "generated-shared-prefix": groups of prompts that
	// share a long system prompt and differ in a short question.
	WorkloadSharedPrefix WorkloadKind = "shared-prefix"
	// WorkloadMultiTurn runs conversations: each user sends rounds, each round extends the
	// conversation with the previous answer, with think time between rounds.
	WorkloadMultiTurn WorkloadKind = "multi-turn"
	// WorkloadRaw sends one fixed tiny chat request: for measuring proxy overhead.
	WorkloadRaw WorkloadKind = "raw"
	// WorkloadMixedSize sends distinct prompts of two sizes, most short and a few many times
	// longer (bimodal), with no shared prefix: a long prompt ties up an engine's prefill, so
	// where a request lands matters more for its latency than which cache holds what.
	WorkloadMixedSize WorkloadKind = "mixed-size"
)

// ArrivalKind is the inter-arrival distribution of the open loop.
type ArrivalKind string

// Arrival processes.
const (
	ArrivalPoisson  ArrivalKind = "poisson"  // exponential gaps with mean 1/RequestRate
	ArrivalConstant ArrivalKind = "constant" // gaps of exactly 1/RequestRate
)

// LengthDistribution is how WorkloadRandom draws prompt and output lengths.
type LengthDistribution string

// Length distributions.
const (
	// LengthUniform draws from [max(1, Len*RangeRatio), Len], as SGLang's bench_serving.
	LengthUniform LengthDistribution = "uniform"
	// LengthExponential draws from an exponential distribution with mean Len, rounded up and
	// cut at 8·Len: mostly short requests with a long tail, closer to chat traffic.
	LengthExponential LengthDistribution = "exponential"
)

// RandomConfig shapes WorkloadRandom.
type RandomConfig struct {
	InputLen     int                `json:"input_len"`    // prompt tokens; default 1024
	OutputLen    int                `json:"output_len"`   // max_tokens; default 128
	Distribution LengthDistribution `json:"distribution"` // uniform (default) or exponential
	RangeRatio   float64            `json:"range_ratio"`  // uniform only, in [0, 1]; default 0 (lengths in [1, Len]); 1 = fixed
	NumPrompts   int                `json:"num_prompts"`  // distinct prompts generated and cycled; default min(NumRequests, 1000), or 1000
}

// SharedPrefixConfig shapes WorkloadSharedPrefix (SGLang's gsp-* options and defaults).
type SharedPrefixConfig struct {
	NumGroups       int `json:"num_groups"`        // default 64
	PromptsPerGroup int `json:"prompts_per_group"` // default 16
	SystemPromptLen int `json:"system_prompt_len"` // shared prefix tokens per group; default 2048
	QuestionLen     int `json:"question_len"`      // per-prompt tokens; default 128
	OutputLen       int `json:"output_len"`        // max_tokens; default 256
}

// MultiTurnConfig shapes WorkloadMultiTurn.
type MultiTurnConfig struct {
	Users           int           `json:"users"`             // concurrent conversations; default 16
	Rounds          int           `json:"rounds"`            // user turns per conversation; default 4
	SystemPromptLen int           `json:"system_prompt_len"` // per-user system prompt tokens; default 0
	TurnLen         int           `json:"turn_len"`          // tokens per user turn; default 128
	OutputLen       int           `json:"output_len"`        // max_tokens per answer; default 128
	ThinkTime       time.Duration `json:"think_time_ns"`     // pause after an answer before the next round; default 0
	// Stagger gives user u's first conversation 1 + u mod Rounds rounds instead of Rounds, so
	// that the users are spread over the rounds from the start: without it they all start
	// together and, with equal turns, stay in step, each round arriving as one phase of the
	// run (the last, longest, one near the fleet's capacity). Default false.
	Stagger bool `json:"stagger"`
}

// MixedSizeConfig shapes WorkloadMixedSize. Exactly round(NumPrompts × LongFraction) prompts
// are long, at positions drawn from the seed; every prompt is its own random text.
type MixedSizeConfig struct {
	NumPrompts   int     `json:"num_prompts"`   // distinct prompts, cycled; default 4096
	ShortLen     int     `json:"short_len"`     // prompt tokens of a short prompt; default 256
	LongLen      int     `json:"long_len"`      // prompt tokens of a long prompt; default 7680 (30 × ShortLen's default)
	LongFraction float64 `json:"long_fraction"` // share of long prompts, in (0, 1]; default 0.1
	OutputLen    int     `json:"output_len"`    // max_tokens; default 32
}

// RawConfig shapes WorkloadRaw.
type RawConfig struct {
	OutputTokens int `json:"output_tokens"` // max_tokens of the fixed request; default 8
}

// Config describes one load-generation run. Start from DefaultConfig, which sets every
// default (each field says its own); Validate refuses a zero where zero makes no sense
// (a prompt of no tokens, no timeout). Three zeros have a meaning of their own, derived from
// other fields and documented on them: NumRequests (the workload's size), Random.NumPrompts
// (min(NumRequests, 1000)) and MaxConcurrency (no cap; a closed loop runs one client).
type Config struct {
	// BaseURL of an OpenAI-compatible server, e.g. "http://127.0.0.1:30000/v1". Required.
	// "https://" enables TLS.
	BaseURL string `json:"base_url"`
	// Model is sent as "model". Required for chat and completions.
	Model string `json:"model"`
	// APIKey, when set, is sent as "Authorization: Bearer <key>". Never serialised.
	APIKey string `json:"-"`
	// Insecure skips TLS certificate verification.
	Insecure bool `json:"insecure"`
	// Endpoint: chat (default), completions or generate.
	Endpoint Endpoint `json:"endpoint"`
	// Stream requests server-sent events (default true in DefaultConfig). Streams are parsed
	// event by event; TTFT, ITL and TPOT need streaming.
	Stream bool `json:"stream"`
	// IgnoreEOS asks the engine to generate exactly max_tokens (default true in DefaultConfig,
	// as bench_serving does). Strict OpenAI servers reject the field: turn it off for them.
	IgnoreEOS bool `json:"ignore_eos"`
	// Timeout bounds one request from send to the last byte of its body. Default 5m.
	Timeout time.Duration `json:"timeout_ns"`
	// Headers are added to every request, e.g. {"X-SMG-Target-Worker": "w1"}.
	Headers map[string]string `json:"headers,omitempty"`
	// SessionHeader, when set, names a header that carries each request's session, so that
	// a gateway can keep sessions sticky (e.g. "X-SMG-Routing-Key"): multi-turn sends the
	// conversation ("user-3-0": user 3's first conversation), shared-prefix the prefix group
	// ("group-7"), random and mixed-size the prompt ("prompt-42") and raw "raw".
	SessionHeader string `json:"session_header,omitempty"`

	// Workload: random (default), shared-prefix, multi-turn, mixed-size or raw.
	Workload     WorkloadKind       `json:"workload"`
	Random       RandomConfig       `json:"random"`
	SharedPrefix SharedPrefixConfig `json:"shared_prefix"`
	MultiTurn    MultiTurnConfig    `json:"multi_turn"`
	MixedSize    MixedSizeConfig    `json:"mixed_size"`
	Raw          RawConfig          `json:"raw"`

	// RequestRate > 0 runs an open loop at that many requests per second; 0 (default) runs a
	// closed loop of MaxConcurrency clients.
	RequestRate float64 `json:"request_rate"`
	// Arrival of the open loop: poisson (default) or constant.
	Arrival ArrivalKind `json:"arrival"`
	// MaxConcurrency caps requests in flight. Open loop: 0 (default) means no cap. Closed loop:
	// the number of clients, each with its own keep-alive connection; 0 means 1.
	MaxConcurrency int `json:"max_concurrency"`
	// NumRequests stops the run after this many measured requests. Default when Duration is
	// zero: the workload's natural size (random, mixed-size: NumPrompts; shared-prefix:
	// groups × prompts; multi-turn: users × rounds; raw: 1000). With Duration set, 0 means no count limit.
	NumRequests int `json:"num_requests"`
	// Duration stops issuing new requests after this long; requests in flight finish.
	Duration time.Duration `json:"duration_ns"`
	// Warmup requests are sent before measuring, in the run's own shape, and left out of the
	// result: a closed loop's clients send them and the measured loop starts when they have
	// finished; an open loop's first Warmup arrivals are the warm-up and the measured ones
	// follow on the same schedule, so the measured window opens on the offered rate's steady
	// state. Default 0.
	Warmup int `json:"warmup"`
	// Seed makes prompts, lengths, order and arrival gaps reproducible.
	Seed int64 `json:"seed"`
	// StartAt is where in a prebuilt workload's order (every workload but multi-turn) the
	// first request is taken; the run cycles on from there. Two load generators with one
	// seed and different StartAt send the same prompts out of step, as two gateways' clients
	// of one fleet do. Default 0.
	StartAt int `json:"start_at,omitempty"`
	// TimelineInterval is the bucket width of Result.Timeline. Default 1s.
	TimelineInterval time.Duration `json:"timeline_interval_ns"`

	// PD, when its worker lists are set, sends every request straight to a prefill and a
	// decode worker instead of BaseURL: the baseline of a gateway's PD mode (see PDConfig).
	PD PDConfig `json:"pd"`

	// Progress, when non-nil, receives a one-line progress bar refreshed a few times a second
	// (carriage returns: give it a terminal).
	Progress io.Writer `json:"-"`
	// Dial overrides how connections are made (tests use in-memory listeners). Nil: TCP.
	Dial fasthttp.DialFunc `json:"-"`
}

// DefaultConfig returns a Config with every default set except BaseURL and Model, and the
// three zeros that Run derives from other fields (NumRequests, Random.NumPrompts,
// MaxConcurrency; see Config).
func DefaultConfig() Config {
	return Config{
		Endpoint: EndpointChat, Stream: true, IgnoreEOS: true, Timeout: DefaultTimeout,
		Workload: WorkloadRandom, Arrival: ArrivalPoisson, TimelineInterval: DefaultTimelineInterval,
		Random:       RandomConfig{InputLen: 1024, OutputLen: 128, Distribution: LengthUniform},
		SharedPrefix: SharedPrefixConfig{NumGroups: 64, PromptsPerGroup: 16, SystemPromptLen: 2048, QuestionLen: 128, OutputLen: 256},
		MultiTurn:    MultiTurnConfig{Users: 16, Rounds: 4, TurnLen: 128, OutputLen: 128},
		MixedSize:    MixedSizeConfig{NumPrompts: 4096, ShortLen: 256, LongLen: 7680, LongFraction: 0.1, OutputLen: 32},
		Raw:          RawConfig{OutputTokens: 8},
	}
}

// Defaults, exported for documentation and flag help.
const (
	DefaultTimeout          = 5 * time.Minute
	DefaultTimelineInterval = time.Second
	defaultRawRequests      = 1000
	defaultRandomPrompts    = 1000
)

// derive sets the zeros whose meaning depends on other fields (see Config): the random
// workload's distinct prompts and, without a Duration, the workload's size as NumRequests.
// It is idempotent.
func (c *Config) derive() {
	if c.Random.NumPrompts == 0 {
		c.Random.NumPrompts = defaultRandomPrompts
		if c.NumRequests > 0 && c.NumRequests < defaultRandomPrompts {
			c.Random.NumPrompts = c.NumRequests
		}
	}
	if c.NumRequests == 0 && c.Duration == 0 {
		c.NumRequests = c.naturalSize()
	}
}

// naturalSize is the number of distinct requests a workload defines.
func (c *Config) naturalSize() int {
	switch c.Workload {
	case WorkloadSharedPrefix:
		return c.SharedPrefix.NumGroups * c.SharedPrefix.PromptsPerGroup
	case WorkloadMultiTurn:
		return c.MultiTurn.Users * c.MultiTurn.Rounds
	case WorkloadMixedSize:
		return c.MixedSize.NumPrompts
	case WorkloadRaw:
		return defaultRawRequests
	default:
		return c.Random.NumPrompts
	}
}

// closedLoop reports whether the run is a closed loop (no request rate).
func (c *Config) closedLoop() bool { return c.RequestRate == 0 }

// clients is the closed loop's client count.
func (c *Config) clients() int { return max(c.MaxConcurrency, 1) }

// requestURL is the full URL requests are posted to (PD mode: unused, each worker has its
// own, see workerRequestURL).
func (c *Config) requestURL() string {
	base := strings.TrimRight(c.BaseURL, "/")
	switch c.Endpoint {
	case EndpointCompletions:
		return base + "/completions"
	case EndpointGenerate:
		return strings.TrimSuffix(base, "/v1") + "/generate"
	default:
		return base + "/chat/completions"
	}
}

// workerRequestURL is the URL requests are posted to on a PD worker given as
// "http://host:port" (a trailing "/v1" is accepted).
func (c *Config) workerRequestURL(worker string) string {
	base := strings.TrimSuffix(strings.TrimRight(worker, "/"), "/v1")
	switch c.Endpoint {
	case EndpointCompletions:
		return base + "/v1/completions"
	case EndpointGenerate:
		return base + "/generate"
	default:
		return base + "/v1/chat/completions"
	}
}
