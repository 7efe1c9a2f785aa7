package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// answerUsage is the usage object of an OpenAI answer or stream chunk.
type answerUsage struct {
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
	} `json:"usage"`
}

// wholeUsage sends a whole chat and returns its request id (the X-Request-Id the client saw)
// and its usage.
func wholeUsage(t *testing.T, url, body string) (id string, prompt, completion int) {
	t.Helper()
	r := MustDo(t, "POST", url, body, nil)
	var a answerUsage
	if err := json.Unmarshal([]byte(r.Body), &a); r.Status != 200 || err != nil || a.Usage == nil {
		t.Fatalf("whole answer: status %d (%v): %s", r.Status, err, r.Body)
	}
	if id = r.Header.Get("X-Request-Id"); id == "" {
		t.Fatal("the answer has no X-Request-Id")
	}
	return id, a.Usage.Prompt, a.Usage.Completion
}

// streamUsage sends a streamed chat with X-Request-Id id and returns the usage of its usage
// chunk.
func streamUsage(t *testing.T, url, body, id string) (prompt, completion int) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != id {
		t.Fatalf("stream: status %d, X-Request-Id %q, want %q", resp.StatusCode, resp.Header.Get("X-Request-Id"), id)
	}
	br := bufio.NewReader(resp.Body)
	prompt, completion = -1, -1
	for {
		ev, err := ReadEvent(br)
		if err != nil || ev == "[DONE]" {
			break
		}
		var a answerUsage
		if json.Unmarshal([]byte(ev), &a) == nil && a.Usage != nil {
			prompt, completion = a.Usage.Prompt, a.Usage.Completion
		}
	}
	if completion < 1 {
		t.Fatalf("the stream %s had no usage chunk", id)
	}
	return prompt, completion
}

// requestLine waits for the gateway's log line msg of request id and returns it.
func requestLine(t *testing.T, g *Gateway, msg, id string) string {
	t.Helper()
	if strings.Contains(msg, " ") {
		msg = `"` + msg + `"`
	}
	re := regexp.MustCompile(`(?m)^.* msg=` + regexp.QuoteMeta(msg) + ` request_id=` + regexp.QuoteMeta(id) + ` .*$`)
	var line string
	testutil.Eventually(t, msg+" line of request "+id, func() bool {
		line = re.FindString(g.Output())
		return line != ""
	})
	return line
}

// hasFields fails unless line has every key=value of fields.
func hasFields(t *testing.T, line string, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if !strings.Contains(line, " "+f+" ") && !strings.HasSuffix(line, " "+f) {
			t.Errorf("no %s in the line\n%s", f, line)
		}
	}
}

// waitMetric waits until series has value want on the gateway's /metrics.
func waitMetric(t *testing.T, g *Gateway, series string, want float64) {
	t.Helper()
	var got float64
	testutil.Eventually(t, fmt.Sprintf("%s = %v", series, want), func() bool {
		got, _ = Metric(t, g.MetricsURL, series)
		return got == want
	})
}

// TestTelemetryOfHTTPWorkers: whole and streamed answers of a real mock engine feed the
// per-model series (tokens from the engine's usage, TTFT of the stream) and the access log,
// whose request ids are the ones the client saw; an error answer is logged at WARN with its
// cause; /metrics has HELP and TYPE lines.
func TestTelemetryOfHTTPWorkers(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--policy", "round_robin", "--worker-urls", m.URLs[0])

	id, p1, c1 := wholeUsage(t, g.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hello there"}],"max_tokens":3}`)
	p2, c2 := streamUsage(t, g.URL+"/v1/chat/completions",
		`{"model":"mock-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello again"}],"max_tokens":5}`, "e2e-stream-1")
	bad := MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"nope","messages":[]}`, nil)
	badID := bad.Header.Get("X-Request-Id")
	if bad.Status != 404 || badID == "" {
		t.Fatalf("unknown model: status %d, X-Request-Id %q", bad.Status, badID)
	}

	l := `router_type="http",backend_type="regular",model="mock-model",endpoint="chat"`
	waitMetric(t, g, `smg_router_tokens_total{`+l+`,token_type="input"}`, float64(p1+p2))
	waitMetric(t, g, `smg_router_tokens_total{`+l+`,token_type="output"}`, float64(c1+c2))
	waitMetric(t, g, `smg_router_requests_total{`+l+`,streaming="false"}`, 1)
	waitMetric(t, g, `smg_router_requests_total{`+l+`,streaming="true"}`, 1)
	waitMetric(t, g, `smg_router_ttft_seconds_count{`+l+`}`, 1) // the stream's only
	waitMetric(t, g, `smg_router_tpot_seconds_count{`+l+`}`, 1)
	waitMetric(t, g, `smg_router_request_duration_seconds_count{`+l+`}`, 2)
	waitMetric(t, g, `smg_router_request_errors_total{router_type="http",backend_type="regular",model="",endpoint="chat",error_type="no_workers"}`, 1)

	hasFields(t, requestLine(t, g, "Request", id), "level=INFO", "path=/v1/chat/completions", "model=mock-model",
		"worker="+m.URLs[0], "status=200", "stream=false", "attempts=1", fmt.Sprintf("completion_tokens=%d", c1), fmt.Sprintf("prompt_tokens=%d", p1))
	hasFields(t, requestLine(t, g, "Request", "e2e-stream-1"), "status=200", "stream=true", fmt.Sprintf("completion_tokens=%d", c2))
	hasFields(t, requestLine(t, g, "Request failed", badID), "level=WARN", "status=404", "error_code=model_not_found",
		`cause="model 'nope' is not served by any worker; GET /v1/models lists the models"`)

	metrics := MustDo(t, "GET", g.MetricsURL, "", nil).Body
	for _, want := range []string{"# TYPE smg_router_ttft_seconds histogram", "# TYPE smg_router_tokens_total counter", "# HELP smg_router_ttft_seconds "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	for _, line := range strings.Split(metrics, "\n") { // the gateway's own families have a text
		name, ok := strings.CutPrefix(line, "# HELP ")
		if ok && (strings.HasPrefix(name, "smg_") || strings.HasPrefix(name, "router_")) && !strings.Contains(name, " ") {
			t.Errorf("/metrics: %s has no HELP text", name)
		}
	}
}

// TestTelemetryOfGRPCWorkers: on the gRPC path the gateway counts the tokens itself; the
// series carry router_type="grpc" and the access log the counts the client's usage shows.
func TestTelemetryOfGRPCWorkers(t *testing.T) {
	urls := startGRPCMocks(t, 1, "sglang")
	g := StartGateway(t, "--model-path", qwen3Dir(t), "--worker-urls", urls[0])

	id, p1, c1 := wholeUsage(t, g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, `,"max_tokens":4`))
	p2, c2 := streamUsage(t, g.URL+"/v1/chat/completions", fmt.Sprintf(grpcChat, `,"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}`), "e2e-grpc-stream")

	l := `router_type="grpc",backend_type="regular",model="qwen3",endpoint="chat"`
	waitMetric(t, g, `smg_router_tokens_total{`+l+`,token_type="input"}`, float64(p1+p2))
	waitMetric(t, g, `smg_router_tokens_total{`+l+`,token_type="output"}`, float64(c1+c2))
	waitMetric(t, g, `smg_router_ttft_seconds_count{`+l+`}`, 1)
	waitMetric(t, g, `smg_router_tpot_seconds_count{`+l+`}`, 1)

	hasFields(t, requestLine(t, g, "Request", id), "model=qwen3", "worker="+urls[0], "status=200", fmt.Sprintf("completion_tokens=%d", c1))
	hasFields(t, requestLine(t, g, "Request", "e2e-grpc-stream"), "stream=true", fmt.Sprintf("prompt_tokens=%d", p2), fmt.Sprintf("completion_tokens=%d", c2))
}

// TestRetryMetrics: a request every worker refuses with 503 is retried on the other worker
// after the configured pause, then answered with the last 503: it counts as exhausted, and
// both pauses taken (before the second try, and before the re-pick that found no worker
// left) are observed under their attempt numbers.
func TestRetryMetrics(t *testing.T) {
	m := StartMocks(t, 2)
	for _, u := range m.URLs {
		postAdmin(t, u, `{"failure_rate":1,"failure_status":503}`)
	}
	g := StartGateway(t, "--policy", "round_robin", "--retry-initial-backoff-ms", "20", "--retry-max-backoff-ms", "20",
		"--worker-urls", m.URLs[0], m.URLs[1])
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, nil)
	if r.Status != 503 {
		t.Fatalf("status %d, want the workers' 503: %s", r.Status, r.Body)
	}
	waitMetric(t, g, `smg_worker_retries_exhausted_total{worker_type="regular",endpoint="chat"}`, 1)
	waitMetric(t, g, `smg_worker_retries_total{worker_type="regular",endpoint="chat"}`, 1)
	for _, attempt := range []string{"1", "2"} {
		l := `{attempt="` + attempt + `"`
		waitMetric(t, g, `smg_worker_retry_backoff_seconds_count`+l+`}`, 1)
		// The pause is 20 ms, within the default jitter of 10 %.
		waitMetric(t, g, `smg_worker_retry_backoff_seconds_bucket`+l+`,le="0.01"}`, 0)
		waitMetric(t, g, `smg_worker_retry_backoff_seconds_bucket`+l+`,le="0.025"}`, 1)
	}
	hasFields(t, requestLine(t, g, "Request failed", r.Header.Get("X-Request-Id")), "status=503", "attempts=2")
}

// TestRateLimitMetric: with --rate-limit-tokens-per-second, each admitted request counts as
// allowed and each 429 as rejected, as many as the client saw.
func TestRateLimitMetric(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--rate-limit-tokens-per-second", "1", "--worker-urls", m.URLs[0])
	statuses := map[int]int{}
	for range 4 {
		statuses[MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, nil).Status]++
	}
	if statuses[200] == 0 || statuses[429] == 0 || statuses[200]+statuses[429] != 4 {
		t.Fatalf("statuses %v: want both 200 and 429 at 1 request per second", statuses)
	}
	waitMetric(t, g, `smg_http_rate_limit_total{result="allowed"}`, float64(statuses[200]))
	waitMetric(t, g, `smg_http_rate_limit_total{result="rejected"}`, float64(statuses[429]))
	waitMetric(t, g, `smg_admission_rejections_total{reason="rate_limited"}`, float64(statuses[429]))
}

// TestClientGoneMidStreamIsLogged499: a client that hangs up in the middle of a paced stream
// is logged with 499 (client closed request), not the 200 its stream began with, and counted
// as client_closed.
func TestClientGoneMidStreamIsLogged499(t *testing.T) {
	m := StartMocks(t, 1, "--token-interval-ms", "50")
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":200}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "e2e-gone-mid-stream")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	if _, err := ReadEvent(bufio.NewReader(resp.Body)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // mid-stream: 199 tokens to go
	hasFields(t, requestLine(t, g, "Request", "e2e-gone-mid-stream"), "status=499", "stream=true")
	waitMetric(t, g, `smg_router_request_errors_total{router_type="http",backend_type="regular",model="mock-model",endpoint="chat",error_type="client_closed"}`, 1)
}
