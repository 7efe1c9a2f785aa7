package mockworker

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"
)

// Dialect selects which engine a worker imitates: the routes and metric names it serves.
type Dialect string

const (
	// DialectSGLang imitates an SGLang server: /generate, /v1/loads, sglang:* metrics.
	DialectSGLang Dialect = "sglang"
	// DialectVLLM imitates a vLLM server: vllm:* metrics (stage 1 still serves /v1/loads).
	DialectVLLM Dialect = "vllm"
)

// Role is a worker's part in prefill-decode disaggregation (pd.go, doc.go).
type Role string

const (
	// RoleUnified (the default) is an ordinary engine: it ignores every PD field.
	RoleUnified Role = ""
	// RolePrefill computes prompts and publishes their KV on the fleet's rendezvous.
	RolePrefill Role = "prefill"
	// RoleDecode fetches a prompt's KV from its prefill's rendezvous, then generates.
	RoleDecode Role = "decode"
	// RoleEncode takes a multimodal request's media for the prefill (EPD): SGLang's encode
	// worker publishes an embedding record on the fleet's rendezvous under the request's
	// bootstrap_room, which an EPD prefill claims (epd.go); vLLM's answers one token.
	RoleEncode Role = "encode"
)

// Mode selects how a worker produces tokens.
type Mode string

const (
	// ModeInstant answers at once (or paced by Config.TokenInterval): the null backend.
	ModeInstant Mode = "instant"
	// ModeEngine runs the continuous-batching engine model (see engine.go and doc.go).
	ModeEngine Mode = "engine"
)

// ServerKind selects the HTTP implementation under the workers.
type ServerKind string

const (
	// ServerGnet serves HTTP/1.1 from gnet event loops: the cheapest per request (see doc.go).
	ServerGnet ServerKind = "gnet"
	// ServerFastHTTP serves with valyala/fasthttp: one goroutine per connection.
	ServerFastHTTP ServerKind = "fasthttp"
)

// Defaults: DefaultConfig's values (and cmd/mockworker's flag defaults).
const (
	DefaultHost         = "127.0.0.1"
	DefaultCount        = 1
	DefaultModel        = "mock-model"
	DefaultDialect      = DialectSGLang
	DefaultOutputTokens = 16
	DefaultServer       = ServerGnet
	DefaultKVTokens     = 131072
	DefaultMaxRunning   = 256
	DefaultMode         = ModeInstant
	DefaultBlockSize    = 16
	DefaultPrefillTPS   = 16000
	DefaultPrefillChunk = 8192
	DefaultDecodeBase   = 8 * time.Millisecond
	DefaultDecodePerReq = 100 * time.Microsecond
	DefaultTimeScale    = 1
	// DefaultBootstrapPort is SGLang's --disaggregation-bootstrap-port default; the command's
	// --bootstrap-port default (Config.BootstrapPort 0 picks a free port, like Config.Port).
	DefaultBootstrapPort     = 8998
	DefaultKVTransferTimeout = 10 * time.Second
)

// Config describes a fleet of mock workers. Start from DefaultConfig and change what you
// need: a zero field means zero (no pacing, a free port, seed 0), never "the default", and
// Validate refuses a zero where zero makes no sense (no workers, no model, no batch).
type Config struct {
	// Host is the address every worker binds. Default "127.0.0.1".
	Host string
	// Port is the first worker's port; worker i listens on Port+i. 0 lets every worker pick a
	// free port (read them from Fleet.Addrs). Default 0.
	Port int
	// Count is the number of workers. Default 1.
	Count int
	// Model is the model name served by /v1/models and echoed in responses. Default "mock-model".
	Model string
	// Dialect is "sglang" or "vllm". Default "sglang".
	Dialect Dialect
	// OutputTokens is the number of tokens generated when a request names no maximum. Default 16.
	OutputTokens int
	// TokenInterval paces streamed tokens in instant mode: token i (from 1) is written at
	// start + i×TokenInterval. 0 writes every token at once. Default 0. (Engine mode paces
	// by its model instead.)
	TokenInterval time.Duration
	// WorkerIDPrefix, when set, names worker i "<prefix><i>"; otherwise a worker is named by its
	// "host:port". The name is sent as x-mock-worker-id on every response.
	WorkerIDPrefix string
	// Server is "gnet" or "fasthttp". Default "gnet".
	Server ServerKind
	// TLSCert and TLSKey, when set (both, PEM files), serve every worker over TLS (https
	// URLs): a gateway's TLS client can be tested against a real engine process. Needs
	// Server "fasthttp" (the gnet server has no TLS). Default: plain HTTP.
	TLSCert, TLSKey string
	// EventLoops is the number of gnet event loops shared by the fleet. Default GOMAXPROCS
	// (when DefaultConfig is called).
	EventLoops int
	// Mode is "instant" (the null backend) or "engine" (the engine model). Default "instant".
	Mode Mode
	// KVTokens is the KV-cache capacity in tokens (max_total_num_tokens). Default 131072.
	KVTokens int
	// MaxRunning is the batch capacity (max_running_requests). Default 256.
	MaxRunning int

	// The engine model's parameters (Mode "engine"); model time, before TimeScale.

	// BlockSize is the KV-cache page size in tokens; prefix caching works in whole pages.
	// Default 16.
	BlockSize int
	// PrefillTPS is the prompt tokens computed per second. Default 16000.
	PrefillTPS float64
	// PrefillChunk is the most prompt tokens computed in one step (chunked prefill). Default 8192.
	PrefillChunk int
	// DecodeBase is the fixed time of a step. Default 8ms.
	DecodeBase time.Duration
	// DecodePerReq is the time a step adds per sequence producing a token. Default 100µs;
	// 0 models no batch effect.
	DecodePerReq time.Duration
	// TimeScale runs the model this many times faster than the wall clock (tests). Default 1.
	TimeScale float64
	// RequestLog, when set in engine mode, receives one JSON line per finished sequence (its
	// worker, arrival, prompt and cached tokens, the engine's state at its arrival, its TTFT)
	// and per /v1/loads answer: requestlog.go describes the fields. A debug output for routing
	// studies on real processes (cmd/mockworker --request-log). Default none.
	RequestLog io.Writer
	// DecodeFactors makes a heterogeneous fleet: worker i's decode part of a step
	// (DecodeBase + DecodePerReq × sequences) lasts DecodeFactors[i] times as long, as on a
	// slower accelerator; prefill is unchanged. {6: 2, 7: 2} gives two of eight workers a
	// decode step twice as slow. A worker without an entry uses 1. Default none.
	DecodeFactors map[int]float64
	// Seed makes the random choices (AdminConfig.FailureRate) repeatable. Default 0.
	Seed uint64

	// Prefill-decode disaggregation (pd.go, doc.go's "Prefill-decode roles").

	// Role is "" (a unified engine), "prefill" or "decode". Default "".
	Role Role
	// BootstrapPort is, for a prefill fleet, the port of its KV rendezvous on Host (one
	// listener per fleet; 0 picks a free one: read Fleet.BootstrapPort); for a decode fleet,
	// the port it contacts when a request's bootstrap_port is null (SGLang's default port).
	// Default 0 here; cmd/mockworker defaults to DefaultBootstrapPort (8998).
	BootstrapPort int
	// KVEngineID is the vLLM engine id a prefill reports as remote_engine_id. Default: the
	// worker's id; with Count > 1, worker i reports "<KVEngineID>-<i>".
	KVEngineID string
	// KVTransferTimeout is how long a decode waits for its prefill's KV and how long a
	// prefill's rendezvous keeps an unclaimed KV entry. Default 10s.
	KVTransferTimeout time.Duration
	// Protocol is "http" (the engines' HTTP APIs) or "grpc" (the engine's own gRPC service,
	// SGLang's or vLLM's by Dialect; grpc.go). Default "http".
	Protocol Protocol
	// TokenizerPath is a model directory (tokenizer.json, tokenizer_config.json). With Protocol
	// "grpc" its tokenizer encodes AnswerText once at start: the answer ids then decode to
	// AnswerText and end with the model's EOS id (empty: position ids, PositionTokenBase).
	// With Protocol "http" it tokenizes prompts as the engine's front end does (the chat
	// template over the messages, the text with special tokens), so the KV cache and its
	// events hold real token ids (empty: text cut into 4-byte pieces). Default "".
	TokenizerPath string
	// KVEvents makes every engine-mode worker publish its KV-cache events (kvevents.go): on a
	// ZMQ PUB socket on Host:KVEventsPort+i with a replay ROUTER socket on
	// Host:KVEventsPort+Count+i (0: free ports, read Worker.KVEventsEndpoint and
	// Worker.KVEventsReplayEndpoint), and, with Protocol "grpc", on SubscribeKvEvents.
	// Default false (cmd/mockworker: --kv-events-port).
	KVEvents bool
	// KVEventsPort is the first worker's PUB port (see KVEvents). Default 0.
	KVEventsPort int
	// KVEventsEncoding is the msgpack shape of the batches: "map" (newer vLLM) or "array"
	// (SGLang, older vLLM). Default "map".
	KVEventsEncoding KVEncoding
	// KVEventsReplay is how many batches the replay socket and SubscribeKvEvents can resend.
	// Default 10000 (the engines' buffer_steps).
	KVEventsReplay int
	// RequireEncode makes a prefill worker refuse (400) a multimodal request that carries no
	// encode handshake (SGLang: encode_bootstrap_room), as a language-only prefill of an EPD
	// deployment has no encoder of its own. Default false: such a prefill encodes locally.
	RequireEncode bool
}

// DefaultConfig returns one instant-mode SGLang worker of DefaultModel on a free port of
// DefaultHost, every engine parameter at its default.
func DefaultConfig() Config {
	return Config{
		Host:              DefaultHost,
		Count:             DefaultCount,
		Model:             DefaultModel,
		Dialect:           DefaultDialect,
		OutputTokens:      DefaultOutputTokens,
		Server:            DefaultServer,
		EventLoops:        runtime.GOMAXPROCS(0),
		Mode:              DefaultMode,
		KVTokens:          DefaultKVTokens,
		MaxRunning:        DefaultMaxRunning,
		BlockSize:         DefaultBlockSize,
		PrefillTPS:        DefaultPrefillTPS,
		PrefillChunk:      DefaultPrefillChunk,
		DecodeBase:        DefaultDecodeBase,
		DecodePerReq:      DefaultDecodePerReq,
		TimeScale:         DefaultTimeScale,
		KVTransferTimeout: DefaultKVTransferTimeout,
		Protocol:          ProtocolHTTP,
		KVEventsEncoding:  KVEncodingMap,
		KVEventsReplay:    DefaultKVEventsReplay,
	}
}

// Validate reports every problem in c, each saying how to fix it; a Config not built from
// DefaultConfig fails here on its zero fields.
// SchedulerProcs is the GOMAXPROCS a mockworker process should run with, given the one it
// has (procs): in engine mode on the gnet server, procs plus one P per event loop; else procs.
//
// Why: a gnet event loop waits in epoll_wait with no timeout as an ordinary system call, and
// keeps its P while it waits. The runtime takes such a P back only when sysmon notices, and
// sysmon's period grows to 10 ms on a process that is mostly idle. With as many loops as Ps
// (EventLoops defaults to GOMAXPROCS) every P can sit in a loop's wait, and the engine model's
// step timers fire when sysmon next looks: on the heterogeneous fleet at 101 req/s the mock
// published a step's first tokens 0.6 ms late at the median but 5-6 ms at p90 and 12-15 ms at
// p99 after the step's end, which is 10-14 ms of the client's TTFT p99 that no engine computed
// (docs/benchmarks-history.md). With a P per loop besides the
// scheduler's, the same rows published 1.0 ms late at p90 and 1.2 ms at p99. Instant mode keeps
// procs: its paced tokens are the overhead suite's, whose gates compare the same mock both ways.
func (c *Config) SchedulerProcs(procs int) int {
	if c.Mode != ModeEngine || c.Server != ServerGnet || c.Protocol == ProtocolGRPC {
		return procs
	}
	return procs + c.EventLoops
}

// Validate reports every setting out of range or in conflict, saying how to fix it.
func (c Config) Validate() error {
	return errors.Join(c.validateServing(), c.validateEngine(), c.validateRoles())
}

// validateServing checks where and how the fleet listens.
func (c Config) validateServing() error {
	var errs []error
	if c.Host == "" {
		errs = append(errs, errors.New("host is empty: name an address such as 127.0.0.1 (start from mockworker.DefaultConfig())"))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model is empty: name the model served (start from mockworker.DefaultConfig())"))
	}
	if c.Count < 1 {
		errs = append(errs, fmt.Errorf("count %d: set at least 1 worker", c.Count))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d: use 0 (free ports) or 1..65535", c.Port))
	} else if c.Port > 0 && c.Port+c.Count-1 > 65535 {
		errs = append(errs, fmt.Errorf("port %d with count %d runs past 65535: lower the port or the count", c.Port, c.Count))
	}
	if c.Dialect != DialectSGLang && c.Dialect != DialectVLLM {
		errs = append(errs, fmt.Errorf("dialect %q: use %q or %q", c.Dialect, DialectSGLang, DialectVLLM))
	}
	if c.Server != ServerGnet && c.Server != ServerFastHTTP {
		errs = append(errs, fmt.Errorf("server %q: use %q or %q", c.Server, ServerGnet, ServerFastHTTP))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("TLS: give both a certificate and its key (--tls-cert and --tls-key), or neither"))
	} else if c.TLSCert != "" && c.Server != ServerFastHTTP {
		errs = append(errs, fmt.Errorf("TLS with server %q: the gnet server has no TLS; use --server %s", c.Server, ServerFastHTTP))
	}
	return errors.Join(errs...)
}

// validateEngine checks the generation and the engine model.
func (c Config) validateEngine() error {
	var errs []error
	if c.OutputTokens < 1 {
		errs = append(errs, fmt.Errorf("output tokens %d: generate at least 1 token", c.OutputTokens))
	}
	if c.TokenInterval < 0 {
		errs = append(errs, fmt.Errorf("token interval %v: use 0 (no pacing) or a positive duration", c.TokenInterval))
	}
	if c.EventLoops < 1 {
		errs = append(errs, fmt.Errorf("event loops %d: use at least 1", c.EventLoops))
	}
	if c.KVTokens < 1 {
		errs = append(errs, fmt.Errorf("kv tokens %d: use a positive capacity", c.KVTokens))
	}
	if c.MaxRunning < 1 {
		errs = append(errs, fmt.Errorf("max running %d: use a positive batch size", c.MaxRunning))
	}
	if c.Mode != ModeInstant && c.Mode != ModeEngine {
		errs = append(errs, fmt.Errorf("mode %q: use %q or %q", c.Mode, ModeInstant, ModeEngine))
	}
	if c.BlockSize < 1 || c.BlockSize > c.KVTokens {
		errs = append(errs, fmt.Errorf("block size %d: use 1..kv tokens (%d)", c.BlockSize, c.KVTokens))
	}
	if !(c.PrefillTPS > 0) || math.IsInf(c.PrefillTPS, 0) {
		errs = append(errs, fmt.Errorf("prefill tokens/s %v: use a positive rate", c.PrefillTPS))
	}
	if c.PrefillChunk < 1 {
		errs = append(errs, fmt.Errorf("prefill chunk %d: use at least 1 token", c.PrefillChunk))
	}
	if c.DecodeBase <= 0 || c.DecodePerReq < 0 {
		errs = append(errs, fmt.Errorf("decode times %v + %v per request: use a positive step time and a per-request time >= 0", c.DecodeBase, c.DecodePerReq))
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		errs = append(errs, fmt.Errorf("time scale %v: use a positive factor (10 runs the model 10× faster)", c.TimeScale))
	}
	for i, f := range c.DecodeFactors {
		if i < 0 || i >= c.Count {
			errs = append(errs, fmt.Errorf("decode factor for worker %d (--decode-factors): the fleet has workers 0..%d; name one of them", i, c.Count-1))
		}
		if !(f > 0) || math.IsInf(f, 0) {
			errs = append(errs, fmt.Errorf("decode factor %v for worker %d (--decode-factors): use a positive factor (2 = a decode step twice as slow)", f, i))
		}
	}
	return errors.Join(errs...)
}

// validateRoles checks the prefill-decode role, KV events and the protocol's combinations.
func (c Config) validateRoles() error {
	var errs []error
	if c.Role != RoleUnified && c.Role != RolePrefill && c.Role != RoleDecode && c.Role != RoleEncode {
		errs = append(errs, fmt.Errorf("role %q (--role): use \"\" (unified), %q, %q or %q", c.Role, RolePrefill, RoleDecode, RoleEncode))
	}
	if c.RequireEncode && c.Role != RolePrefill {
		errs = append(errs, fmt.Errorf("require encode (--require-encode) is a prefill worker's setting; the role is %q", c.Role))
	}
	if c.KVEvents {
		switch {
		case c.Mode != ModeEngine:
			errs = append(errs, errors.New("kv events (--kv-events-port) need the engine model's KV cache: add --mode engine"))
		case c.KVEventsPort < 0 || c.KVEventsPort > 0 && c.KVEventsPort+2*c.Count-1 > 65535:
			errs = append(errs, fmt.Errorf("kv events port %d with count %d: use 0 (free ports) or a port with room for 2×count ports (PUB and replay per worker) up to 65535", c.KVEventsPort, c.Count))
		case c.KVEventsEncoding != KVEncodingMap && c.KVEventsEncoding != KVEncodingArray:
			errs = append(errs, fmt.Errorf("kv events encoding %q (--kv-events-encoding): use %q or %q", c.KVEventsEncoding, KVEncodingMap, KVEncodingArray))
		case c.KVEventsReplay < 1:
			errs = append(errs, fmt.Errorf("kv events replay buffer %d (--kv-events-replay): use at least 1 batch (default %d)", c.KVEventsReplay, DefaultKVEventsReplay))
		}
	}
	if c.BootstrapPort < 0 || c.BootstrapPort > 65535 {
		errs = append(errs, fmt.Errorf("bootstrap port %d (--bootstrap-port): use 0 (a free port) or 1..65535", c.BootstrapPort))
	}
	if c.KVTransferTimeout <= 0 {
		errs = append(errs, fmt.Errorf("kv transfer timeout %v (--kv-transfer-timeout-ms): use a positive duration", c.KVTransferTimeout))
	}
	if strings.ContainsAny(c.KVEngineID, "\"\\\r\n") {
		errs = append(errs, errors.New("kv engine id (--kv-engine-id): remove quotes, backslashes and line breaks"))
	}
	if strings.ContainsAny(c.WorkerIDPrefix, "\r\n") {
		errs = append(errs, errors.New("worker id prefix: remove line breaks (it is sent as a header)"))
	}
	switch {
	case c.Protocol != ProtocolHTTP && c.Protocol != ProtocolGRPC:
		errs = append(errs, fmt.Errorf("protocol %q (--protocol): use %q or %q", c.Protocol, ProtocolHTTP, ProtocolGRPC))
	case c.Protocol == ProtocolGRPC && c.Role == RoleEncode:
		errs = append(errs, errors.New("role encode with protocol grpc: the engines' gRPC services have no encode leg; use --protocol http"))
	case c.Protocol == ProtocolGRPC && c.TLSCert != "":
		errs = append(errs, errors.New("TLS with protocol grpc: the gRPC mock serves plaintext HTTP/2 only; drop --tls-cert and --tls-key"))
	}
	return errors.Join(errs...)
}
