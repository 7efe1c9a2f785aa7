package evloop

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/http1"
)

// TestForwardHeadTraceContext: the client's traceparent and tracestate pass through as sent
// unless the target replaces traceparent (then tracestate goes along) or also drops
// tracestate (a new trace).
func TestForwardHeadTraceContext(t *testing.T) {
	const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const gateway = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTraceParent: " + client +
		"\r\ntracestate: congo=t61rcWkgMzE\r\nContent-Length: 2\r\n\r\n{}"
	var r Request
	var scratch []byte
	if _, err := http1.ParseRequest([]byte(raw), &r, &scratch, 4096, 4096); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		target Target
		want   []string
		absent []string
	}{
		{"untouched", Target{Addr: "w:1"}, []string{"TraceParent: " + client, "tracestate: congo=t61rcWkgMzE"}, nil},
		{"replaced", Target{Addr: "w:1", TraceParent: []byte(gateway)}, []string{"traceparent: " + gateway, "tracestate: congo=t61rcWkgMzE"}, []string{client}},
		{"new trace", Target{Addr: "w:1", TraceParent: []byte(gateway), DropTraceState: true}, []string{"traceparent: " + gateway}, []string{client, "tracestate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := string(appendForwardHead(nil, &r, &tc.target, 2))
			for _, w := range tc.want {
				if strings.Count(head, w) != 1 {
					t.Errorf("head lacks %q once:\n%s", w, head)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(head, a) {
					t.Errorf("head has %q:\n%s", a, head)
				}
			}
			if strings.Count(strings.ToLower(head), "traceparent:") != 1 {
				t.Errorf("not exactly one traceparent:\n%s", head)
			}
		})
	}
}
