package fastpath

import (
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

func fastRetries() RetryConfig {
	return RetryConfig{MaxRetries: 3, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Multiplier: 2, Jitter: 0.1}
}

func TestRetriesMoveFailedRequestsToHealthyWorkers(t *testing.T) {
	busy, ok := newFakeWorker(t, "busy", 503), newFakeWorker(t, "ok", 200)
	g := newGateway(t, "round_robin", Config{Retry: fastRetries()}, busy, ok)
	g.addWorker("http://10.0.0.9:8000", "m1") // refuses connections
	for i := range 30 {
		body := chatBody
		if i%2 == 1 {
			body = `{"model":"m1","stream":true,"messages":[{"role":"user","content":"x"}]}`
		}
		if i%2 == 1 {
			go func() { ok.events <- `{"n":1}`; close(ok.events) }()
		}
		resp := g.do("POST", "/v1/chat/completions", body)
		if resp.StatusCode() != 200 || string(resp.Header.Peek("X-Smg-Routed-Worker-Id")) != "http://10.0.0.2:8000" {
			t.Fatalf("request %d: %d via %s: %s", i, resp.StatusCode(), resp.Header.Peek("X-Smg-Routed-Worker-Id"), resp.Body())
		}
		if i%2 == 1 {
			ok.events = make(chan string)
		}
	}
	if len(busy.served) == 0 {
		t.Fatal("the busy worker was never tried: the test proves nothing")
	}
	testutil.Eventually(t, "in-flight 0", func() bool { return g.inFlight() == 0 })
}

func TestLastAttemptDeliversTheWorkersAnswer(t *testing.T) {
	g := newGateway(t, "round_robin", Config{Retry: fastRetries()}, newFakeWorker(t, "a", 503), newFakeWorker(t, "b", 503))
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	// Both workers were busy: the client gets a worker's own 503, with the routing headers.
	if resp.StatusCode() != 503 || string(resp.Body()) != string(okBody) || len(resp.Header.Peek("X-Smg-Routed-Worker-Id")) == 0 {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
	}
}

func TestDisabledRetriesDeliverTheFirstAnswer(t *testing.T) {
	busy := newFakeWorker(t, "busy", 503)
	g := newGateway(t, "round_robin", Config{Retry: RetryConfig{Disabled: true}}, busy, newFakeWorker(t, "ok", 200))
	statuses := map[int]int{}
	for range 10 {
		statuses[g.do("POST", "/v1/chat/completions", chatBody).StatusCode()]++
	}
	if statuses[503] != 5 || statuses[200] != 5 {
		t.Fatalf("statuses %v: without retries round robin must deliver every 503", statuses)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	bad := newFakeWorker(t, "bad", 400)
	g := newGateway(t, "round_robin", Config{Retry: fastRetries()}, bad, newFakeWorker(t, "b", 400))
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	if resp.StatusCode() != 400 || len(bad.served) != 1 {
		t.Fatalf("%d after %d attempts", resp.StatusCode(), len(bad.served))
	}
}

func TestRetryBackoff(t *testing.T) {
	c := RetryConfig{MaxRetries: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Multiplier: 2}
	want := []time.Duration{100, 200, 300, 300}
	for n, w := range want {
		if got := c.backoff(n); got != w*time.Millisecond {
			t.Errorf("backoff(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	c.Jitter = 0.5
	for range 100 {
		if d := c.backoff(0); d < 50*time.Millisecond || d > 150*time.Millisecond {
			t.Fatalf("jittered backoff %v outside ±50%%", d)
		}
	}
	for _, bad := range []RetryConfig{{MaxRetries: -1}, {Multiplier: 0.5}, {Multiplier: 1, Jitter: 2}, {Multiplier: 1, InitialBackoff: 2, MaxBackoff: 1}} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--retry-") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
