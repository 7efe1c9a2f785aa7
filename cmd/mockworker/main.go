package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/mockworker"
)

// startProcs is the process's GOMAXPROCS before run changes it (run stays repeatable in tests).
var startProcs = runtime.GOMAXPROCS(0)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run is main without the process: it returns the exit code. stop, when non-nil, replaces the
// signal channel (tests).
func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	cfg, requestLog, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintf(stderr, "mockworker: %v\n", err)
		return 2
	}
	if requestLog != "" {
		f, err := os.Create(requestLog)
		if err != nil {
			fmt.Fprintf(stderr, "mockworker: cannot create the request log (--request-log): %v\n", err)
			return 1
		}
		defer f.Close()
		cfg.RequestLog = f
	}
	// The engine model's timers need Ps that the event loops' waits do not hold.
	runtime.GOMAXPROCS(cfg.SchedulerProcs(startProcs))
	fleet, err := mockworker.Start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "mockworker: %v\n", err)
		return 1
	}
	cfg = fleet.Config()
	pd := ""
	if cfg.Role != mockworker.RoleUnified {
		pd = fmt.Sprintf(", role %s, bootstrap port %d", cfg.Role, fleet.BootstrapPort())
	}
	for i, w := range fleet.Workers() {
		kv := ""
		if cfg.KVEvents {
			kv = fmt.Sprintf(", kv events %s, replay %s", w.KVEventsEndpoint(), w.KVEventsReplayEndpoint())
		}
		fmt.Fprintf(stdout, "mockworker: worker %d listening on %s (model %s, dialect %s%s%s)\n",
			i, w.URL(), cfg.Model, cfg.Dialect, pd, kv)
	}
	if stop == nil {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		stop = sig
	}
	<-stop
	if err := fleet.Close(); err != nil {
		fmt.Fprintf(stderr, "mockworker: close: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags maps the command line onto a Config and the --request-log path (opened by run);
// every error names the flag to fix.
func parseFlags(args []string, stderr io.Writer) (cfg mockworker.Config, requestLog string, err error) {
	cfg, err = parseConfig(args, stderr, &requestLog)
	return cfg, requestLog, err
}

func parseConfig(args []string, stderr io.Writer, requestLog *string) (mockworker.Config, error) {
	f := &flagValues{cfg: mockworker.DefaultConfig()}
	fs := flag.NewFlagSet("mockworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs, requestLog)
	rest, err := cli.ParseStd(fs, args)
	if err != nil {
		return f.cfg, err
	}
	if len(rest) > 0 {
		return f.cfg, fmt.Errorf("unexpected argument %q: every option is a flag (see -h)", rest[0])
	}
	f.apply()
	if err := f.check(); err != nil {
		return f.cfg, err
	}
	return f.cfg, f.cfg.Validate()
}

// flagValues is the Config the flags fill, and the flags read in other units or types first.
type flagValues struct {
	cfg                   mockworker.Config
	dialect, server, mode string
	protocol              string
	role                  string
	kvTransferTimeoutMS   float64
	kvEventsPort          int
	kvEventsEncoding      string
	tokenIntervalMS       float64
	decodeBaseMS          float64
	decodePerReqMS        float64
}

// register defines the flags on fs, defaulting to f.cfg; --request-log goes to requestLog.
func (f *flagValues) register(fs *flag.FlagSet, requestLog *string) {
	fs.StringVar(&f.cfg.Host, "host", f.cfg.Host, "address every worker binds")
	fs.IntVar(&f.cfg.Port, "port", f.cfg.Port, "first worker's port; worker i listens on port+i; 0 picks free ports")
	fs.IntVar(&f.cfg.Count, "count", f.cfg.Count, "number of workers")
	fs.StringVar(&f.cfg.Model, "model", f.cfg.Model, "model name served and echoed")
	fs.StringVar(&f.dialect, "dialect", string(f.cfg.Dialect), "engine to imitate: sglang or vllm")
	fs.StringVar(&f.protocol, "protocol", string(f.cfg.Protocol), "wire served: http (the engine's HTTP API) or grpc (its gRPC service: sglang.grpc.scheduler.SglangScheduler or vllm.grpc.engine.VllmEngine by --dialect)")
	fs.StringVar(&f.cfg.TokenizerPath, "tokenizer-path", "", "a model directory (tokenizer.json, tokenizer_config.json); grpc: its tokenizer encodes the answer text, so the answer ids decode to it and end with the model's EOS id (default: position ids, no EOS); http: prompts are tokenized as the engine's front end does, so KV blocks and events name real token ids (default: 4-byte text pieces)")
	fs.IntVar(&f.cfg.OutputTokens, "output-tokens", f.cfg.OutputTokens, "tokens generated when a request names no maximum")
	fs.Float64Var(&f.tokenIntervalMS, "token-interval-ms", ms(f.cfg.TokenInterval), "pace streamed tokens this many ms apart (0: all at once)")
	fs.StringVar(&f.cfg.WorkerIDPrefix, "worker-id-prefix", "", "name worker i <prefix><i> instead of host:port")
	fs.StringVar(&f.server, "server", string(f.cfg.Server), "HTTP implementation: gnet or fasthttp")
	fs.StringVar(&f.cfg.TLSCert, "tls-cert", "", "serve over TLS with this PEM certificate (with --tls-key and --server fasthttp)")
	fs.StringVar(&f.cfg.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
	fs.IntVar(&f.cfg.EventLoops, "event-loops", f.cfg.EventLoops, "gnet event loops (default GOMAXPROCS)")
	fs.StringVar(&f.mode, "mode", string(f.cfg.Mode), "instant (null backend) or engine (continuous-batching model)")
	fs.IntVar(&f.cfg.KVTokens, "kv-tokens", f.cfg.KVTokens, "KV-cache capacity in tokens")
	fs.IntVar(&f.cfg.MaxRunning, "max-running", f.cfg.MaxRunning, "most requests in the running batch")
	fs.IntVar(&f.cfg.BlockSize, "block-size", f.cfg.BlockSize, "KV-cache page size in tokens (prefix caching works in whole pages)")
	fs.Float64Var(&f.cfg.PrefillTPS, "prefill-tps", f.cfg.PrefillTPS, "engine: prompt tokens computed per second")
	fs.IntVar(&f.cfg.PrefillChunk, "chunked-prefill-size", f.cfg.PrefillChunk, "engine: most prompt tokens computed per step")
	fs.Float64Var(&f.decodeBaseMS, "decode-base-ms", ms(f.cfg.DecodeBase), "engine: fixed time of a step, ms")
	fs.Float64Var(&f.decodePerReqMS, "decode-per-req-ms", ms(f.cfg.DecodePerReq), "engine: time a step adds per sequence in the batch, ms")
	fs.Float64Var(&f.cfg.TimeScale, "time-scale", f.cfg.TimeScale, "engine: run the model this many times faster than real time")
	fs.Func("decode-factors", "engine: a heterogeneous fleet, `i=f,...`: worker i's decode step (decode-base and decode-per-req) lasts f times as long, e.g. 6=2,7=2 makes workers 6 and 7 decode twice as slowly (prefill unchanged)", func(v string) error {
		factors, err := parseDecodeFactors(v)
		f.cfg.DecodeFactors = factors
		return err
	})
	fs.Uint64Var(&f.cfg.Seed, "seed", f.cfg.Seed, "seed of the random choices (admin failure_rate)")
	fs.StringVar(&f.role, "role", string(f.cfg.Role), `disaggregation role: "" (unified), prefill, decode or encode (EPD)`)
	fs.BoolVar(&f.cfg.RequireEncode, "require-encode", false, "prefill: refuse (400) a multimodal request without the EPD encode handshake (sglang dialect)")
	// The library's 0 picks a free port (tests start many fleets); the command defaults to
	// SGLang's --disaggregation-bootstrap-port, which a decode asks for when given none.
	fs.IntVar(&f.cfg.BootstrapPort, "bootstrap-port", mockworker.DefaultBootstrapPort, "prefill and encode: port of the fleet's rendezvous (0: a free port); decode: the port asked when bootstrap_port is null")
	fs.StringVar(&f.cfg.KVEngineID, "kv-engine-id", "", "vLLM prefill: the remote_engine_id reported (default: the worker id; with --count > 1, <id>-<i>)")
	fs.StringVar(requestLog, "request-log", "", "engine: write one JSON line per finished request (worker, arrival, prompt and cached tokens, the engine's state at arrival, TTFT) and per /v1/loads answer to this file, for routing studies")
	fs.IntVar(&f.kvEventsPort, "kv-events-port", -1, "engine: publish KV-cache events on ZMQ, worker i's PUB socket on this port + i and its replay ROUTER on this port + count + i (0: free ports; -1: off); --protocol grpc also serves SubscribeKvEvents")
	fs.StringVar(&f.kvEventsEncoding, "kv-events-encoding", string(f.cfg.KVEventsEncoding), "msgpack shape of the KV events: map (newer vLLM) or array (SGLang, older vLLM)")
	fs.IntVar(&f.cfg.KVEventsReplay, "kv-events-replay", f.cfg.KVEventsReplay, "KV event batches kept for replay (the engines' buffer_steps)")
	fs.Float64Var(&f.kvTransferTimeoutMS, "kv-transfer-timeout-ms", ms(f.cfg.KVTransferTimeout), "how long a decode waits for its prefill's KV and a prefill keeps an unclaimed one, ms")
}

// apply converts the flags read in other units or types into f.cfg.
func (f *flagValues) apply() {
	f.cfg.Dialect = mockworker.Dialect(f.dialect)
	f.cfg.Protocol = mockworker.Protocol(f.protocol)
	f.cfg.Mode = mockworker.Mode(f.mode)
	f.cfg.DecodeBase = time.Duration(f.decodeBaseMS * float64(time.Millisecond))
	f.cfg.DecodePerReq = time.Duration(f.decodePerReqMS * float64(time.Millisecond))
	f.cfg.Server = mockworker.ServerKind(f.server)
	f.cfg.TokenInterval = time.Duration(f.tokenIntervalMS * float64(time.Millisecond))
	f.cfg.Role = mockworker.Role(f.role)
	f.cfg.KVTransferTimeout = time.Duration(f.kvTransferTimeoutMS * float64(time.Millisecond))
	f.cfg.KVEvents, f.cfg.KVEventsPort = f.kvEventsPort >= 0, max(f.kvEventsPort, 0)
	f.cfg.KVEventsEncoding = mockworker.KVEncoding(f.kvEventsEncoding)
}

// check reports the first flag out of range, naming the flag and the fix.
func (f *flagValues) check() error {
	checks := []struct {
		flag string
		bad  bool
		fix  string
	}{
		{"--port", f.cfg.Port < 0 || f.cfg.Port > 65535, "use 0 (free ports) or 1..65535"},
		{"--count", f.cfg.Count < 1, "use at least 1"},
		{"--dialect", f.cfg.Dialect != mockworker.DialectSGLang && f.cfg.Dialect != mockworker.DialectVLLM, "use sglang or vllm"},
		{"--protocol", f.cfg.Protocol != mockworker.ProtocolHTTP && f.cfg.Protocol != mockworker.ProtocolGRPC, "use http or grpc"},
		{"--tokenizer-path", f.cfg.TokenizerPath != "" && !isDir(f.cfg.TokenizerPath), "give a model directory (tokenizer.json, tokenizer_config.json)"},
		{"--role", f.cfg.Role == mockworker.RoleEncode && f.cfg.Protocol == mockworker.ProtocolGRPC, "the engines' gRPC services have no encode leg: use --protocol http"},
		{"--output-tokens", f.cfg.OutputTokens < 1, "use at least 1"},
		{"--token-interval-ms", f.tokenIntervalMS < 0, "use 0 or a positive number"},
		{"--server", f.cfg.Server != mockworker.ServerGnet && f.cfg.Server != mockworker.ServerFastHTTP, "use gnet or fasthttp"},
		{"--tls-key", (f.cfg.TLSCert == "") != (f.cfg.TLSKey == ""), "give --tls-cert and --tls-key together"},
		{"--tls-cert", f.cfg.TLSCert != "" && f.cfg.Server != mockworker.ServerFastHTTP, "add --server fasthttp (the gnet server has no TLS)"},
		{"--event-loops", f.cfg.EventLoops < 1, "use a positive number (default GOMAXPROCS)"},
		{"--mode", f.cfg.Mode != mockworker.ModeInstant && f.cfg.Mode != mockworker.ModeEngine, "use instant or engine"},
		{"--kv-tokens", f.cfg.KVTokens < 1, "use a positive number"},
		{"--max-running", f.cfg.MaxRunning < 1, "use a positive number"},
		{"--block-size", f.cfg.BlockSize < 1 || f.cfg.BlockSize > f.cfg.KVTokens, "use 1..--kv-tokens"},
		{"--prefill-tps", !(f.cfg.PrefillTPS > 0) || math.IsInf(f.cfg.PrefillTPS, 0), "use a positive rate"},
		{"--chunked-prefill-size", f.cfg.PrefillChunk < 1, "use a positive number of tokens"},
		{"--decode-base-ms", !(f.decodeBaseMS > 0), "use a positive number"},
		{"--decode-per-req-ms", !(f.decodePerReqMS > 0), "use a positive number"},
		{"--time-scale", !(f.cfg.TimeScale > 0) || math.IsInf(f.cfg.TimeScale, 0), "use a positive factor"},
		{"--role", f.cfg.Role != mockworker.RoleUnified && f.cfg.Role != mockworker.RolePrefill && f.cfg.Role != mockworker.RoleDecode && f.cfg.Role != mockworker.RoleEncode, `use "" (unified), prefill, decode or encode`},
		{"--require-encode", f.cfg.RequireEncode && f.cfg.Role != mockworker.RolePrefill, "use it with --role prefill"},
		{"--bootstrap-port", f.cfg.BootstrapPort < 0 || f.cfg.BootstrapPort > 65535, "use 0 (a free port) or 1..65535"},
		{"--kv-transfer-timeout-ms", !(f.kvTransferTimeoutMS >= 1) || f.kvTransferTimeoutMS > 1e9, "use a positive number of ms (at least 1)"},
		{"--kv-events-port", f.kvEventsPort > 65535, "use -1 (off), 0 (free ports) or a port"},
		{"--kv-events-port", f.kvEventsPort >= 0 && f.cfg.Mode != mockworker.ModeEngine, "add --mode engine (events come from the engine model's KV cache)"},
		{"--kv-events-encoding", f.cfg.KVEventsEncoding != mockworker.KVEncodingMap && f.cfg.KVEventsEncoding != mockworker.KVEncodingArray, "use map or array"},
		{"--kv-engine-id", strings.ContainsAny(f.cfg.KVEngineID, "\"\\\r\n"), "remove quotes, backslashes and line breaks"},
		{"--model", f.cfg.Model == "", "name a model"},
		{"--host", f.cfg.Host == "", "name an address such as 127.0.0.1"},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("invalid %s: %s", c.flag, c.fix)
		}
	}
	if f.cfg.Port > 0 && f.cfg.Port+f.cfg.Count-1 > 65535 {
		return fmt.Errorf("invalid --port %d with --count %d: the last port passes 65535", f.cfg.Port, f.cfg.Count)
	}
	return nil
}

// parseDecodeFactors parses --decode-factors: comma-separated worker=factor pairs.
func parseDecodeFactors(v string) (map[int]float64, error) {
	factors := map[int]float64{}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		index, factor, ok := strings.Cut(pair, "=")
		i, errI := strconv.Atoi(strings.TrimSpace(index))
		f, errF := strconv.ParseFloat(strings.TrimSpace(factor), 64)
		if !ok || errI != nil || errF != nil {
			return nil, fmt.Errorf("%q is not worker=factor: write e.g. 6=2,7=2", pair)
		}
		if _, dup := factors[i]; dup {
			return nil, fmt.Errorf("worker %d appears twice: give each worker one factor", i)
		}
		factors[i] = f
	}
	return factors, nil
}

// ms renders a duration as the float milliseconds the flags take.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
