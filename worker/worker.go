package worker

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/worker/breaker"
)

// Status is a worker's lifecycle state. Only Ready workers receive new requests.
type Status uint32

const (
	// StatusPending: registered, not yet confirmed healthy.
	StatusPending Status = iota
	// StatusReady: healthy and routable.
	StatusReady
	// StatusNotReady: failed health checks past the failure threshold; not routable.
	StatusNotReady
	// StatusFailed: failed for long enough to be considered gone; removed when
	// --remove-unhealthy-workers is set.
	StatusFailed
	// StatusDraining: being removed; finishes the requests it has, receives no new ones.
	StatusDraining
)

var statusNames = [...]string{"pending", "ready", "not_ready", "failed", "draining"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Upstream outcome classes counted per worker in smg_router_upstream_responses_total.
const (
	Outcome2xx = iota
	Outcome3xx
	Outcome4xx
	Outcome5xx
	OutcomeError // no HTTP response: connection refused, reset, timeout
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"2xx", "3xx", "4xx", "5xx", "error"}

// OutcomeOf maps an upstream HTTP status to its outcome class.
func OutcomeOf(status int) int {
	switch {
	case status >= 200 && status < 300:
		return Outcome2xx
	case status >= 300 && status < 400:
		return Outcome3xx
	case status >= 400 && status < 500:
		return Outcome4xx
	case status >= 500:
		return Outcome5xx
	}
	return OutcomeError
}

// Worker is one engine endpoint as the gateway serves it. All fields but the atomics are
// immutable after the registry creates it.
//
// A Worker is one 64-byte cache line: the state load-aware policies read on every candidate of
// a scan (hot.go), and a pointer to the rest (cold), whose fields read as the Worker's own. The
// registry allocates Workers side by side (hot.go), so scoring a fleet registered together
// reads consecutive cache lines instead of chasing one pointer per worker into a large object.
type Worker struct {
	// InFlight counts requests dispatched to this worker whose response body has not
	// finished. The hot path adds 1 at dispatch and subtracts 1 exactly once. It must stay
	// the first field (InFlightCount.worker).
	InFlight InFlightCount
	load     atomic.Pointer[LoadReport]
	// Cumulative dispatch counts with and without a known token count (noteDispatch; the
	// request count is in cold); a load report keeps their values at its poll
	// (LoadReport.since), so the since-report credit is the difference.
	dispatchedTokens  atomic.Int64
	dispatchedUnknown atomic.Int64
	// awaitingTokens and awaitingUnknown are the work sent to the worker still waiting for its
	// first token (load.go; the request count is in cold).
	awaitingTokens  atomic.Int64
	awaitingUnknown atomic.Int64
	// state packs the status and the vetoes Routable reads (hot.go): one load tells a
	// routable worker.
	state atomic.Uint32
	_     uint32

	*cold
}

// cold is the part of a Worker that picks do not read on every candidate: identity, client,
// breaker, settings, metrics and the request path's measurements.
type cold struct {
	// dispatchedRequests counts every request dispatched (noteDispatch).
	dispatchedRequests atomic.Int64
	// awaitingRequests counts the requests waiting for their first token (noteAwaiting).
	awaitingRequests atomic.Int64
	// watchers are the Changes sets told of every change a load-aware pick reads (watch.go).
	watchers atomic.Pointer[watchList]
	// Breaker is the worker's circuit breaker, read by policies through Routable and driven
	// by the gateway: TryAcquire before a request, Record when it ends.
	Breaker breaker.Breaker

	// ID is the registry's identifier (a random UUID), used by the worker API.
	ID string
	// Index is a dense small integer, unique among live workers and reused after removal;
	// policies use it as a tenant id and an array index.
	Index uint32
	// URL is the canonical base URL, scheme://host:port; sent as x-smg-routed-worker-id.
	URL string
	// Host is host:port, the Host header of forwarded requests.
	Host string
	// Models are the model ids the worker serves; empty means unknown (serves any model
	// that no other worker claims).
	Models []string
	// Client is the worker's pooled HTTP/1.1 client: one per worker, keep-alive. For a worker
	// behind TLS its connections speak TLS inside (conn.go), and requests must say https
	// (Address).
	Client *fasthttp.HostClient
	// TLS is set for a worker behind TLS (an https URL).
	TLS bool
	// tlsConfig configures its connections when TLS is set (the event loops dial their own).
	tlsConfig *tls.Config
	// dial is ClientOptions.Dial (nil: TCP); probe is the connection kept between probes.
	dial  fasthttp.DialFunc
	probe probeConn
	// BootstrapHost and BootstrapPort say where a PD prefill worker's KV bootstrap server
	// listens: the worker's host name, and its LabelBootstrapPort (0: none, the engine's
	// default). KVConnector is its LabelKVConnector ("" for SGLang's protocol).
	BootstrapHost string
	BootstrapPort int
	KVConnector   string

	// settings holds what PATCH and PUT /workers/{id} may change (the spec's priority, cost,
	// labels, API key and health overrides): replaced whole by the registry's writer, read
	// with one atomic load.
	settings   atomic.Pointer[settings]
	workerType string

	// Upstream counts responses by outcome class; exported per worker.
	Upstream [numOutcomes]*metrics.Counter

	urlHeader []byte
	cbMetrics *breaker.Metrics
	// firstByte is the request path's record of answers starting (stall.go).
	firstByte firstByteState
	// decode is the worker's decode-step estimate from the answers relayed (speed.go).
	decode decodeState

	protocol Protocol
	dpRank   int
}

// Protocol is how the gateway talks to a worker.
type Protocol uint8

const (
	// ProtocolHTTP: the engine's OpenAI-compatible HTTP server (http:// and https:// URLs).
	ProtocolHTTP Protocol = iota
	// ProtocolGRPC: the engine's own gRPC service (grpc:// URLs); the gateway tokenizes.
	ProtocolGRPC
)

// Protocol reports how the gateway talks to w.
func (w *Worker) Protocol() Protocol { return w.protocol }

// DPRank is the data-parallel rank a grpc://host:port@RANK worker names, -1 for none.
func (w *Worker) DPRank() int { return w.dpRank }

// GRPCTarget is a gRPC worker's host:port, its rank left out ("" for an HTTP worker).
func (w *Worker) GRPCTarget() string {
	if w.protocol != ProtocolGRPC {
		return ""
	}
	return w.Host
}

// Status returns the worker's current status.
func (w *Worker) Status() Status { return Status(w.state.Load() & statusMask) }

// Ready reports whether the worker's status is Ready: the registry's view, which decides the
// candidates a snapshot's pickers are built with.
func (w *Worker) Ready() bool { return w.Status() == StatusReady }

// Routable reports whether the worker may receive a new request right now: Ready, not vetoed
// by overload protection, not stalled (stall.go), and its circuit breaker not open (the
// spec's availability filter). Policies call it on every candidate: for a routable worker
// with a closed breaker it is one atomic load of the worker's first cache line.
func (w *Worker) Routable() bool {
	st := w.state.Load()
	if st == uint32(StatusReady) {
		return true
	}
	// The breaker bit only says the breaker may not be closed (hot.go): the breaker decides.
	return st&^stateBreaker == uint32(StatusReady) && w.Breaker.AvailableNow()
}

// BreakerGated reports whether Routable's answer depends on the breaker's clock: w is Ready
// with no veto, but its breaker may not be closed, and an open breaker lets requests through
// again once its timeout has passed, with no write to the worker. A holder of Routable's
// answer (an order kept over a group) asks again on every pick while it is true.
func (w *Worker) BreakerGated() bool {
	st := w.state.Load()
	return st != uint32(StatusReady) && st&^stateBreaker == uint32(StatusReady)
}

// settings is one immutable version of a worker's changeable settings.
type settings struct {
	spec Spec
	// auth is the Authorization header value sent to the worker ("Bearer <api_key>"), or nil.
	auth []byte
	// revision counts the updates applied to the worker: 0 at registration.
	revision uint64
}

func newSettings(spec Spec, revision uint64) *settings {
	st := &settings{spec: spec, revision: revision}
	st.spec.Labels = cloneLabels(spec.Labels)
	if spec.APIKey != "" {
		st.auth = []byte("Bearer " + spec.APIKey)
	}
	return st
}

// Spec returns a copy of the worker's spec with the API key removed: the API key is write-only.
func (w *Worker) Spec() Spec {
	s := w.settings.Load().spec
	s.APIKey = ""
	s.Labels = cloneLabels(s.Labels)
	return s
}

// Label returns the value of one of the worker's labels.
func (w *Worker) Label(key string) string { return w.settings.Load().spec.Labels[key] }

// KVEventsEndpoints returns the worker's own KV-cache event sockets (Spec.KVEventsEndpoint and
// KVEventsReplayEndpoint) without copying its spec: subscribers read them for every worker of
// every snapshot.
func (w *Worker) KVEventsEndpoints() (pub, replay string) {
	s := &w.settings.Load().spec
	return s.KVEventsEndpoint, s.KVEventsReplayEndpoint
}

// Type returns the worker type (regular, prefill, decode, encode).
func (w *Worker) Type() string { return w.workerType }

// AuthHeader is the Authorization header value to send to the worker ("Bearer <api_key>"),
// or nil when it has no API key. Shared: callers must not modify it. It changes when PATCH
// or PUT /workers/{id} rotates the key.
func (w *Worker) AuthHeader() []byte { return w.settings.Load().auth }

// Revision counts the updates (PATCH, PUT) applied to the worker since its registration:
// holders of state derived from its settings (the health checker) compare it to refresh.
func (w *Worker) Revision() uint64 { return w.settings.Load().revision }

// Address directs req to the worker: its Host header and, for a worker behind TLS, the https
// scheme (its HostClient refuses a request whose scheme is not its own, and the gateway's
// requests are parsed as http).
func (w *Worker) Address(req *fasthttp.Request) {
	if w.TLS {
		req.URI().SetScheme("https")
	}
	req.SetHost(w.Host)
}

// TLSConfig is the TLS configuration of the connections to a worker behind TLS (nil for a
// plain worker): the roots of ClientOptions.TLS (--worker-ca-file), the worker's host as
// ServerName, one session cache for every worker. Shared: callers must not modify it.
func (w *Worker) TLSConfig() *tls.Config { return w.tlsConfig }

// URLBytes is URL as bytes, shared: callers must not modify it.
func (w *Worker) URLBytes() []byte { return w.urlHeader }

// ClientOptions configure every worker's HostClient.
type ClientOptions struct {
	// MaxConns caps connections per worker (--max-connections-per-worker). Default 2048.
	MaxConns int
	// DialTimeout bounds connection establishment. Default 5s.
	DialTimeout time.Duration
	// MaxIdleConnDuration closes keep-alive connections idle this long. Default 90s.
	MaxIdleConnDuration time.Duration
	// MaxResponseBodySize caps buffered (non-streamed) responses; 0 is no cap. Default 0.
	MaxResponseBodySize int
	// Dial replaces TCP dialing (tests dial in-memory listeners). Nil: TCP with DialTimeout.
	Dial fasthttp.DialFunc
	// TLS configures the connections to https workers; its ServerName defaults to the
	// worker's host. Nil: the system's roots verify the worker's certificate.
	TLS *tls.Config
}

// DefaultClientOptions returns ClientOptions' defaults.
func DefaultClientOptions() ClientOptions {
	return ClientOptions{MaxConns: 2048, DialTimeout: 5 * time.Second, MaxIdleConnDuration: 90 * time.Second}
}

// Validate reports a setting that cannot work, naming the fix.
func (o *ClientOptions) Validate() error {
	switch {
	case o.MaxConns < 1:
		return fmt.Errorf("--max-connections-per-worker %d: give at least 1 (default %d)", o.MaxConns, DefaultClientOptions().MaxConns)
	case o.DialTimeout <= 0:
		return fmt.Errorf("worker dial timeout %v: give a positive duration (default %v)", o.DialTimeout, DefaultClientOptions().DialTimeout)
	case o.MaxIdleConnDuration <= 0:
		return fmt.Errorf("worker idle connection timeout %v: give a positive duration (default %v)", o.MaxIdleConnDuration, DefaultClientOptions().MaxIdleConnDuration)
	case o.MaxResponseBodySize < 0:
		return fmt.Errorf("worker response body cap %d: give 0 (no cap) or a positive size", o.MaxResponseBodySize)
	}
	return nil
}

// workerDialer dials every worker. One for all: a fasthttp.TCPDialer runs a goroutine that
// cleans its DNS cache, and one per worker made 10,000 workers cost 10,000 goroutines.
var workerDialer = &fasthttp.TCPDialer{}

// newWorker builds a Worker from a normalized spec in slot, a zero Worker (hot.go).
func newWorker(slot *Worker, spec Spec, index uint32, opts ClientOptions) *Worker {
	scheme, host, _ := strings.Cut(spec.URL, "://")
	protocol, rank := ProtocolHTTP, -1
	if scheme == "grpc" {
		protocol = ProtocolGRPC
		if h, r, ok := strings.Cut(host, "@"); ok {
			host = h
			rank, _ = parsePort(r) // validated by CanonicalURL
		}
	}
	w := slot
	w.cold = &cold{
		protocol:   protocol,
		dpRank:     rank,
		ID:         newID(),
		Index:      index,
		URL:        spec.URL,
		Host:       host,
		Models:     spec.AllModels(),
		workerType: spec.WorkerType,
		urlHeader:  []byte(spec.URL),
	}
	w.settings.Store(newSettings(spec, 0))
	w.BootstrapHost, w.KVConnector = hostName(host), spec.Labels[LabelKVConnector]
	w.BootstrapPort, _ = parsePort(spec.Labels[LabelBootstrapPort]) // validated by Normalize
	w.Client = &fasthttp.HostClient{
		Addr:                          host,
		IsTLS:                         scheme == "https",
		MaxConns:                      opts.MaxConns,
		MaxIdleConnDuration:           opts.MaxIdleConnDuration,
		MaxResponseBodySize:           opts.MaxResponseBodySize,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: false,
		DisablePathNormalizing:        true,
	}
	w.dial = opts.Dial
	dial := opts.Dial
	if dial == nil {
		dial = func(addr string) (net.Conn, error) { return workerDialer.DialTimeout(addr, opts.DialTimeout) }
	}
	var tlsConfig *tls.Config
	if scheme == "https" {
		w.TLS = true
		tlsConfig = workerTLSConfig(opts.TLS, w.BootstrapHost)
		w.tlsConfig = tlsConfig
	}
	w.Client.Dial = wrapDial(dial, tlsConfig, opts.DialTimeout)
	return w
}

// tlsSessions resumes TLS sessions with every worker (fasthttp's own client keeps one cache
// per HostClient the same way).
var tlsSessions = tls.NewLRUClientSessionCache(0)

// workerTLSConfig is the TLS configuration of the connections to the https worker host.
func workerTLSConfig(base *tls.Config, host string) *tls.Config {
	c := &tls.Config{}
	if base != nil {
		c = base.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	if c.ClientSessionCache == nil {
		c.ClientSessionCache = tlsSessions
	}
	return c
}

// hostName is the host of host:port, without the brackets of an IPv6 address.
func hostName(hostPort string) string {
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		return h
	}
	return hostPort
}

func cloneLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// newID returns a random RFC 4122 version 4 UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
