package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Worker types, as the spec product names them.
const (
	TypeRegular = "regular"
	TypePrefill = "prefill"
	TypeDecode  = "decode"
	TypeEncode  = "encode"
)

// Labels carrying a worker's PD metadata (spec: PD Pod Annotations). Discovery sets them from
// pod annotations; --prefill and the worker API set them directly.
const (
	// LabelBootstrapPort is a prefill worker's KV bootstrap port (SGLang
	// --disaggregation-bootstrap-port); absent means none: the engine's default.
	LabelBootstrapPort = "sglang.ai/bootstrap-port"
	// LabelKVConnector names a vLLM worker's KV connector (NixlConnector, MooncakeConnector):
	// such workers speak vLLM's kv_transfer_params protocol; absent means SGLang's bootstrap
	// protocol.
	LabelKVConnector = "smg.ai/kv-connector"
	// LabelKVEngineID is a vLLM Mooncake prefill worker's kv_transfer_config.engine_id.
	LabelKVEngineID = "smg.ai/kv-engine-id"
)

// Defaults of the Spec fields the spec product fills in when a registration leaves them out.
const (
	DefaultPriority = 50
	DefaultCost     = 1.0
)

// Spec is a worker as a user (or discovery, or a mesh peer) registers it: the JSON body of
// POST /workers. Only URL is required.
type Spec struct {
	// URL is the worker's base URL, e.g. http://10.0.0.7:8000. The scheme defaults to http.
	URL string `json:"url"`
	// ModelID is the one model the worker serves. Empty means "ask the worker" at registration
	// (GET /v1/models); a worker whose model stays unknown serves requests for any model that
	// no other worker claims.
	ModelID string `json:"model_id,omitempty"`
	// Models lists further model ids the worker serves (multi-model engines). Each element
	// is a model id, or a model card {"id": ...} as the spec product's worker API takes them
	// (the card's other fields are not used).
	Models ModelList `json:"models,omitempty"`
	// WorkerType is regular (default), prefill, decode or encode.
	WorkerType string `json:"worker_type,omitempty"`
	// Labels are free-form; the label "policy" selects a per-model policy.
	Labels map[string]string `json:"labels,omitempty"`
	// Priority orders workers for operators; higher is preferred. Default 50.
	Priority *int `json:"priority,omitempty"`
	// Cost is a relative cost weight. Default 1.0.
	Cost *float64 `json:"cost,omitempty"`
	// APIKey is sent to the worker as a bearer token. It is write-only: never shown by the API.
	APIKey string `json:"api_key,omitempty"`
	// Health overrides the gateway's health-check settings for this worker.
	Health *HealthOverride `json:"health,omitempty"`
	// ConnectionMode is the spec product's field: "http", "grpc" or empty; it must agree with
	// the URL's scheme (grpc:// is a gRPC worker).
	ConnectionMode string `json:"connection_mode,omitempty"`
	// RuntimeType is the spec product's engine kind (sglang, vllm, trtllm, mlx, external,
	// unspecified). Kept and shown; routing does not depend on it.
	RuntimeType string `json:"runtime_type,omitempty"`
	// KVEventsEndpoint is an HTTP engine's ZMQ publisher of KV-cache events,
	// "tcp://host:port" (vLLM's and SGLang's --kv-events-config endpoint, with the engine's
	// host for "*"); KVEventsReplayEndpoint its ROUTER replay socket, optional. cache_aware
	// then routes the worker's model on the engines' reported caches. gRPC workers stream
	// their events on the engine connection and take neither.
	KVEventsEndpoint       string `json:"kv_events_endpoint,omitempty"`
	KVEventsReplayEndpoint string `json:"kv_events_replay_endpoint,omitempty"`
}

// ModelList is Spec.Models: model ids, decoded from ids or from model cards.
type ModelList []string

// UnmarshalJSON accepts an array whose elements are strings or objects with a string "id".
func (m *ModelList) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf(`"models" must be an array of model ids or of {"id": ...} model cards`)
	}
	out := make(ModelList, 0, len(raw))
	for i, e := range raw {
		var id string
		if err := json.Unmarshal(e, &id); err != nil {
			var card struct {
				ID *string `json:"id"`
			}
			if err := json.Unmarshal(e, &card); err != nil || card.ID == nil {
				return fmt.Errorf(`"models[%d]" must be a model id or a model card with a string "id"`, i)
			}
			id = *card.ID
		}
		out = append(out, id)
	}
	*m = out
	return nil
}

// HealthOverride holds the per-worker health-check settings of a Spec; nil fields inherit the
// gateway's flags.
type HealthOverride struct {
	Endpoint         *string `json:"endpoint,omitempty"`
	IntervalSecs     *int    `json:"check_interval_secs,omitempty"`
	TimeoutSecs      *int    `json:"timeout_secs,omitempty"`
	FailureThreshold *int    `json:"failure_threshold,omitempty"`
	SuccessThreshold *int    `json:"success_threshold,omitempty"`
	Disable          *bool   `json:"disable_health_check,omitempty"`
}

// Bounds of a worker spec, checked on every registration path (the worker API, discovery,
// mesh peers, the command line): the registry keeps every spec for the life of the worker
// and GET /workers, the mesh and the metrics repeat its strings, so one spec must not be able
// to hold the gateway's memory. Each is far above what an engine or a pod needs (a Kubernetes
// label key is at most 317 bytes, its value 63).
const (
	MaxURLBytes        = 2048      // url
	MaxModelIDBytes    = 1024      // model_id and each of models (a served model name may be a path)
	MaxModels          = 256       // model_id plus models
	MaxLabels          = 64        // labels per worker
	MaxLabelKeyBytes   = 320       // each label key
	MaxLabelValueBytes = 4096      // each label value
	MaxAPIKeyBytes     = 4096      // api_key (a JWT fits)
	MaxEndpointBytes   = 1024      // health.endpoint
	MaxPriority        = 1<<32 - 1 // priority is the spec product's u32: 0 to 4294967295
)

// ErrSpecTooLarge reports a spec field or label past its bound.
var ErrSpecTooLarge = errors.New("worker spec past a limit")

// CheckLimits reports the first field of s past its bound, naming the field and the bound.
func (s *Spec) CheckLimits() error {
	tooLong := func(field string, n, limit int) error {
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrSpecTooLarge, field, n, limit)
	}
	if len(s.URL) > MaxURLBytes {
		return tooLong("url", len(s.URL), MaxURLBytes)
	}
	if len(s.ModelID) > MaxModelIDBytes {
		return tooLong("model_id", len(s.ModelID), MaxModelIDBytes)
	}
	if len(s.Models) > MaxModels {
		return fmt.Errorf("%w: models has %d entries, at most %d allowed", ErrSpecTooLarge, len(s.Models), MaxModels)
	}
	for i, m := range s.Models {
		if len(m) > MaxModelIDBytes {
			return tooLong(fmt.Sprintf("models[%d]", i), len(m), MaxModelIDBytes)
		}
	}
	if len(s.Labels) > MaxLabels {
		return fmt.Errorf("%w: labels has %d entries, at most %d allowed", ErrSpecTooLarge, len(s.Labels), MaxLabels)
	}
	for k, v := range s.Labels {
		if len(k) > MaxLabelKeyBytes {
			return tooLong(fmt.Sprintf("label key %.40q…", k), len(k), MaxLabelKeyBytes)
		}
		if len(v) > MaxLabelValueBytes {
			return tooLong(fmt.Sprintf("labels[%.64q]", k), len(v), MaxLabelValueBytes)
		}
	}
	if len(s.APIKey) > MaxAPIKeyBytes {
		return tooLong("api_key", len(s.APIKey), MaxAPIKeyBytes)
	}
	if h := s.Health; h != nil && h.Endpoint != nil && len(*h.Endpoint) > MaxEndpointBytes {
		return tooLong("health.endpoint", len(*h.Endpoint), MaxEndpointBytes)
	}
	if p := s.Priority; p != nil && (*p < 0 || *p > MaxPriority) {
		return fmt.Errorf("invalid priority %d: must be in 0-%d", *p, MaxPriority)
	}
	return nil
}

// ErrInvalidURL reports a worker URL the gateway cannot dial.
var ErrInvalidURL = errors.New("invalid worker URL")

// Normalize validates s and fills defaults: it returns the canonical URL (scheme://host:port
// without a trailing slash), or an error that tells the user what to fix.
func (s *Spec) Normalize() error {
	if err := s.CheckLimits(); err != nil {
		return err
	}
	u, err := CanonicalURL(s.URL)
	if err != nil {
		return err
	}
	s.URL = u
	switch s.WorkerType {
	case "":
		s.WorkerType = TypeRegular
	case TypeRegular, TypePrefill, TypeDecode, TypeEncode:
	default:
		return fmt.Errorf("invalid worker_type %q: use regular, prefill, decode or encode", s.WorkerType)
	}
	grpcURL := strings.HasPrefix(s.URL, "grpc://")
	switch s.ConnectionMode {
	case "":
	case "http":
		if grpcURL {
			return fmt.Errorf(`connection_mode "http" contradicts the grpc:// url %q: give "grpc" or leave the field out`, s.URL)
		}
	case "grpc":
		if !grpcURL {
			return fmt.Errorf(`connection_mode "grpc" needs a grpc://host:port url, not %q`, s.URL)
		}
	default:
		return fmt.Errorf("invalid connection_mode %q: use http or grpc, or leave it out (the url's scheme says)", s.ConnectionMode)
	}
	switch s.RuntimeType {
	case "", "sglang", "vllm", "trtllm", "mlx", "external", "unspecified":
	default:
		return fmt.Errorf("invalid runtime_type %q: use sglang, vllm, trtllm, mlx, external or unspecified", s.RuntimeType)
	}
	for _, ep := range []struct{ name, v string }{{"kv_events_endpoint", s.KVEventsEndpoint}, {"kv_events_replay_endpoint", s.KVEventsReplayEndpoint}} {
		if ep.v == "" {
			continue
		}
		if grpcURL {
			return fmt.Errorf("%s is for HTTP engines: a gRPC worker streams its KV events on the engine connection (SubscribeKvEvents); leave it out", ep.name)
		}
		if err := checkTCPEndpoint(ep.v); err != nil {
			return fmt.Errorf("invalid %s %q: %v", ep.name, ep.v, err)
		}
	}
	if s.KVEventsReplayEndpoint != "" && s.KVEventsEndpoint == "" {
		return errors.New("kv_events_replay_endpoint needs kv_events_endpoint, the publisher it replays")
	}
	if v, ok := s.Labels[LabelBootstrapPort]; ok {
		if n, err := parsePort(v); err != nil || n == 0 {
			return fmt.Errorf("invalid %s label %q: give a port in 1-65535, or leave it out for none", LabelBootstrapPort, v)
		}
	}
	if s.Priority == nil {
		p := DefaultPriority
		s.Priority = &p
	}
	if s.Cost == nil {
		c := DefaultCost
		s.Cost = &c
	} else if *s.Cost < 0 {
		return fmt.Errorf("invalid cost %v: must be >= 0", *s.Cost)
	}
	return nil
}

// AllModels returns ModelID followed by Models, without duplicates or empty ids.
func (s *Spec) AllModels() []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range append([]string{s.ModelID}, s.Models...) {
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// CanonicalURL parses a worker URL given as http://host:port, https://host:port or host:port
// and returns scheme://host:port with the default port made explicit and any trailing slash
// removed, so that the same worker always has the same URL (the registry matches by URL).
func CanonicalURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("%w: empty; give http://host:port", ErrInvalidURL)
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	if strings.HasPrefix(raw, "grpc://") {
		return canonicalGRPCURL(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w %q: %v; give http://host:port", ErrInvalidURL, raw, err)
	}
	if u.Scheme == "grpcs" {
		return "", fmt.Errorf("%w %q: TLS to gRPC workers is not supported; give grpc://host:port (plaintext, as the engines' gRPC servers listen) or serve the engine over https", ErrInvalidURL, raw)
	}
	if u.Scheme == "ipc" {
		return "", fmt.Errorf("%w %q: ipc:// names a ZMQ socket on the gateway's own host, the spec product's host-local ZMQ workers (engines driven over ZMQ with the gateway's tokenizer); SMG-Go does not serve them: it speaks HTTP to workers, so serve the engine over HTTP and give http://host:port", ErrInvalidURL, raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%w %q: scheme %q is not supported; use http:// or https://", ErrInvalidURL, raw, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("%w %q: no host; give http://host:port", ErrInvalidURL, raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%w %q: only scheme://host:port is allowed (no path, query or credentials)", ErrInvalidURL, raw)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if n, err := parsePort(port); err != nil || n == 0 {
		return "", fmt.Errorf("%w %q: port %q is not in 1-65535", ErrInvalidURL, raw, port)
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port), nil
}

// canonicalGRPCURL is CanonicalURL for grpc://host:port and grpc://host:port@RANK, a
// data-parallel rank of the engine at host:port (each rank its own worker). The port is
// required: the engines have no common default.
func canonicalGRPCURL(raw string) (string, error) {
	rest := strings.TrimSuffix(strings.TrimPrefix(raw, "grpc://"), "/")
	hostPort, rank, hasRank := strings.Cut(rest, "@")
	if hasRank {
		if n, err := parsePort(rank); err != nil || len(rank) > 1 && rank[0] == '0' || n > 4095 {
			return "", fmt.Errorf("%w %q: data-parallel rank %q is not in 0-4095; give grpc://host:port@RANK", ErrInvalidURL, raw, rank)
		}
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || strings.ContainsAny(hostPort, "/?#@") {
		return "", fmt.Errorf("%w %q: give grpc://host:port or grpc://host:port@RANK", ErrInvalidURL, raw)
	}
	if n, err := parsePort(port); err != nil || n == 0 {
		return "", fmt.Errorf("%w %q: port %q is not in 1-65535", ErrInvalidURL, raw, port)
	}
	out := "grpc://" + net.JoinHostPort(host, port)
	if hasRank {
		out += "@" + rank
	}
	return out, nil
}

func parsePort(s string) (int, error) {
	n := 0
	if s == "" || len(s) > 5 {
		return 0, errors.New("bad port")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("bad port")
	}
	return n, nil
}

// checkTCPEndpoint accepts "tcp://host:port" with a host to dial (not "*") and a port in
// 1-65535, at most MaxURLBytes long.
func checkTCPEndpoint(ep string) error {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok || len(ep) > MaxURLBytes {
		return errors.New("give tcp://host:port")
	}
	h, p, err := net.SplitHostPort(rest)
	if err != nil || h == "" || h == "*" {
		return errors.New("give tcp://host:port with the engine's host")
	}
	if n, err := parsePort(p); err != nil || n == 0 {
		return errors.New("the port must be 1-65535")
	}
	return nil
}
