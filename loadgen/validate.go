package loadgen

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
)

// maxPromptTokens bounds prompt sizes so a typo cannot allocate gigabytes of prompt text.
const maxPromptTokens = 1 << 20

// Validate reports every problem with the configuration, each saying how to fix it; a
// Config not built from DefaultConfig fails here on its zero fields. Run calls it; call it
// yourself to check flags early.
func (c Config) Validate() error {
	c.derive()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	c.validateRequests(bad)
	c.validateSchedule(bad)
	c.validateWorkloads(bad)
	return errors.Join(errs...)
}

// validateRequests checks where requests go and what each one carries.
func (c *Config) validateRequests(bad func(format string, args ...any)) {
	c.PD.validate(c, bad) // in PD mode the workers' URLs replace BaseURL
	switch {
	case c.PD.enabled():
	case c.BaseURL == "":
		bad("BaseURL (--base-url) is required: give the server's OpenAI base, e.g. http://127.0.0.1:30000/v1 (or PD workers: --pd-prefill and --pd-decode)")
	default:
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("BaseURL (--base-url) %q is not an http:// or https:// URL with a host: use e.g. http://127.0.0.1:30000/v1", c.BaseURL)
		}
	}
	switch c.Endpoint {
	case EndpointChat, EndpointCompletions:
		if c.Model == "" {
			bad("Model (--model) is required for the %s endpoint: give the served model name", c.Endpoint)
		}
	case EndpointGenerate:
	default:
		bad("Endpoint (--endpoint) %q is unknown: use chat, completions or generate", c.Endpoint)
	}
	switch c.Workload {
	case WorkloadRandom, WorkloadSharedPrefix, WorkloadMultiTurn, WorkloadMixedSize, WorkloadRaw:
	default:
		bad("Workload (--workload) %q is unknown: use random, shared-prefix, multi-turn, mixed-size or raw", c.Workload)
	}
	for name := range c.Headers {
		if !validHeaderName(name) {
			bad("header name %q (--header) is not a valid HTTP header name: use letters, digits and -", name)
		}
	}
	if c.SessionHeader != "" && !validHeaderName(c.SessionHeader) {
		bad("SessionHeader (--session-header) %q is not a valid HTTP header name: use letters, digits and -", c.SessionHeader)
	}
	if c.Workload == WorkloadRaw && c.Endpoint != EndpointChat {
		bad("Workload raw sends a chat request: use --endpoint chat with --workload raw")
	}
}

// validateSchedule checks how requests arrive, how many are sent and for how long.
func (c *Config) validateSchedule(bad func(format string, args ...any)) {
	switch c.Arrival {
	case ArrivalPoisson, ArrivalConstant:
	default:
		bad("Arrival (--arrival) %q is unknown: use poisson or constant", c.Arrival)
	}
	if c.RequestRate < 0 || math.IsNaN(c.RequestRate) || math.IsInf(c.RequestRate, 0) {
		bad("RequestRate (--request-rate) %v must be a finite number ≥ 0: 0 runs a closed loop, a positive value is requests per second", c.RequestRate)
	}
	nonNegative := []struct {
		name string
		v    int64
	}{
		{"MaxConcurrency (--max-concurrency)", int64(c.MaxConcurrency)},
		{"NumRequests (--num-requests)", int64(c.NumRequests)},
		{"Warmup (--warmup)", int64(c.Warmup)},
		{"StartAt (--start-at)", int64(c.StartAt)},
		{"Duration (--duration)", int64(c.Duration)},
		{"MultiTurn.ThinkTime (--think-time)", int64(c.MultiTurn.ThinkTime)},
		{"MultiTurn.SystemPromptLen (--mt-system-prompt-len)", int64(c.MultiTurn.SystemPromptLen)},
	}
	if c.StartAt > 0 && c.Workload == WorkloadMultiTurn {
		bad("StartAt (--start-at) %d: multi-turn conversations have no prebuilt order; leave it 0", c.StartAt)
	}
	if c.Timeout <= 0 {
		bad("Timeout (--timeout) %v: use a positive duration (default %v; start from loadgen.DefaultConfig())", c.Timeout, DefaultTimeout)
	}
	if c.TimelineInterval <= 0 {
		bad("TimelineInterval %v: use a positive duration (default %v; start from loadgen.DefaultConfig())", c.TimelineInterval, DefaultTimelineInterval)
	}
	for _, f := range nonNegative {
		if f.v < 0 {
			bad("%s is negative: use 0 or a positive value", f.name)
		}
	}
}

// validateWorkloads checks each workload's shape: lengths, counts and shares.
func (c *Config) validateWorkloads(bad func(format string, args ...any)) {
	lengths := []struct {
		name string
		v    int
	}{
		{"Random.InputLen (--random-input-len)", c.Random.InputLen},
		{"Random.OutputLen (--random-output-len)", c.Random.OutputLen},
		{"Random.NumPrompts (--random-num-prompts)", c.Random.NumPrompts},
		{"SharedPrefix.NumGroups (--gsp-num-groups)", c.SharedPrefix.NumGroups},
		{"SharedPrefix.PromptsPerGroup (--gsp-prompts-per-group)", c.SharedPrefix.PromptsPerGroup},
		{"SharedPrefix.SystemPromptLen (--gsp-system-prompt-len)", c.SharedPrefix.SystemPromptLen},
		{"SharedPrefix.QuestionLen (--gsp-question-len)", c.SharedPrefix.QuestionLen},
		{"SharedPrefix.OutputLen (--gsp-output-len)", c.SharedPrefix.OutputLen},
		{"MultiTurn.Users (--mt-users)", c.MultiTurn.Users},
		{"MultiTurn.Rounds (--mt-rounds)", c.MultiTurn.Rounds},
		{"MultiTurn.TurnLen (--mt-turn-len)", c.MultiTurn.TurnLen},
		{"MultiTurn.OutputLen (--mt-output-len)", c.MultiTurn.OutputLen},
		{"MixedSize.NumPrompts (--ms-num-prompts)", c.MixedSize.NumPrompts},
		{"MixedSize.ShortLen (--ms-short-len)", c.MixedSize.ShortLen},
		{"MixedSize.LongLen (--ms-long-len)", c.MixedSize.LongLen},
		{"MixedSize.OutputLen (--ms-output-len)", c.MixedSize.OutputLen},
		{"Raw.OutputTokens (--output-tokens)", c.Raw.OutputTokens},
	}
	for _, f := range lengths {
		if f.v < 1 || f.v > maxPromptTokens {
			bad("%s = %d is out of range: use 1..%d (start from loadgen.DefaultConfig())", f.name, f.v, maxPromptTokens)
		}
	}
	switch c.Random.Distribution {
	case LengthUniform, LengthExponential:
	default:
		bad("Random.Distribution (--random-distribution) %q is unknown: use uniform or exponential", c.Random.Distribution)
	}
	if c.Random.RangeRatio < 0 || c.Random.RangeRatio > 1 || math.IsNaN(c.Random.RangeRatio) {
		bad("Random.RangeRatio (--random-range-ratio) %v must be in [0, 1]: 1 fixes the lengths, 0 draws them from [1, len]", c.Random.RangeRatio)
	}
	if !(c.MixedSize.LongFraction > 0 && c.MixedSize.LongFraction <= 1) {
		bad("MixedSize.LongFraction (--ms-long-fraction) %v must be in (0, 1]: the share of long prompts, e.g. 0.1 (use the random workload for one size)", c.MixedSize.LongFraction)
	}
	if c.Workload == WorkloadMixedSize && c.MixedSize.NumPrompts > 1<<16 {
		bad("MixedSize.NumPrompts (--ms-num-prompts) %d is too many: keep it under %d (prompts are built before the run)", c.MixedSize.NumPrompts, 1<<16)
	}
	if c.SharedPrefix.NumGroups*c.SharedPrefix.PromptsPerGroup > 1<<20 {
		bad("SharedPrefix groups × prompts per group = %d is too many: keep it under %d", c.SharedPrefix.NumGroups*c.SharedPrefix.PromptsPerGroup, 1<<20)
	}
	if c.Workload == WorkloadMultiTurn && c.RequestRate == 0 && c.MaxConcurrency > c.MultiTurn.Users {
		bad("MaxConcurrency (--max-concurrency) %d exceeds MultiTurn.Users (--mt-users) %d: a closed loop cannot have more requests in flight than conversations; raise --mt-users or lower --max-concurrency", c.MaxConcurrency, c.MultiTurn.Users)
	}
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
