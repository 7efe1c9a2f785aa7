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

	"github.com/smg-go/smg/loadgen"
)

// runFlags binds the run command's flags to c; each flag's default is c's value.
func runFlags(fs *flag.FlagSet, c *loadgen.Config) (output, html, progress *string) {
	requestFlags(fs, c)
	scheduleFlags(fs, c)
	workloadFlags(fs, c)
	pdFlags(fs, c)
	output = fs.String("output", "", "write the JSON result to this file")
	html = fs.String("html", "", "write a self-contained HTML report to this file")
	progress = fs.String("progress", "auto", "progress bar on stderr: auto (when a terminal), on or off")
	return output, html, progress
}

// requestFlags binds where requests go and what each one carries.
func requestFlags(fs *flag.FlagSet, c *loadgen.Config) {
	fs.StringVar(&c.BaseURL, "base-url", c.BaseURL, "OpenAI-compatible base URL, e.g. http://127.0.0.1:30000/v1 (https:// for TLS)")
	fs.StringVar(&c.Model, "model", c.Model, "model name sent in requests (required for chat and completions)")
	fs.StringVar(&c.APIKey, "api-key", c.APIKey, "bearer token; when empty, $OPENAI_API_KEY (never printed as a default)")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "skip TLS certificate verification")
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
	fs.StringVar(&c.SessionHeader, "session-header", c.SessionHeader, "header carrying each request's session (conversation, prefix group, prompt), e.g. X-SMG-Routing-Key")
}

// scheduleFlags binds which workload runs, how requests arrive and how many are sent.
func scheduleFlags(fs *flag.FlagSet, c *loadgen.Config) {
	fs.Var(enumFlag[loadgen.WorkloadKind]{&c.Workload, []string{"random", "shared-prefix", "multi-turn", "mixed-size", "raw"}}, "workload", "`random|shared-prefix|multi-turn|mixed-size|raw`")
	fs.Float64Var(&c.RequestRate, "request-rate", c.RequestRate, "open loop at this many requests/s; 0 = closed loop of --max-concurrency clients")
	fs.Var(enumFlag[loadgen.ArrivalKind]{&c.Arrival, []string{"poisson", "constant"}}, "arrival", "open-loop arrivals: `poisson|constant`")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "stop issuing requests after this long")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "seed of prompts, lengths, order and arrivals")
	fs.DurationVar(&c.TimelineInterval, "timeline-interval", c.TimelineInterval, "bucket width of the throughput/latency-over-time timeline")
	intFlags(fs,
		intFlag{&c.MaxConcurrency, "max-concurrency", "cap on requests in flight (open loop; 0 = none) or number of clients (closed loop; 0 = 1)"},
		intFlag{&c.NumRequests, "num-requests", "measured requests (default: the workload's size, or no limit with --duration)"},
		intFlag{&c.Warmup, "warmup", "unmeasured requests sent first (an open loop: its first arrivals, on the same schedule)"},
		intFlag{&c.StartAt, "start-at", "position in the workload's order of the first request (not multi-turn): two load generators with one seed send the same prompts out of step"},
	)
}

// workloadFlags binds each workload's shape; a flag's prefix names its workload.
func workloadFlags(fs *flag.FlagSet, c *loadgen.Config) {
	fs.Var(enumFlag[loadgen.LengthDistribution]{&c.Random.Distribution, []string{"uniform", "exponential"}}, "random-distribution", "random: lengths `uniform|exponential` (exponential: mean len, cut at 8·len)")
	fs.Float64Var(&c.Random.RangeRatio, "random-range-ratio", c.Random.RangeRatio, "random, uniform: lengths in [len*ratio, len]")
	fs.DurationVar(&c.MultiTurn.ThinkTime, "think-time", c.MultiTurn.ThinkTime, "multi-turn: pause between an answer and the next turn")
	fs.BoolVar(&c.MultiTurn.Stagger, "mt-stagger", c.MultiTurn.Stagger, "multi-turn: user u's first conversation has 1 + u mod --mt-rounds rounds, so the users are not in step")
	fs.Float64Var(&c.MixedSize.LongFraction, "ms-long-fraction", c.MixedSize.LongFraction, "mixed-size: share of long prompts, in (0, 1] (exactly round(num-prompts × fraction), at seeded positions)")
	intFlags(fs,
		intFlag{&c.Random.InputLen, "random-input-len", "random: maximum prompt tokens"},
		intFlag{&c.Random.OutputLen, "random-output-len", "random: maximum output tokens"},
		intFlag{&c.Random.NumPrompts, "random-num-prompts", "random: distinct prompts, cycled (default min(num-requests, 1000))"},

		intFlag{&c.SharedPrefix.NumGroups, "gsp-num-groups", "shared-prefix: groups (one system prompt each)"},
		intFlag{&c.SharedPrefix.PromptsPerGroup, "gsp-prompts-per-group", "shared-prefix: questions per group"},
		intFlag{&c.SharedPrefix.SystemPromptLen, "gsp-system-prompt-len", "shared-prefix: system prompt tokens"},
		intFlag{&c.SharedPrefix.QuestionLen, "gsp-question-len", "shared-prefix: question tokens"},
		intFlag{&c.SharedPrefix.OutputLen, "gsp-output-len", "shared-prefix: output tokens"},

		intFlag{&c.MultiTurn.Users, "mt-users", "multi-turn: conversations"},
		intFlag{&c.MultiTurn.Rounds, "mt-rounds", "multi-turn: user turns per conversation"},
		intFlag{&c.MultiTurn.SystemPromptLen, "mt-system-prompt-len", "multi-turn: per-user system prompt tokens"},
		intFlag{&c.MultiTurn.TurnLen, "mt-turn-len", "multi-turn: tokens per user turn"},
		intFlag{&c.MultiTurn.OutputLen, "mt-output-len", "multi-turn: output tokens per answer"},

		intFlag{&c.MixedSize.NumPrompts, "ms-num-prompts", "mixed-size: distinct prompts, cycled"},
		intFlag{&c.MixedSize.ShortLen, "ms-short-len", "mixed-size: tokens of a short prompt"},
		intFlag{&c.MixedSize.LongLen, "ms-long-len", "mixed-size: tokens of a long prompt"},
		intFlag{&c.MixedSize.OutputLen, "ms-output-len", "mixed-size: output tokens"},

		intFlag{&c.Raw.OutputTokens, "output-tokens", "raw: max_tokens of the fixed request"},
	)
}

// pdFlags binds PD mode: each request sent to a prefill and a decode worker.
func pdFlags(fs *flag.FlagSet, c *loadgen.Config) {
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
}

// intFlag is an integer flag whose default is the value p points at.
type intFlag struct {
	p           *int
	name, usage string
}

func intFlags(fs *flag.FlagSet, flags ...intFlag) {
	for _, f := range flags {
		fs.IntVar(f.p, f.name, *f.p, f.usage)
	}
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
	cmd := newCommand("loadgen run", "loadgen", "", stderr)
	fs := cmd.flags
	output, html, progress := runFlags(fs, &cfg)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of loadgen itself to this file")
	rest, code, done := cmd.parse(args)
	if done {
		return cfg, opts, code, true
	}
	opts = runOptions{output: *output, html: *html, progress: *progress, cpuProfile: *cpuProfile}
	if len(rest) > 0 {
		return cfg, opts, cmd.fail(exitUsage, "%s", unexpectedArgument(rest)), true
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
		return cfg, opts, cmd.fail(exitUsage, "invalid value %q for flag --progress: use auto, on or off", opts.progress), true
	}
	if err := cfg.Validate(); err != nil {
		return cfg, opts, cmd.fail(exitUsage, "invalid configuration:\n%v", err), true
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
	if err := writeHTML(*html, res); err != nil {
		fmt.Fprintf(stderr, "loadgen: cannot write HTML report: %v\n", err)
		return exitFail
	}
	if res.Completed == 0 {
		fmt.Fprintf(stderr, "loadgen: no request succeeded: %v\n", res.StatusCounts)
		return exitFail
	}
	return exitOK
}

// writeHTML writes res's HTML report to path; an empty path writes nothing.
func writeHTML(path string, res *loadgen.Result) error {
	if path == "" {
		return nil
	}
	return writeFile(path, func(w io.Writer) error { return loadgen.WriteHTML(w, res) })
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
