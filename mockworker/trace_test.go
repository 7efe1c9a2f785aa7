package mockworker

import "testing"

// TestAdminTraceShowsTheLastTraceparent: GET /admin/trace answers the traceparent of the last
// generation request that carried one; requests without one leave it.
func TestAdminTraceShowsTheLastTraceparent(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, config(func(c *Config) { c.Server = kind }))
		u := f.URLs()[0]
		if _, body := do(t, "GET", u+"/admin/trace", ""); path(t, decode(t, body), "last_traceparent") != "" {
			t.Fatalf("before any request: %s", body)
		}
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		chat := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`
		if resp, body := do(t, "POST", u+"/v1/chat/completions", chat, "traceparent", tp); resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, body)
		}
		do(t, "POST", u+"/v1/chat/completions", chat) // no traceparent: the last one stays
		if _, body := do(t, "GET", u+"/admin/trace", ""); path(t, decode(t, body), "last_traceparent") != tp {
			t.Fatalf("after a traced request: %s", body)
		}
		if resp, _ := do(t, "POST", u+"/admin/trace", ""); resp.StatusCode != 405 {
			t.Fatalf("POST /admin/trace: %d, want 405", resp.StatusCode)
		}
	})
}
