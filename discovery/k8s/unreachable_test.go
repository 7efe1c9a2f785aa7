package k8s_test

import (
	"net"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/smg-go/smg/internal/testutil"
)

// TestUnreachableAPIServerIsReportedAndStopsAtOnce: with the API server's port refusing
// connections, every failing list and watch logs the spec's "K8s worker watcher error
// (auto-retrying with backoff)". client-go retries a refused watch-list itself, silently and
// after a backoff (up to 30 s) that stopping does not cut short; so a refused watch-list is
// handed back as a plain failure: the reflector falls back to a list, whose failure goes to
// the error handler and to the informer's backoff, which ends at once on Stop. Each refused
// watch-list is therefore followed by a list before the next one, which the log shows.
func TestUnreachableAPIServerIsReportedAndStopsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := "https://" + ln.Addr().String()
	ln.Close() // the address now refuses connections
	rc := &rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	g := startGateway(t, testConfig("default", "app=sglang"), rc)

	const line = "K8s worker watcher error (auto-retrying with backoff)"
	watchLists := func() int { return strings.Count(g.logs.String(), "sendInitialEvents=true") }
	testutil.Eventually(t, "three refused watch-lists reported", func() bool { return watchLists() >= 3 })
	g.stop()
	var order []string // "W" a failed watch-list, "L" a failed list, in log order
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if !strings.Contains(l, line) {
			continue
		}
		switch {
		case strings.Contains(l, "sendInitialEvents=true"):
			order = append(order, "W")
		case strings.Contains(l, "limit=500"):
			order = append(order, "L")
		default:
			order = append(order, "?")
		}
	}
	seq := strings.Join(order, "")
	if strings.Contains(seq, "WW") || strings.Count(seq, "W") < 3 || strings.Count(seq, "L") < 2 {
		t.Fatalf("failed calls in log order %s: each refused watch-list must be reported and followed by a list", seq)
	}
	if !strings.Contains(g.logs.String(), "Service discovery stopped") {
		t.Fatal("Stop did not finish")
	}
}
