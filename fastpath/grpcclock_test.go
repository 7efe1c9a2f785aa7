package fastpath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
)

// The gRPC path keeps a request's time on Config.Clock. On a fake clock standing at
// clock.FakeEpoch, years before the system clock: an answer is dated on it, an engine that
// does not answer times out when that clock passes --request-timeout-secs (and only then),
// and smg_http_request_duration_seconds counts the time that clock moved.
func TestGRPCPathRunsOnTheServersClock(t *testing.T) {
	fake := clock.NewFake()
	set := metrics.NewSet()
	const timeout = 10 * time.Minute
	g := newGRPCGateway(t, mockworker.DialectSGLang, 1, "round_robin", Config{Clock: fake, Metrics: set, RequestTimeout: timeout}, nil)

	st, body := g.post("/v1/chat/completions", fmt.Sprintf(grpcChatBody, ""))
	var answer struct {
		Created int64 `json:"created"`
	}
	if err := json.Unmarshal([]byte(body), &answer); st != 200 || err != nil {
		t.Fatalf("%d %s %v", st, body, err)
	}
	if want := fake.Now().Unix(); answer.Created != want {
		t.Fatalf("created %d, want the fake clock's %d", answer.Created, want)
	}

	w := g.fleet.Workers()[0]
	if err := w.Configure(mockworker.AdminConfig{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// The ended request's deadline timer is stopped (its goroutine ends after the answer).
	testutil.Eventually(t, "no timer left on the fake clock", func() bool { return fake.Waiting() == 0 })
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://gateway/v1/chat/completions")
		req.SetBodyString(fmt.Sprintf(grpcChatBody, ""))
		err := g.client.DoTimeout(req, resp, time.Minute)
		done <- result{resp.StatusCode(), string(resp.Body()), err}
	}()
	// The request's deadline is a timer on the fake clock: nothing ends it until the clock
	// moves past it.
	testutil.Eventually(t, "the request's deadline armed on the fake clock", func() bool { return fake.Waiting() == 1 })
	testutil.Eventually(t, "the engine holds the request", func() bool { return w.Active() == 1 })
	select {
	case r := <-done:
		t.Fatalf("answered before the fake clock moved: %+v", r)
	default:
	}
	fake.Advance(timeout)
	r := <-done
	if r.err != nil || r.status != 504 || !strings.Contains(r.body, "--request-timeout-secs") {
		t.Fatalf("after the fake clock passed the deadline: %+v, want 504", r)
	}
	testutil.Eventually(t, "the engine let go", func() bool { return w.Active() == 0 })

	// Two requests: the first took no time on the fake clock, the second the timeout. The
	// request's record is observed once its answer is written, so it may land after the
	// client has read it.
	var b bytes.Buffer
	testutil.Eventually(t, "the second request counted", func() bool {
		b.Reset()
		set.WritePrometheus(&b)
		return strings.Contains(b.String(), `smg_http_request_duration_seconds_count{path="/v1/chat/completions"} 2`+"\n")
	})
	if want := `smg_http_request_duration_seconds_sum{path="/v1/chat/completions"} 600` + "\n"; !strings.Contains(b.String(), want) {
		t.Fatalf("want %q in:\n%s", want, b.String())
	}
}
