package e2e

import (
	"strings"
	"testing"
)

// TestDuplicateModelKeyRoutesByTheLastWhateverTheBodySize: two mock engines serve models
// "first" and "last"; a request naming "model" twice ("first", then "last") goes to the
// engine of "last", the one every engine reads (last wins), whether its body is buffered
// (under --max-buffered-request-bytes) or streamed past it, where only its head is read.
func TestDuplicateModelKeyRoutesByTheLastWhateverTheBodySize(t *testing.T) {
	first := StartMocks(t, 1, "--model", "first")
	last := StartMocks(t, 1, "--model", "last")
	g := StartGateway(t, "--policy", "round_robin", "--worker-urls", first.URLs[0], last.URLs[0],
		"--max-buffered-request-bytes", "4096")
	for _, size := range []int{100, 64 << 10} {
		body := `{"model":"first","max_tokens":1,"model":"last","stream":false,"messages":[{"role":"user","content":"` +
			strings.Repeat("x", size) + `"}]}`
		for range 4 { // round robin would alternate if the model did not choose
			r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, nil)
			if r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") != last.URLs[0] || !strings.Contains(r.Body, `"model":"last"`) {
				t.Fatalf("%d-byte body naming first then last: %d routed to %q: %.300s", len(body), r.Status, r.Header.Get("X-Smg-Routed-Worker-Id"), r.Body)
			}
		}
	}
	// The last "model" in the head is mistyped: 400 as for a buffered body, not routed.
	body := `{"model":"last","model":7,"messages":[{"role":"user","content":"` + strings.Repeat("x", 64<<10) + `"}]}`
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, nil); r.Status != 400 {
		t.Fatalf("streamed body whose last model is 7: %d %.300s", r.Status, r.Body)
	}
}
