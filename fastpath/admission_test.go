package fastpath

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
)

// admitNow takes a slot for a request that may not wait: false when it is refused or would
// have to wait (a waiter parked by mistake is taken out of the queue again).
func admitNow(a *admission) bool {
	var w parkedWaiter
	_, st := a.admitOrPark(&w, evloop.Unparker{})
	if st == admitParked {
		a.leave(&w)
	}
	return st == admitted
}

// awaitGrant waits until release has handed the parked waiter w a slot, and takes it up.
func awaitGrant(a *admission, w *parkedWaiter) {
	for {
		a.mu.Lock()
		queued := w.queued
		a.mu.Unlock()
		if !queued {
			if !a.leave(w) {
				panic("a waiter out of the queue without a slot")
			}
			return
		}
		runtime.Gosched()
	}
}

func TestAdmissionQueuesThenRefuses(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 2, QueueSize: 1, QueueTimeout: time.Hour}, clock.Real{})
	for range 2 {
		if !admitNow(a) {
			t.Fatal("a free slot was refused")
		}
	}
	var waiter, late parkedWaiter
	if _, st := a.admitOrPark(&waiter, evloop.Unparker{}); st != admitParked {
		t.Fatalf("past the cap: outcome %d, want parked in the queue", st)
	}
	if e, st := a.admitOrPark(&late, evloop.Unparker{}); st != admitRefused || e.code != "admission_queue_full" {
		t.Fatalf("queue full: %v %d", e, st)
	}
	a.release()
	if !a.leave(&waiter) {
		t.Fatal("the waiter did not get the freed slot")
	}
	if a.active.Load() != 2 || a.waiting.Load() != 0 {
		t.Fatalf("active %d waiting %d", a.active.Load(), a.waiting.Load())
	}
}

// TestAdmissionNeverExceedsLimitUnderContention: 64 goroutines take and free slots, parking
// in the queue when none is free; at no time do more than the cap hold one, and every
// waiter is handed a slot in the end.
func TestAdmissionNeverExceedsLimitUnderContention(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 3, QueueSize: 1000, QueueTimeout: time.Minute}, clock.Real{})
	var inside, peak atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w parkedWaiter
			for range 50 {
				switch _, st := a.admitOrPark(&w, evloop.Unparker{}); st {
				case admitRefused:
					t.Error("refused with a deep queue")
					return
				case admitParked:
					awaitGrant(a, &w)
				}
				n := inside.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inside.Add(-1)
				a.release()
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 3 || a.active.Load() != 0 || a.waiting.Load() != 0 {
		t.Fatalf("peak %d active %d waiting %d", peak.Load(), a.active.Load(), a.waiting.Load())
	}
}

// TestRateLimitAllowsOneSecondBurst drives the rate limit with a fake clock: at 100/s a
// burst of one second's worth passes at once and the next request is refused; each 10 ms the
// clock moves lets one more through, and a quiet second refills the whole burst.
func TestRateLimitAllowsOneSecondBurst(t *testing.T) {
	fake := clock.NewFake()
	a := newAdmission(AdmissionConfig{RatePerSecond: 100}, fake)
	burst := func() (allowed int) {
		for range 300 {
			if admitNow(a) {
				allowed++
			}
		}
		return allowed
	}
	if n := burst(); n != 100 {
		t.Fatalf("%d of 300 allowed at once at 100/s, want a burst of 100", n)
	}
	var w parkedWaiter
	if e, st := a.admitOrPark(&w, evloop.Unparker{}); st != admitRefused || e.code != "rate_limit_exceeded" {
		t.Fatalf("past the burst: %v %d, want rate_limit_exceeded", e, st)
	}
	fake.Advance(10 * time.Millisecond)
	if n := burst(); n != 1 {
		t.Fatalf("%d allowed 10 ms later, want 1", n)
	}
	fake.Advance(time.Second)
	if n := burst(); n != 100 {
		t.Fatalf("%d allowed after a quiet second, want 100", n)
	}
}

// TestRateLimitBelowOnePerSecond: at 0.5/s one request passes, the next is refused, and one
// more passes each two seconds (a burst of one second's worth would be half a request and
// refuse every one).
func TestRateLimitBelowOnePerSecond(t *testing.T) {
	fake := clock.NewFake()
	a := newAdmission(AdmissionConfig{RatePerSecond: 0.5}, fake)
	for i, want := range []bool{true, false} {
		if got := admitNow(a); got != want {
			t.Fatalf("request %d at once: admitted %v, want %v", i, got, want)
		}
	}
	fake.Advance(time.Second)
	if admitNow(a) {
		t.Fatal("admitted 1 s after the first at 0.5/s")
	}
	fake.Advance(time.Second)
	if !admitNow(a) {
		t.Fatal("refused 2 s after the first at 0.5/s")
	}
}

// TestQueueSizeZeroMeansNoQueue: --queue-size 0 lets nobody wait (it does not mean the
// default of 100): past the cap a request is refused at once.
func TestQueueSizeZeroMeansNoQueue(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 1, QueueSize: 0, QueueTimeout: time.Hour}, clock.Real{})
	if !admitNow(a) {
		t.Fatal("the first request was refused")
	}
	var w parkedWaiter
	if e, st := a.admitOrPark(&w, evloop.Unparker{}); st != admitRefused || e != errQueueFull {
		t.Fatalf("past the cap with no queue: outcome %d, %v; want 429 queue full at once", st, e)
	}
	a.release()
}

// TestQueuedAdmissionThroughTheGateway: past --max-concurrent-requests a request waits in the
// queue (on the event loops: parked on its loop, no goroutine) and is served when the slot
// frees; past --queue-size one is refused at once (429 admission_queue_full); one that waits
// longer than --queue-timeout-secs gets 503 admission_queue_timeout; a client that leaves while
// it waits frees its place in the queue. Nothing stays admitted or in flight.
func TestQueuedAdmissionThroughTheGateway(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{Admission: AdmissionConfig{MaxConcurrent: 1, QueueSize: 1, QueueTimeout: time.Hour}}, fw)
	adm := g.srv.adm
	streamDone := make(chan int, 1)
	go func() { // holds the one slot until the test ends its stream
		streamDone <- g.do("POST", "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`).StatusCode()
	}()
	fw.events <- "first" // the stream is under way: its request holds the slot
	queued := make(chan *fasthttp.Response, 1)
	go func() { queued <- g.do("POST", "/v1/chat/completions", chatBody) }()
	testutil.Eventually(t, "the second request queued", func() bool { return adm.waiting.Load() == 1 })
	if resp := g.do("POST", "/v1/chat/completions", chatBody); resp.StatusCode() != 429 {
		t.Fatalf("past --queue-size: %d %s, want 429", resp.StatusCode(), resp.Body())
	} else if code, _, _ := envelope(t, resp); code != "admission_queue_full" {
		t.Fatalf("past --queue-size: code %q", code)
	}
	select {
	case resp := <-queued:
		t.Fatalf("the queued request was answered while the slot was held: %d %s", resp.StatusCode(), resp.Body())
	default:
	}

	close(fw.events) // the stream ends: its slot goes to the queued request
	if code := <-streamDone; code != 200 {
		t.Fatalf("the stream: %d", code)
	}
	if resp := <-queued; resp.StatusCode() != 200 {
		t.Fatalf("the queued request: %d %s", resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "nothing admitted or queued", func() bool { return adm.active.Load() == 0 && adm.waiting.Load() == 0 })

}

// TestClientLeavingTheAdmissionQueueFreesItsPlace: a request parked in the admission queue
// whose client hangs up leaves the queue at once (its place is free for the next request)
// and never reaches a worker.
func TestClientLeavingTheAdmissionQueueFreesItsPlace(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{Admission: AdmissionConfig{MaxConcurrent: 1, QueueSize: 1, QueueTimeout: time.Hour}}, fw)
	adm := g.srv.adm
	conn, err := net.Dial("tcp", g.serveTCP())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	streamDone := make(chan int, 1)
	go func() {
		streamDone <- g.do("POST", "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`).StatusCode()
	}()
	fw.events <- "first"
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: " + itoa(len(chatBody)) + "\r\n\r\n" + chatBody
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the raw client queued", func() bool { return adm.waiting.Load() == 1 })
	conn.Close()
	testutil.Eventually(t, "its place freed", func() bool { return adm.waiting.Load() == 0 })
	close(fw.events)
	if code := <-streamDone; code != 200 {
		t.Fatalf("the stream: %d", code)
	}
	testutil.Eventually(t, "nothing admitted, nothing in flight", func() bool { return adm.active.Load() == 0 && g.inFlight() == 0 })
	if n := len(fw.served); n != 1 {
		t.Fatalf("the worker got %d requests, want only the stream's", n)
	}
}

// TestQueuedAdmissionTimesOut: a request that waits past --queue-timeout-secs gets 503
// admission_queue_timeout, and the slot's holder is unaffected.
func TestQueuedAdmissionTimesOut(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{Admission: AdmissionConfig{MaxConcurrent: 1, QueueSize: 4, QueueTimeout: 50 * time.Millisecond}}, fw)
	streamDone := make(chan int, 1)
	go func() {
		streamDone <- g.do("POST", "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`).StatusCode()
	}()
	fw.events <- "first"
	resp := g.do("POST", "/v1/chat/completions", chatBody)
	if code, _, _ := envelope(t, resp); resp.StatusCode() != 503 || code != "admission_queue_timeout" {
		t.Fatalf("%d %s: want 503 admission_queue_timeout", resp.StatusCode(), resp.Body())
	}
	close(fw.events)
	if code := <-streamDone; code != 200 {
		t.Fatalf("the stream: %d", code)
	}
	testutil.Eventually(t, "nothing admitted or queued", func() bool { return g.srv.adm.active.Load() == 0 && g.srv.adm.waiting.Load() == 0 })
}

// TestAdmissionParksLoopWaiters: a request on an event loop that must wait is queued as a
// parkedWaiter (no goroutine); release hands it the freed slot (granted, leave says so), a
// waiter that leaves while queued takes nothing, and the queue bound counts parked waiters.
func TestAdmissionParksLoopWaiters(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 1, QueueSize: 2, QueueTimeout: time.Hour}, clock.Real{})
	var w1, w2, w3 parkedWaiter
	if _, st := a.admitOrPark(&w1, evloop.Unparker{}); st != admitted {
		t.Fatalf("a free slot: outcome %d", st)
	}
	if _, st := a.admitOrPark(&w1, evloop.Unparker{}); st != admitParked {
		t.Fatalf("past the cap: outcome %d, want parked", st)
	}
	if _, st := a.admitOrPark(&w2, evloop.Unparker{}); st != admitParked {
		t.Fatalf("second waiter: outcome %d, want parked", st)
	}
	if e, st := a.admitOrPark(&w3, evloop.Unparker{}); st != admitRefused || e != errQueueFull {
		t.Fatalf("past --queue-size: %v %d", e, st)
	}
	if a.leave(&w2) { // w2's park timed out while queued
		t.Fatal("a queued waiter that leaves got a slot")
	}
	a.release() // the slot goes to w1, the oldest
	if a.active.Load() != 1 || a.waiting.Load() != 0 || a.parked.Load() != 0 {
		t.Fatalf("after release: active %d waiting %d parked %d", a.active.Load(), a.waiting.Load(), a.parked.Load())
	}
	if !a.leave(&w1) {
		t.Fatal("the woken waiter has no slot")
	}
	if a.leave(&w1) {
		t.Fatal("a slot taken up twice")
	}
	a.release()
	if a.active.Load() != 0 {
		t.Fatalf("active %d after the last release", a.active.Load())
	}
}
