package fastpath

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
)

// rawStreamWorker is an in-memory engine that answers a streamed request with exactly the
// bytes registered for it, written in the registered chunks with a flush after each, so that
// the gateway's relay sees every split of the stream the fuzzer can think of. A request names
// its case with the X-Fuzz-Case header, which the gateway forwards like any other header.
type rawStreamWorker struct {
	cases sync.Map // case id (string) -> [][]byte chunks
	next  atomic.Uint64
}

func newRawStreamWorker(t testing.TB) (*rawStreamWorker, *fakeWorker) {
	rw := &rawStreamWorker{}
	fw := &fakeWorker{name: "raw", ln: newTestListener(t)}
	fw.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		v, ok := rw.cases.Load(string(ctx.Request.Header.Peek("X-Fuzz-Case")))
		if !ok {
			ctx.Error("unknown fuzz case", fasthttp.StatusBadRequest)
			return
		}
		chunks := v.([][]byte)
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for _, c := range chunks {
				if _, err := w.Write(c); err != nil {
					return
				}
				if err := w.Flush(); err != nil {
					return
				}
			}
		})
	}}
	go func() { _ = fw.srv.Serve(fw.ln) }()
	t.Cleanup(func() { _ = fw.srv.Shutdown(); _ = fw.ln.Close() })
	return rw, fw
}

// register stores the chunks of a new case and returns its id.
func (rw *rawStreamWorker) register(chunks [][]byte) string {
	id := strconv.FormatUint(rw.next.Add(1), 10)
	rw.cases.Store(id, chunks)
	return id
}

// splitAt cuts body into chunks whose lengths come from cuts, one byte each (0 means 1 byte,
// 255 means 256), cycling through cuts; no cuts means one chunk.
func splitAt(body, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return [][]byte{body}
	}
	var chunks [][]byte
	for i := 0; len(body) > 0; i++ {
		n := min(int(cuts[i%len(cuts)])+1, len(body))
		chunks = append(chunks, body[:n])
		body = body[n:]
	}
	return chunks
}

// sseSeeds are realistic upstream streams: OpenAI chunks, SGLang /generate events, multi-line
// events, CRLF line ends, comments and keep-alives, an event larger than any read buffer,
// [DONE], and streams that end without a final blank line.
func sseSeeds() []string {
	chunk := func(s string) string {
		return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	huge := "data: {\"text\":\"" + strings.Repeat("x", 70_000) + "\"}\n\n"
	return []string{
		chunk("Hello") + chunk(" world") + "data: [DONE]\n\n",
		"data: {\"text\":\"a\",\"meta_info\":{\"id\":\"1\"}}\n\ndata: {\"text\":\"ab\"}\n\ndata: [DONE]\n\n",
		"event: message\nid: 7\nretry: 1000\ndata: line one\ndata: line two\n\n",
		"data: crlf\r\n\r\ndata: [DONE]\r\n\r\n",
		": keep-alive comment\n\n:\n\ndata: x\n\n",
		huge + "data: [DONE]\n\n",
		"data: unfinished event without a blank line",
		"data: {\"error\":{\"message\":\"engine overloaded\",\"code\":\"overloaded\"}}\n\ndata: [DONE]\n\n",
		"\n\n\n",
		"data: \xff\xfe binary \x00 bytes\n\n",
	}
}

// FuzzRelaySSE feeds arbitrary upstream bytes, split at arbitrary points, through the
// gateway's streamed path: the client must receive exactly the bytes the worker sent, and the
// worker's in-flight count must be back to 0 once the stream has ended.
func FuzzRelaySSE(f *testing.F) {
	for i, s := range sseSeeds() {
		f.Add([]byte(s), []byte{})
		f.Add([]byte(s), []byte{0})                   // one byte at a time
		f.Add([]byte(s), []byte{byte(i * 7), 3, 200}) // irregular
	}
	f.Add([]byte{}, []byte{})
	rw, fw := newRawStreamWorker(f)
	g := newGateway(f, "round_robin", Config{}, fw)
	body := `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`

	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		id := rw.register(splitAt(stream, cuts))
		defer rw.cases.Delete(id)
		g.t = t
		resp := g.do("POST", "/v1/chat/completions", body, "X-Fuzz-Case", id)
		defer fasthttp.ReleaseResponse(resp)
		if resp.StatusCode() != 200 {
			t.Fatalf("status %d: %q", resp.StatusCode(), resp.Body())
		}
		if got := resp.Body(); !bytes.Equal(got, stream) {
			t.Fatalf("client got %d bytes, worker sent %d\n got: %q\nsent: %q", len(got), len(stream), trimForLog(got), trimForLog(stream))
		}
		testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	})
}

func trimForLog(b []byte) []byte {
	if len(b) > 300 {
		return b[:300]
	}
	return b
}

func TestSplitAt(t *testing.T) {
	got := splitAt([]byte("abcdefg"), []byte{0, 2})
	want := []string{"a", "bcd", "e", "fg"}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Fatalf("chunk %d: %q, want %q", i, got[i], want[i])
		}
	}
	if c := splitAt([]byte("abc"), nil); len(c) != 1 || string(c[0]) != "abc" {
		t.Fatalf("no cuts: %q", c)
	}
}
