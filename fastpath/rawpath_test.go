package fastpath

import (
	"strings"
	"testing"
)

// TestPathIsRoutedAsSent: a path that reaches another route only once decoded or resolved
// ("%2F" as a separator, then ".." applied) is not that route: the gateway routes on the
// path as sent, so a front proxy that allows only /v1/ cannot be bypassed into the worker API.
func TestPathIsRoutedAsSent(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	if status, body := rawRequest(t, g, "GET /workers HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"); !strings.Contains(status, " 200") {
		t.Fatalf("GET /workers: %s %s", status, body)
	}
	for _, path := range []string{
		"/v1/x%2f..%2f..%2fworkers",
		"/v1/x%2F..%2F..%2Fworkers",
		"/v1/x/../../workers",
		"/v1/%2e%2e/workers",
		"/v1/models/..%2f..%2fworkers",
		"//workers",
		"/workers/",
		"/v1/x%2f..%2f..%2fhealth",
	} {
		status, body := rawRequest(t, g, "GET "+path+" HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		if !strings.Contains(status, " 404") || strings.Contains(body, `"workers"`) || strings.Contains(body, "10.0.0.1") {
			t.Errorf("GET %s: %s %s, want 404 (routed as sent)", path, status, body)
		}
	}
	// The generation routes take only their exact path too.
	if status, body := rawRequest(t, g, "POST /v1/x%2f..%2fchat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: "+
		itoa(len(chatBody))+"\r\nConnection: close\r\n\r\n"+chatBody); !strings.Contains(status, " 404") {
		t.Fatalf("encoded generation path: %s %s", status, body)
	}
}
