package health

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// deadline only guards against a hang; no test asserts how long anything takes.
const deadline = 30 * time.Second

// fakeWorker is an engine's health endpoint on a 127.0.0.1 port the kernel picked.
type fakeWorker struct {
	url      string
	srv      *fasthttp.Server
	path     string      // the healthy path; other paths answer 404
	healthy  atomic.Bool // false: answer 503
	hits     atomic.Int64
	auth     atomic.Value // the last Authorization header, a string
	onHealth func()       // when set, runs inside every health request (to block or count)
}

func newFakeWorker(t *testing.T) *fakeWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fw := &fakeWorker{url: "http://" + ln.Addr().String(), path: "/health"}
	fw.healthy.Store(true)
	fw.auth.Store("")
	fw.srv = &fasthttp.Server{Handler: fw.handle}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fw.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = fw.srv.Shutdown()
		<-done
	})
	return fw
}

func (fw *fakeWorker) handle(ctx *fasthttp.RequestCtx) {
	fw.hits.Add(1)
	fw.auth.Store(string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)))
	if fw.onHealth != nil {
		fw.onHealth()
	}
	switch {
	case string(ctx.Path()) != fw.path:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	case !fw.healthy.Load():
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	default:
		ctx.SetBodyString("ok")
	}
}

// harness is a real registry, a checker on a fake clock, and a way to wait for publications.
type harness struct {
	t       *testing.T
	reg     *worker.Registry
	clk     *clock.Fake
	set     *metrics.Set
	logs    *syncbuf.Buffer
	checker *Checker
	changed chan struct{}
}

func newHarness(t *testing.T, edit func(*Config)) *harness {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	h := &harness{t: t, reg: reg, clk: clock.NewFake(), set: metrics.NewSet(), changed: make(chan struct{}, 1)}
	reg.Subscribe(func(*worker.Snapshot) {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	})
	cfg := DefaultConfig()
	cfg.SuccessThreshold = 2
	cfg.FailureThreshold = 2 // failed after 8
	cfg.Timeout = deadline
	cfg.Clock = h.clk
	cfg.Metrics = h.set
	cfg.Logger, h.logs = testutil.Logger(slog.LevelInfo)
	if edit != nil {
		edit(&cfg)
	}
	h.checker, err = New(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	h.checker.afterRound = func() { // rounds that change nothing must wake waitFor too
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
	t.Cleanup(h.checker.Stop)
	return h
}

func (h *harness) add(spec worker.Spec) *worker.Worker {
	h.t.Helper()
	if err := spec.Normalize(); err != nil {
		h.t.Fatal(err)
	}
	w, err := h.reg.Add(context.Background(), spec, h.checker.cfg.InitialStatus(&spec))
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

// waitFor waits until cond holds, re-checking after every registry publication and round.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	timeout := time.After(deadline)
	for !cond() {
		select {
		case <-h.changed:
		case <-timeout:
			h.t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func (h *harness) waitStatus(w *worker.Worker, want worker.Status) {
	h.t.Helper()
	h.waitFor(w.URL+" to be "+want.String(), func() bool { return w.Status() == want })
}

// round advances the clock by d and runs one round to completion.
func (h *harness) round(d time.Duration) {
	h.clk.Advance(d)
	h.checker.RunRound(context.Background())
}

func (h *harness) exposition() string {
	var buf bytes.Buffer
	h.set.WritePrometheus(&buf)
	return buf.String()
}

// metric returns the exposition line of the series name, or "" when it is not exported.
func (h *harness) metric(name string) string {
	for _, line := range strings.Split(h.exposition(), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

// checkerGoroutines counts goroutines running Checker code.
func checkerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "worker/health.(*Checker)") {
			count++
		}
	}
	return count
}

// noLeak fails the test if Checker goroutines outlive it.
func noLeak(t *testing.T) {
	t.Helper()
	timeout := time.Now().Add(deadline)
	for checkerGoroutines() > 0 {
		if time.Now().After(timeout) {
			t.Fatalf("%d checker goroutines still running", checkerGoroutines())
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}
