package fastpath

import (
	"github.com/smg-go/smg/internal/clock"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// TestRetryNeverOutlivesTheDeadline drives attempt.tryDeadline and attempt.retry with an
// injected clock: whatever the retry settings and however long each round trip takes (at most
// until its try's deadline, as DoDeadline bounds it), no try's deadline is past the request's,
// a retry is granted only when its pause ends before the request's deadline, and never beyond
// the retry budget.
func TestRetryNeverOutlivesTheDeadline(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	w := &worker.Worker{}
	rng := rand.New(rand.NewPCG(16, 1))
	for i := range 2000 {
		retry := RetryConfig{MaxRetries: rng.IntN(30), InitialBackoff: ms(rng.IntN(500)), Multiplier: 1 + 2*rng.Float64(), Jitter: rng.Float64() / 2}
		retry.MaxBackoff = retry.InitialBackoff + ms(rng.IntN(3000))
		timeout := ms(1 + rng.IntN(10_000))
		s := &Server{cfg: Config{RequestTimeout: timeout, Retry: retry}}
		start := time.Unix(1_000_000, 0)
		a := attempt{s: s, req: &policy.Request{}, deadline: start.Add(timeout)}
		now, attempts := start, 1
		for {
			try := a.tryDeadline(rng.IntN(2) == 0, now)
			if try.After(a.deadline) || try.Before(now) {
				t.Fatalf("case %d: try deadline %v, request deadline %v, now %v", i, try, a.deadline, now)
			}
			if now = now.Add(ms(rng.IntN(400))); now.After(try) { // the try's round trip
				now = try
			}
			pause, ok := a.retry(w, now)
			if !ok {
				break
			}
			if now = now.Add(pause); !now.Before(a.deadline) {
				t.Fatalf("case %d (%+v, timeout %v): retry %d granted a pause that ends %v after the deadline", i, retry, timeout, attempts, now.Sub(a.deadline))
			}
			attempts++
		}
		if attempts > retry.attempts() {
			t.Fatalf("case %d: %d attempts, the budget is %d", i, attempts, retry.attempts())
		}
		if len(a.req.Exclude) != attempts {
			t.Fatalf("case %d: %d workers excluded after %d failed attempts", i, len(a.req.Exclude), attempts)
		}
	}

	// Instant failures, 300 ms pauses, 1 s: retries after 0, 300 and 600 ms; the pause after
	// 900 ms would reach the deadline, so the fourth failure is the answer.
	s := &Server{cfg: Config{RequestTimeout: time.Second, Retry: RetryConfig{MaxRetries: 100, InitialBackoff: ms(300), MaxBackoff: ms(300), Multiplier: 1}}}
	start := time.Unix(1_000_000, 0)
	a := attempt{s: s, req: &policy.Request{}, deadline: start.Add(time.Second)}
	now, attempts := start, 1
	for pause, ok := a.retry(w, now); ok; pause, ok = a.retry(w, now) {
		now = now.Add(pause)
		attempts++
	}
	if attempts != 4 {
		t.Fatalf("%d attempts in 1 s with 300 ms pauses, want 4", attempts)
	}

	// Buffered tries that hang: each is cut at half the time left (500, 200, 50 ms), then the
	// 100 ms pause no longer fits: three attempts. The last try by count gets all that is left.
	s.cfg.Retry.InitialBackoff, s.cfg.Retry.MaxBackoff = ms(100), ms(100)
	a = attempt{s: s, req: &policy.Request{}, deadline: start.Add(time.Second)}
	now, attempts = start, 1
	for {
		now = a.tryDeadline(false, now)
		pause, ok := a.retry(w, now)
		if !ok {
			break
		}
		now = now.Add(pause)
		attempts++
	}
	if attempts != 3 || now != start.Add(950*time.Millisecond) {
		t.Fatalf("%d hung attempts ending at %v, want 3 ending at 950ms", attempts, now.Sub(start))
	}
	s.cfg.Retry.MaxRetries = 0
	if got := a.tryDeadline(false, start); got != a.deadline {
		t.Fatalf("the last try's deadline is %v, want the request's", got.Sub(start))
	}
}

// servedCount is how many generation requests the fakes received.
func servedCount(fakes ...*fakeWorker) int {
	n := 0
	for _, f := range fakes {
		n += len(f.served)
	}
	return n
}

// TestRetriedRequestNeverOutlivesItsDeadline: with ten workers that always answer 503 and a
// budget of 50 retries 500 ms apart, a request with a 2 s deadline makes at most 4 attempts
// (each retry needs its whole pause to end before the deadline, and a pause never ends
// early), then answers with the last worker's own 503, or 504 when a busy machine made the
// last try outlast its share of the time left. Each attempt used to get a fresh timeout and
// the retries ran until every worker had failed: 10 attempts.
func TestRetriedRequestNeverOutlivesItsDeadline(t *testing.T) {
	const timeout, pause = 2 * time.Second, 500 * time.Millisecond
	busy := make([]*fakeWorker, 10)
	for i := range busy {
		busy[i] = newFakeWorker(t, "busy", 503)
	}
	cfg := Config{RequestTimeout: timeout, Retry: RetryConfig{MaxRetries: 50, InitialBackoff: pause, MaxBackoff: pause, Multiplier: 1}}
	g := newGateway(t, "round_robin", cfg, busy...)
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	if own := resp.StatusCode() == 503 && string(resp.Body()) == string(okBody); !own {
		if code, _, _ := envelope(t, resp); resp.StatusCode() != 504 || code != "worker_timeout" {
			t.Fatalf("%d %s: want the last worker's own 503 (or 504 worker_timeout)", resp.StatusCode(), resp.Body())
		}
	}
	if n := servedCount(busy...); n < 2 || n > int(timeout/pause) {
		t.Fatalf("%d attempts; want at least one retry and at most %d within the deadline", n, timeout/pause)
	}
	testutil.Eventually(t, "in-flight 0", func() bool { return g.inFlight() == 0 })
}

// TestDisaggregatedRetriesNeverOutliveTheDeadline is TestRetriedRequestNeverOutlivesItsDeadline
// for PD and EPD requests, whose retries wake on their own paths (a new pair, a new triple):
// ten prefill workers that always answer 503, a budget of 50 retries 500 ms apart and a 2 s
// deadline give at most 4 attempts, then the last prefill's own 503, or 504 when a busy
// machine made the last try outlast its share of the time left (a try that another may
// follow gets half of it): either way the request ends within its deadline.
func TestDisaggregatedRetriesNeverOutliveTheDeadline(t *testing.T) {
	const timeout, pause = 2 * time.Second, 500 * time.Millisecond
	cfg := Config{RequestTimeout: timeout, Retry: RetryConfig{MaxRetries: 50, InitialBackoff: pause, MaxBackoff: pause, Multiplier: 1}}
	for _, mode := range []string{"pd", "epd"} {
		t.Run(mode, func(t *testing.T) {
			busy := make([]*pdFake, 10)
			for i := range busy {
				busy[i] = newPDFake(t, status503)
			}
			decode := []*pdFake{newPDFake(t, answerJSON(decodeAnswer))}
			var g *gateway
			var resp *fasthttp.Response
			if mode == "pd" {
				g = newPDGatewayConfig(t, cfg, busy, decode, nil)
				resp = g.do("POST", "/v1/chat/completions", chatBody)
			} else {
				g = newEPDGatewayConfig(t, cfg, []*pdFake{newPDFake(t, answerJSON(`{"encoded":true}`))}, busy, decode, nil)
				resp = g.do("POST", "/v1/chat/completions", epdImageChat)
			}
			own := resp.StatusCode() == 503 && strings.Contains(string(resp.Body()), "busy")
			if !own {
				if code, _, _ := envelope(t, resp); resp.StatusCode() != 504 || code != "worker_timeout" {
					t.Fatalf("%d %s: want the last prefill worker's own 503 (or 504 worker_timeout)", resp.StatusCode(), resp.Body())
				}
			}
			n := 0
			for _, f := range busy {
				n += len(f.received())
			}
			if n < 2 || n > int(timeout/pause) {
				t.Fatalf("%d attempts; want at least one retry and at most %d within the deadline", n, timeout/pause)
			}
			testutil.Eventually(t, "in-flight 0", func() bool { return g.inFlight() == 0 })
		})
	}
}

// TestHungWorkersTimeOutWithinTheRequestsDeadline: workers that do not answer are cut at half
// the time left while retries are possible (so that one hung worker leaves time for another),
// and a retry is made only when its 100 ms pause ends before the deadline. With a 1 s
// deadline the cuts come no earlier than 500, 800 and 950 ms (a slow gateway only comes later,
// which leaves less time), so at most three of the ten hung workers are tried before the
// request ends with 504. Each attempt used to get a fresh --request-timeout-secs: ten hung
// workers held the request for ten timeouts.
func TestHungWorkersTimeOutWithinTheRequestsDeadline(t *testing.T) {
	hung := make([]*fakeWorker, 10)
	for i := range hung {
		hung[i] = newFakeWorker(t, "hung", 200)
		hung[i].delay = 1500 * time.Millisecond
	}
	cfg := Config{RequestTimeout: time.Second, Retry: RetryConfig{MaxRetries: 50, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Multiplier: 1}}
	g := newGateway(t, "round_robin", cfg, hung...)
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	if code, _, _ := envelope(t, resp); resp.StatusCode() != 504 || code != "worker_timeout" {
		t.Fatalf("%d %s: want 504 worker_timeout", resp.StatusCode(), resp.Body())
	}
	if n := servedCount(hung...); n < 2 || n > 3 {
		t.Fatalf("%d attempts; want a retry after the first cut and at most 3 within the deadline", n)
	}
	testutil.Eventually(t, "in-flight 0", func() bool { return g.inFlight() == 0 })
}

// serveTCP returns the address of the gateway's loopback socket.
func (g *gateway) serveTCP() string { return g.ln.Addr().String() }

// TestClientLeavingDuringBackoffFreesEverything: a client that hangs up while its request
// waits out a retry pause (one minute here) ends the request at once: the admission slot is
// free, nothing is in flight, no breaker permit is held, and no further attempt is made; for
// a regular request, a PD pair and an EPD triple alike.
func TestClientLeavingDuringBackoffFreesEverything(t *testing.T) {
	for _, mode := range []string{"regular", "pd", "epd"} {
		t.Run(mode, func(t *testing.T) {
			cfg := Config{
				RequestTimeout: time.Hour,
				Admission:      AdmissionConfig{MaxConcurrent: 4},
				Retry:          RetryConfig{MaxRetries: 5, InitialBackoff: time.Minute, MaxBackoff: time.Minute, Multiplier: 1},
			}
			var g *gateway
			var attempts func() int
			body := chatBody
			switch mode {
			case "pd":
				p := newPDFake(t, status503)
				g = newPDGatewayConfig(t, cfg, []*pdFake{p}, []*pdFake{newPDFake(t, answerJSON(decodeAnswer))}, nil)
				attempts = func() int { return len(p.received()) }
			case "epd":
				p := newPDFake(t, status503)
				g = newEPDGatewayConfig(t, cfg, []*pdFake{newPDFake(t, answerJSON(`{"encoded":true}`))}, []*pdFake{p},
					[]*pdFake{newPDFake(t, answerJSON(decodeAnswer))}, nil)
				attempts = func() int { return len(p.received()) }
				body = epdImageChat
			default:
				busy := newFakeWorker(t, "busy", 503)
				g = newGateway(t, "round_robin", cfg, busy)
				attempts = func() int { return len(busy.served) }
			}
			conn := sendBody(t, g.serveTCP(), body)
			testutil.Eventually(t, "the first attempt", func() bool { return attempts() == 1 && g.srv.adm.active.Load() == 1 })
			conn.Close()
			testutil.Eventually(t, "the admission slot freed", func() bool { return g.srv.adm.active.Load() == 0 })
			// The slot is freed when the handler returns: no attempt can follow.
			if n := attempts(); n != 1 {
				t.Fatalf("%d attempts; the client left during the first pause", n)
			}
			if n := g.inFlight(); n != 0 {
				t.Fatalf("in-flight %d after the client left", n)
			}
			for _, w := range g.reg.Current().Workers {
				if st := w.Breaker.Stats(clock.Nanos()); st.State != breaker.Closed || st.Probes != 0 {
					t.Fatalf("breaker of %s: %+v", w.URL, st)
				}
			}
		})
	}
}

// TestClientStillThereGetsTheRetry: the watch on the client's socket during a pause reads
// nothing, so a client that stays is served by the retry as usual, and its next requests on
// the same connection are answered too.
func TestClientStillThereGetsTheRetry(t *testing.T) {
	busy, ok := newFakeWorker(t, "busy", 503), newFakeWorker(t, "ok", 200)
	g := newGateway(t, "round_robin", Config{Retry: fastRetries()}, busy, ok)
	client := &fasthttp.HostClient{Addr: g.serveTCP(), MaxConns: 1}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gw/v1/chat/completions")
	req.SetBodyString(chatBody)
	for i := range 4 { // round robin: every other request meets the busy worker first
		if err := client.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("request %d: %d %v", i, resp.StatusCode(), err)
		}
	}
	if len(busy.served) == 0 {
		t.Fatal("the busy worker was never tried: no pause happened")
	}
	if n := client.ConnsCount(); n != 1 {
		t.Fatalf("%d connections: the pause must leave the client's connection usable", n)
	}
}

// TestClientLeavingBeforeTheFirstByteIsNotTheWorkersFault: a client that hangs up while its
// worker has not answered ends the round trip at once (the worker's connection closed,
// nothing in flight), is not retried, and counts against nothing: no upstream error, no
// breaker failure. fasthttp reports any error on the first byte as a closed connection, which
// made the departure a worker fault that was then retried (worker.Cause).
func TestClientLeavingBeforeTheFirstByteIsNotTheWorkersFault(t *testing.T) {
	hung, other := newFakeWorker(t, "hung", 200), newFakeWorker(t, "other", 200)
	hung.delay, other.delay = 2*time.Second, 2*time.Second
	g := newGateway(t, "round_robin", Config{Retry: fastRetries()}, hung, other)
	conn := sendChat(t, g.serveTCP())
	// The client leaves once a worker holds the request: in flight alone is counted at the
	// pick, before the worker has read it, and a departure then would leave 0 attempts.
	testutil.Eventually(t, "the request at a worker", func() bool { return len(hung.served)+len(other.served) == 1 })
	conn.Close()
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	testutil.Eventually(t, "the admission slot freed", func() bool { return g.srv.adm.active.Load() == 0 })
	if n := len(hung.served) + len(other.served); n != 1 {
		t.Fatalf("%d attempts; a request whose client left is not retried", n)
	}
	for _, w := range g.reg.Current().Workers {
		st := w.Breaker.Stats(clock.Nanos())
		if errs := w.Upstream[worker.OutcomeError].Get(); errs != 0 || st.State != breaker.Closed || st.Faults != 0 {
			t.Fatalf("worker %s: %d upstream errors, breaker %+v; a client's departure is not the worker's fault", w.URL, errs, st)
		}
	}
}

// sendChat dials the gateway at addr over TCP and sends a chat request on the connection,
// which the test closes to leave (and the test's cleanup closes anyway).
func sendChat(t *testing.T, addr string) net.Conn { return sendBody(t, addr, chatBody) }

// sendBody is sendChat with the request body body.
func sendBody(t *testing.T, addr, body string) net.Conn {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return conn
}
