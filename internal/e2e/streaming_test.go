package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// streamedBodyRSSGrowthBoundMiB bounds how much the gateway's peak RSS may grow while it
// forwards one 48 MiB body that it streams (--max-buffered-request-bytes, default 1 MiB): the
// head, copy buffers and the client's and worker's socket buffers, not the body.
const streamedBodyRSSGrowthBoundMiB = 24

// TestLargeBodyStreamedToTheWorkerIntact: a 48 MiB chat body, past the default
// --max-buffered-request-bytes, reaches a real mock engine byte for byte (the engine answers
// the SHA-256 of what it received) although its tail is not JSON, which proves the gateway did
// not parse it (a parsed body that is not JSON gets 400), while the gateway's peak RSS grows
// by less than half the body; nothing stays in flight. A small body goes the parsed way.
func TestLargeBodyStreamedToTheWorkerIntact(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	pid := g.Cmd.Process.Pid
	fault := map[string]string{"X-Mock-Fault": "body-sha256"}

	small := `{"model":"mock-model","messages":[{"role":"user","content":"hi"}]}`
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", small+" not json", fault); r.Status != 400 {
		t.Fatalf("a small body that is not JSON: %d %s, want 400 from the gateway's parser", r.Status, r.Body)
	}
	checkHash(t, MustDo(t, "POST", g.URL+"/v1/chat/completions", small, fault), small)

	rssBefore := procStatusKB(t, pid, "VmRSS")
	large := `{"model":"mock-model","messages":[{"role":"user","content":"` + strings.Repeat("0123456789abcdef", 3<<20) + `"}]} not json`
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", large, fault)
	checkHash(t, r, large)
	peak := procStatusKB(t, pid, "VmHWM")
	t.Logf("STREAMED body %d MiB: gateway RSS %d KiB before, peak %d KiB", len(large)>>20, rssBefore, peak)
	if grown := (peak - rssBefore) / 1024; grown > streamedBodyRSSGrowthBoundMiB {
		t.Fatalf("the gateway's peak RSS grew %d MiB forwarding a %d MiB body, bound %d MiB: the body was buffered", grown, len(large)>>20, streamedBodyRSSGrowthBoundMiB)
	}
	if v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, m.URLs[0])); !ok || v != 0 {
		t.Fatalf("%v requests in flight after the streamed one ended", v)
	}
}

// checkHash checks that the mock engine's answer names the SHA-256 and length of body.
func checkHash(t *testing.T, r *Response, body string) {
	t.Helper()
	var got struct {
		SHA256 string `json:"body_sha256"`
		Bytes  int    `json:"body_bytes"`
	}
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &got) != nil {
		t.Fatalf("answer %d %s", r.Status, r.Body)
	}
	sum := sha256.Sum256([]byte(body))
	if got.SHA256 != hex.EncodeToString(sum[:]) || got.Bytes != len(body) {
		t.Fatalf("the engine received %d bytes with SHA-256 %s; sent %d bytes with %x", got.Bytes, got.SHA256, len(body), sum)
	}
}

// postChat posts body to gateway's chat completions route, chunked or with its length.
func postChat(t *testing.T, gateway, body string, chunked bool) *Response {
	t.Helper()
	if chunked {
		return doChunked(t, gateway+"/v1/chat/completions", body)
	}
	return MustDo(t, http.MethodPost, gateway+"/v1/chat/completions", body, nil)
}

// doChunked sends body to url chunked (no Content-Length), writing it in 16 KiB pieces, and
// returns the answer; a gateway that answers early and closes may end the upload with an
// error the answer explains, so a write error is not the test's failure.
func doChunked(t *testing.T, url, body string) *Response {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < len(body); i += 16 << 10 {
			if _, err := pw.Write([]byte(body[i:min(i+16<<10, len(body))])); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("chunked POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pr.CloseWithError(io.ErrClosedPipe)
	return &Response{Status: resp.StatusCode, Body: string(b), Header: resp.Header}
}

// pdTotal is the number of PD requests a fleet's workers counted of a role, whatever the result.
func pdTotal(t *testing.T, m *pdMock, role string) int {
	n := 0
	for _, result := range []string{"ok", "rejected", "timeout", "mismatch", "unreachable"} {
		n += pdCount(t, m, role, result)
	}
	return n
}

// TestPDLargeBodiesAreReadWholeAndBounded: in PD mode the gateway rewrites every
// body (the bootstrap fields), so --max-buffered-request-bytes does not stream it: a body 3
// times past it, with a Content-Length or chunked, reaches both real mock engines whole (the
// decode mock confirms the handover only when its prompt is the prefill's, and the answer
// counts every prompt token), while one past --max-payload-size gets 413 whether declared
// or chunked and reaches neither engine.
func TestPDLargeBodiesAreReadWholeAndBounded(t *testing.T) {
	p := startPDMock(t, "127.0.0.38", "prefill", "sglang", 1, FreePort(t, "127.0.0.38"))
	d := startPDMock(t, "127.0.0.39", "decode", "sglang", 1, 8998)
	g := StartGateway(t, "--pd-disaggregation", "--prefill", p.URLs[0], strconv.Itoa(p.bootstrapPort), "--decode", d.URLs[0],
		"--max-buffered-request-bytes", "65536", "--max-payload-size", "1048576")
	text := strings.Repeat("tell me more. ", 14_000) // 196 KB
	body := `{"model":"mock-model","messages":[{"role":"user","content":"` + text + `"}],"max_tokens":4}`
	for _, chunked := range []bool{false, true} {
		r := postChat(t, g.URL, body, chunked)
		var answer struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &answer) != nil {
			t.Fatalf("chunked %v: %d %.300s", chunked, r.Status, r.Body)
		}
		if answer.Usage.PromptTokens < len(text)/4 {
			t.Fatalf("chunked %v: the engine counted %d prompt tokens for a %d-byte prompt: it did not get the whole body", chunked, answer.Usage.PromptTokens, len(text))
		}
	}
	checkHandovers(t, 2, []*pdMock{p}, []*pdMock{d})

	huge := `{"model":"mock-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}]}`
	if r := MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", huge, nil); r.Status != 413 {
		t.Fatalf("a declared body past --max-payload-size: %d %.300s, want 413", r.Status, r.Body)
	}
	if r := doChunked(t, g.URL+"/v1/chat/completions", huge); r.Status != 413 {
		t.Fatalf("a chunked body past --max-payload-size: %d %.300s, want 413", r.Status, r.Body)
	}
	if np, nd := pdTotal(t, p, "prefill"), pdTotal(t, d, "decode"); np != 2 || nd != 2 {
		t.Fatalf("after the refused bodies the engines counted %d prefill and %d decode requests, want 2 each (the two served)", np, nd)
	}
	if v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, d.URLs[0])); !ok || v != 0 {
		t.Fatalf("%v requests in flight at the decode worker", v)
	}
}

// TestChunkedBodyPastThePayloadLimitIsNotRunByTheEngine: a chunked body past
// --max-payload-size, streamed to a real mock engine (it is past --max-buffered-request-bytes)
// until it ran past the limit, is refused with 413 and aborted at the engine: the engine
// admits no request for it (its prefix-cache query count, every admitted prompt's tokens,
// does not move), nothing stays in flight, and the next request is served.
func TestChunkedBodyPastThePayloadLimitIsNotRunByTheEngine(t *testing.T) {
	m := StartMocks(t, 1, "--mode", "engine", "--dialect", "vllm")
	g := StartGateway(t, "--worker-urls", m.URLs[0], "--max-buffered-request-bytes", "65536", "--max-payload-size", "1048576")
	queries := func() float64 {
		v, ok := Metric(t, m.URLs[0]+"/metrics", `vllm:prefix_cache_queries_total{model_name="mock-model"}`)
		if !ok {
			t.Fatal("the mock engine exports no vllm:prefix_cache_queries_total")
		}
		return v
	}
	small := `{"model":"mock-model","messages":[{"role":"user","content":"hi there"}],"max_tokens":2}`
	if r := MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", small, nil); r.Status != 200 {
		t.Fatalf("a small request: %d %s", r.Status, r.Body)
	}
	before := queries()
	if before == 0 {
		t.Fatal("the engine counted no prompt tokens for a served request: the test could not see one run")
	}
	huge := `{"model":"mock-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}],"max_tokens":2}`
	if r := doChunked(t, g.URL+"/v1/chat/completions", huge); r.Status != 413 {
		t.Fatalf("a chunked body past --max-payload-size: %d %.300s, want 413", r.Status, r.Body)
	}
	if r := MustDo(t, http.MethodPost, g.URL+"/v1/chat/completions", small, nil); r.Status != 200 {
		t.Fatalf("the request after: %d %s", r.Status, r.Body)
	}
	if got := queries() - before; got != before {
		t.Fatalf("the engine counted %v prompt tokens after the refused body and one small request, want %v (the small one's): it ran part of the refused body", got, before)
	}
	if v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, m.URLs[0])); !ok || v != 0 {
		t.Fatalf("%v requests in flight", v)
	}
}

// TestEPDLargeBodiesAreReadWhole: the same rule in EPD mode: a multimodal body 3
// times past --max-buffered-request-bytes, with a Content-Length or chunked, goes through all
// three real mock engines whole (the language-only prefill claims the encode worker's
// embedding, the decode the prefill's KV: each mock checks that its prompt is the one before
// it), and the answer counts every prompt token.
func TestEPDLargeBodiesAreReadWhole(t *testing.T) {
	e := startPDMock(t, "127.0.0.44", "encode", "sglang", 1, FreePort(t, "127.0.0.44"))
	p := startPDMock(t, "127.0.0.45", "prefill", "sglang", 1, FreePort(t, "127.0.0.45"), "--require-encode")
	d := startPDMock(t, "127.0.0.46", "decode", "sglang", 1, 8998)
	g := StartGateway(t, "--epd-disaggregation", "--encode", e.URLs[0], strconv.Itoa(e.bootstrapPort),
		"--prefill", p.URLs[0], strconv.Itoa(p.bootstrapPort), "--decode", d.URLs[0],
		"--max-buffered-request-bytes", "65536", "--max-payload-size", "1048576")
	text := strings.Repeat("what is in it? ", 13_000) // 195 KB
	body := `{"model":"mock-model","messages":[{"role":"user","content":[{"type":"text","text":"` + text +
		`"},{"type":"image_url","image_url":{"url":"http://images.test/a.png"}}]}],"max_tokens":4}`
	for _, chunked := range []bool{false, true} {
		r := postChat(t, g.URL, body, chunked)
		var answer struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &answer) != nil || r.Header.Get("X-Smg-Encode-Worker-Id") != e.URLs[0] {
			t.Fatalf("chunked %v: %d, encode worker %q: %.300s", chunked, r.Status, r.Header.Get("X-Smg-Encode-Worker-Id"), r.Body)
		}
		if answer.Usage.PromptTokens < len(text)/4 {
			t.Fatalf("chunked %v: the engine counted %d prompt tokens for a %d-byte prompt: it did not get the whole body", chunked, answer.Usage.PromptTokens, len(text))
		}
	}
	if ok := pdCount(t, e, "encode", "ok"); ok != 2 {
		t.Errorf("the encode mock encoded %d requests, want 2", ok)
	}
	checkHandovers(t, 2, []*pdMock{p}, []*pdMock{d})
	checkNoneInFlight(t, g, e.URLs[0], p.URLs[0], d.URLs[0])
}
