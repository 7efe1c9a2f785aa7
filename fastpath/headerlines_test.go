package fastpath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/http1"
)

// headerLines is a head of n "X-Line-i: v" lines.
func headerLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "X-Line-%d: v\r\n", i)
	}
	return b.String()
}

// TestHeaderLineLimit: requests and workers' answers of 70 header lines (real clients behind
// several proxies send that many) pass both ways; past http1.MaxHeaders lines the 431 names
// the line limit, and past --max-header-size it names the flag, so an operator knows which
// limit was hit.
func TestHeaderLineLimit(t *testing.T) {
	fw := &fakeWorker{name: "many", ln: newTestListener(t), served: make(chan struct{}, 16)}
	fw.srv = &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		for i := range 70 {
			ctx.Response.Header.Set(fmt.Sprintf("X-Worker-Line-%d", i), "w")
		}
		ctx.Response.Header.Set("X-Seen-Lines", fmt.Sprint(ctx.Request.Header.Len()))
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(okBody)
	}}
	go func() { _ = fw.srv.Serve(fw.ln) }()
	t.Cleanup(func() { _ = fw.srv.Shutdown(); _ = fw.ln.Close() })
	g := newGateway(t, "round_robin", Config{}, fw)

	status, body := rawRequest(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"+headerLines(70)+
		"Content-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(chatBody))+"\r\n\r\n"+chatBody)
	if !strings.Contains(status, " 200") {
		t.Fatalf("70 request header lines: %s %s", status, body)
	}
	r := g.do("POST", "/v1/chat/completions", chatBody)
	if r.StatusCode() != 200 || string(r.Header.Peek("X-Worker-Line-69")) != "w" {
		t.Fatalf("a worker answer of 70+ header lines: %d %s", r.StatusCode(), r.Body())
	}

	status, body = rawRequest(t, g, "GET /health HTTP/1.1\r\nHost: gw\r\n"+headerLines(http1.MaxHeaders)+"\r\n")
	if !strings.Contains(status, " 431") || !strings.Contains(body, fmt.Sprintf("more than %d header lines", http1.MaxHeaders)) || strings.Contains(body, "exceeds --max-header-size") {
		t.Fatalf("%d lines and Host: %s %s, want a 431 naming the line limit", http1.MaxHeaders, status, body)
	}
	status, body = rawRequest(t, g, "GET /health HTTP/1.1\r\nHost: gw\r\nCookie: "+strings.Repeat("c", 70_000)+"\r\n\r\n")
	if !strings.Contains(status, " 431") || !strings.Contains(body, "exceeds --max-header-size") {
		t.Fatalf("a 70 KB cookie: %s %s, want a 431 naming --max-header-size", status, body)
	}
}
