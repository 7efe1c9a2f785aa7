package fastpath

import (
	"bufio"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
)

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// newAnswerWorker is a fake worker whose POST answers come from answer.
func newAnswerWorker(t *testing.T, answer func(ctx *fasthttp.RequestCtx)) *fakeWorker {
	fw := &fakeWorker{name: "big", ln: newTestListener(t), served: make(chan struct{}, 64)}
	fw.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/v1/models" {
			ctx.SetBodyString(`{"object":"list","data":[{"id":"m1","object":"model"}]}`)
			return
		}
		answer(ctx)
	}}
	go func() { _ = fw.srv.Serve(fw.ln) }()
	t.Cleanup(func() { _ = fw.srv.Shutdown(); _ = fw.ln.Close() })
	return fw
}

// TestDeclaredAnswerPastTheLimitIsRefusedAtTheHead: a worker declaring 5 GB gets 502
// worker_answer_too_large from its head alone (nothing held, so no budget used), and is not
// retried elsewhere.
func TestDeclaredAnswerPastTheLimitIsRefusedAtTheHead(t *testing.T) {
	fw := newAnswerWorker(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStream(zeros{}, 5_000_000_000)
	})
	g := newGateway(t, "round_robin", Config{MaxAnswerSize: 1 << 20, MaxAnswerMemory: 4 << 20}, fw)
	r := g.do("POST", "/v1/chat/completions", chatBody)
	if r.StatusCode() != 502 || string(r.Header.Peek("X-SMG-Error-Code")) != "worker_answer_too_large" || !strings.Contains(string(r.Body()), "1048576 bytes") {
		t.Fatalf("%d %s %s", r.StatusCode(), r.Header.Peek("X-SMG-Error-Code"), r.Body())
	}
	if used := g.srv.answers.used.Load(); used != 0 {
		t.Fatalf("answer budget in use after the refusal: %d", used)
	}
}

// TestHeldAnswersShareABudget: answers read whole (chunked, no declared length) share
// MaxAnswerMemory: while two hold most of it, a third gets 503 answer_memory_exhausted; an
// answer past MaxAnswerSize gets 502; and once the requests end the budget is back to 0
// though their keep-alive connections stay open.
func TestHeldAnswersShareABudget(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	fw := newAnswerWorker(t, func(ctx *fasthttp.RequestCtx) {
		huge := strings.Contains(string(ctx.PostBody()), "huge")
		ctx.SetContentType("application/json")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			if huge { // past MaxAnswerSize, at once
				_, _ = io.CopyN(w, zeros{}, 3<<20)
				_ = w.Flush()
				return
			}
			_, _ = io.CopyN(w, zeros{}, 600<<10) // grows the held buffer to 1 MiB
			_ = w.Flush()
			started <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "{}")
		})
	})
	g := newGateway(t, "round_robin", Config{MaxAnswerSize: 1 << 20, MaxAnswerMemory: 2 << 20}, fw)
	const limit = 2 << 20

	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() { codes[i] = g.do("POST", "/v1/chat/completions", chatBody).StatusCode() })
	}
	<-started
	<-started
	testutil.Eventually(t, "both answers held", func() bool { return g.srv.answers.used.Load() == limit })
	r := g.do("POST", "/v1/chat/completions", chatBody)
	if r.StatusCode() != 503 || string(r.Header.Peek("X-SMG-Error-Code")) != "answer_memory_exhausted" {
		t.Fatalf("third answer while the budget is taken: %d %s", r.StatusCode(), r.Body())
	}
	close(release)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("the held answers: %v", codes)
	}
	r = g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"huge"}]}`)
	if r.StatusCode() != 502 || string(r.Header.Peek("X-SMG-Error-Code")) != "worker_answer_too_large" {
		t.Fatalf("an answer past MaxAnswerSize: %d %s", r.StatusCode(), r.Body())
	}
	testutil.Eventually(t, "the answer budget returned", func() bool { return g.srv.answers.used.Load() == 0 })
	if n := g.srv.openConnections(); n == 0 {
		t.Fatal("the client's keep-alive connections closed: the test would not show the budget returned per request")
	}
}
