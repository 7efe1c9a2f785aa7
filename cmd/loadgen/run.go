package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/loadgen"
)

// runFlags binds the run command's flags to a Config.
func runFlags(fs *flag.FlagSet, c *loadgen.Config) (output, html, progress *string) {
	fs.StringVar(&c.BaseURL, "base-url", "", "OpenAI-compatible base URL, e.g. http://127.0.0.1:30000/v1 (https:// for TLS)")
	fs.StringVar(&c.Model, "model", "", "model name sent in requests (required for chat and completions)")
	fs.StringVar(&c.APIKey, "api-key", "", "bearer token; when empty, $OPENAI_API_KEY (never printed as a default)")
	fs.BoolVar(&c.Insecure, "insecure", false, "skip TLS certificate verification")
	fs.Var(enumFlag[loadgen.Endpoint]{&c.Endpoint, []string{"chat", "completions", "generate"}}, "endpoint", "API: `chat|completions|generate` (SGLang /generate at the server root)")
	fs.BoolVar(&c.Stream, "stream", c.Stream, "stream answers as server-sent events (TTFT, ITL and TPOT need it)")
	fs.BoolFunc("disable-ignore-eos", "do not send ignore_eos (strict OpenAI servers reject it)", func(v string) error {
		disable, err := strconv.ParseBool(v)
		c.IgnoreEOS = !disable
		return err
	})
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "per-request timeout, send to last byte")
	fs.Func("header", "extra request header `Name: value` (repeatable)", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok {
			return errors.New(`want "Name: value"`)
		}
		if c.Headers == nil {
			c.Headers = map[string]string{}
		}
		c.Headers[strings.TrimSpace(name)] = strings.TrimSpace(value)
		return nil
	})
	fs.StringVar(&c.SessionHeader, "session-header", "", "header carrying each request's session (conversation, prefix group, prompt), e.g. X-SMG-Routing-Key")

	fs.Var(enumFlag[loadgen.WorkloadKind]{&c.Workload, []string{"random", "shared-prefix", "multi-turn", "mixed-size", "raw"}}, "workload", "`random|shared-prefix|multi-turn|mixed-size|raw`")
	fs.Float64Var(&c.RequestRate, "request-rate", 0, "open loop at this many requests/s; 0 = closed loop of --max-concurrency clients")
	fs.Var(enumFlag[loadgen.ArrivalKind]{&c.Arrival, []string{"poisson", "constant"}}, "arrival", "open-loop arrivals: `poisson|constant`")
	fs.IntVar(&c.MaxConcurrency, "max-concurrency", 0, "cap on requests in flight (open loop; 0 = none) or number of clients (closed loop; 0 = 1)")
	fs.IntVar(&c.NumRequests, "num-requests", 0, "measured requests (default: the workload's size, or no limit with --duration)")
	fs.DurationVar(&c.Duration, "duration", 0, "stop issuing requests after this long")
	fs.IntVar(&c.Warmup, "warmup", 0, "unmeasured requests sent first (an open loop: its first arrivals, on the same schedule)")
	fs.Int64Var(&c.Seed, "seed", 0, "seed of prompts, lengths, order and arrivals")
	fs.IntVar(&c.StartAt, "start-at", 0, "position in the workload's order of the first request (not multi-turn): two load generators with one seed send the same prompts out of step")
	fs.DurationVar(&c.TimelineInterval, "timeline-interval", c.TimelineInterval, "bucket width of the throughput/latency-over-time timeline")

	fs.IntVar(&c.Random.InputLen, "random-input-len", c.Random.InputLen, "random: maximum prompt tokens")
	fs.IntVar(&c.Random.OutputLen, "random-output-len", c.Random.OutputLen, "random: maximum output tokens")
	fs.Var(enumFlag[loadgen.LengthDistribution]{&c.Random.Distribution, []string{"uniform", "exponential"}}, "random-distribution", "random: lengths `uniform|exponential` (exponential: mean len, cut at 8·len)")
	fs.Float64Var(&c.Random.RangeRatio, "random-range-ratio", 0, "random, uniform: lengths in [len*ratio, len]")
	fs.IntVar(&c.Random.NumPrompts, "random-num-prompts", 0, "random: distinct prompts, cycled (default min(num-requests, 1000))")

	fs.IntVar(&c.SharedPrefix.NumGroups, "gsp-num-groups", c.SharedPrefix.NumGroups, "shared-prefix: groups (one system prompt each)")
	fs.IntVar(&c.SharedPrefix.PromptsPerGroup, "gsp-prompts-per-group", c.SharedPrefix.PromptsPerGroup, "shared-prefix: questions per group")
	fs.IntVar(&c.SharedPrefix.SystemPromptLen, "gsp-system-prompt-len", c.SharedPrefix.SystemPromptLen, "shared-prefix: system prompt tokens")
	fs.IntVar(&c.SharedPrefix.QuestionLen, "gsp-question-len", c.SharedPrefix.QuestionLen, "shared-prefix: question tokens")
	fs.IntVar(&c.SharedPrefix.OutputLen, "gsp-output-len", c.SharedPrefix.OutputLen, "shared-prefix: output tokens")

	fs.IntVar(&c.MultiTurn.Users, "mt-users", c.MultiTurn.Users, "multi-turn: conversations")
	fs.IntVar(&c.MultiTurn.Rounds, "mt-rounds", c.MultiTurn.Rounds, "multi-turn: user turns per conversation")
	fs.IntVar(&c.MultiTurn.SystemPromptLen, "mt-system-prompt-len", 0, "multi-turn: per-user system prompt tokens")
	fs.IntVar(&c.MultiTurn.TurnLen, "mt-turn-len", c.MultiTurn.TurnLen, "multi-turn: tokens per user turn")
	fs.IntVar(&c.MultiTurn.OutputLen, "mt-output-len", c.MultiTurn.OutputLen, "multi-turn: output tokens per answer")
	fs.DurationVar(&c.MultiTurn.ThinkTime, "think-time", 0, "multi-turn: pause between an answer and the next turn")
	fs.BoolVar(&c.MultiTurn.Stagger, "mt-stagger", false, "multi-turn: user u's first conversation has 1 + u mod --mt-rounds rounds, so the users are not in step")

	fs.IntVar(&c.MixedSize.NumPrompts, "ms-num-prompts", c.MixedSize.NumPrompts, "mixed-size: distinct prompts, cycled")
	fs.IntVar(&c.MixedSize.ShortLen, "ms-short-len", c.MixedSize.ShortLen, "mixed-size: tokens of a short prompt")
	fs.IntVar(&c.MixedSize.LongLen, "ms-long-len", c.MixedSize.LongLen, "mixed-size: tokens of a long prompt")
	fs.Float64Var(&c.MixedSize.LongFraction, "ms-long-fraction", c.MixedSize.LongFraction, "mixed-size: share of long prompts, in (0, 1] (exactly round(num-prompts × fraction), at seeded positions)")
	fs.IntVar(&c.MixedSize.OutputLen, "ms-output-len", c.MixedSize.OutputLen, "mixed-size: output tokens")

	fs.IntVar(&c.Raw.OutputTokens, "output-tokens", c.Raw.OutputTokens, "raw: max_tokens of the fixed request")

	fs.Func("pd-prefill", "PD mode: a prefill worker `URL` (http://host:port), sent every request with a decode worker instead of --base-url; repeatable or comma-separated, used round robin", listFlag(&c.PD.Prefill))
	fs.Func("pd-decode", "PD mode: a decode worker `URL`; repeatable or comma-separated, used round robin", listFlag(&c.PD.Decode))
	fs.Func("pd-bootstrap-port", "PD mode: the prefill workers' KV bootstrap port sent as bootstrap_port, `N|none` (none, the default, sends null)", func(v string) error {
		if v == "none" {
			c.PD.BootstrapPort = 0
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return errors.New("want a port in 1-65535 or none")
		}
		c.PD.BootstrapPort = n
		return nil
	})

	output = fs.String("output", "", "write the JSON result to this file")
	html = fs.String("html", "", "write a self-contained HTML report to this file")
	progress = fs.String("progress", "auto", "progress bar on stderr: auto (when a terminal), on or off")
	return output, html, progress
}

// listFlag appends the comma-separated values of each occurrence to *list.
func listFlag(list *[]string) func(string) error {
	return func(v string) error {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*list = append(*list, item)
			}
		}
		return nil
	}
}

// startCPUProfile profiles the load generator itself, for tuning it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runOptions are the run command's settings that are not part of loadgen.Config.
type runOptions struct {
	output, html, progress, cpuProfile string
}

// parseRun turns the run command's arguments into a validated Config. When it returns
// done, the command ends with code (help printed, or a usage error reported on stderr).
func parseRun(args []string, stderr io.Writer) (cfg loadgen.Config, opts runOptions, code int, done bool) {
	cfg = loadgen.DefaultConfig()
	fs := flag.NewFlagSet("loadgen run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output, html, progress := runFlags(fs, &cfg)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of loadgen itself to this file")
	rest, err := cli.ParseStd(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, opts, exitOK, true
		}
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return cfg, opts, exitUsage, true
	}
	opts = runOptions{output: *output, html: *html, progress: *progress, cpuProfile: *cpuProfile}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "loadgen: %s\n", unexpectedArgument(rest))
		return cfg, opts, exitUsage, true
	}
	if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	switch opts.progress {
	case "on":
		cfg.Progress = stderr
	case "auto":
		if isTerminal(stderr) {
			cfg.Progress = stderr
		}
	case "off":
	default:
		fmt.Fprintf(stderr, "loadgen: invalid value %q for flag --progress: use auto, on or off\n", opts.progress)
		return cfg, opts, exitUsage, true
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "loadgen: invalid configuration:\n%v\n", err)
		return cfg, opts, exitUsage, true
	}
	return cfg, opts, exitOK, false
}

func runCommand(args []string, stdout, stderr io.Writer) int {
	cfg, opts, code, done := parseRun(args, stderr)
	if done {
		return code
	}
	output, html, cpuProfile := &opts.output, &opts.html, &opts.cpuProfile

	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: cannot profile (flag --cpuprofile): %v\n", err)
		return exitFail
	}
	// The first interrupt stops issuing requests and reports what finished; a second one
	// kills the process as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	res, err := loadgen.Run(ctx, cfg)
	stopProfile()
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return exitFail
	}
	printSummary(stdout, res)
	if *output != "" {
		if err := writeFile(*output, res.WriteJSON); err != nil {
			fmt.Fprintf(stderr, "loadgen: cannot write result: %v\n", err)
			return exitFail
		}
	}
	if *html != "" {
		if err := writeFile(*html, func(w io.Writer) error { return loadgen.WriteHTML(w, res) }); err != nil {
			fmt.Fprintf(stderr, "loadgen: cannot write HTML report: %v\n", err)
			return exitFail
		}
	}
	if res.Completed == 0 {
		fmt.Fprintf(stderr, "loadgen: no request succeeded: %v\n", res.StatusCounts)
		return exitFail
	}
	return exitOK
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// enumFlag is a string flag restricted to a few values.
type enumFlag[T ~string] struct {
	p       *T
	choices []string
}

func (e enumFlag[T]) String() string {
	if e.p == nil {
		return ""
	}
	return string(*e.p)
}

func (e enumFlag[T]) Set(s string) error {
	for _, c := range e.choices {
		if s == c {
			*e.p = T(s)
			return nil
		}
	}
	return fmt.Errorf("use one of %v", e.choices)
}

// unexpectedArgument says what to run instead of a run command line with positional
// arguments: result files are compare's (two) or report's (one); anything else is a command
// loadgen does not have, or a flag's value without its flag.
func unexpectedArgument(rest []string) string {
	json := 0
	for _, a := range rest {
		if strings.HasSuffix(a, ".json") {
			json++
		}
	}
	switch {
	case json == 2 && len(rest) == 2:
		return fmt.Sprintf("unexpected arguments %q %q: to compare two results, run 'loadgen compare %s %s'", rest[0], rest[1], rest[0], rest[1])
	case json == 1 && len(rest) == 1:
		return fmt.Sprintf("unexpected argument %q: to summarize a result, run 'loadgen report %s'", rest[0], rest[0])
	}
	return fmt.Sprintf("unexpected argument %q: loadgen's commands are run, compare, report and fakeserver, and run takes flags only (run 'loadgen --help')", rest[0])
}
