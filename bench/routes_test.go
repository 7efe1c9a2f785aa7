package bench

import (
	"strings"
	"testing"
	"time"
)

const wrkReport = `Running 2s test @ http://127.0.0.1:18555/v1/embeddings
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   523.75us    1.86ms  20.21ms   93.70%
    Req/Sec    54.38k    13.54k   65.51k    80.00%
  Latency Distribution
     50%  824.00us
     75%    1.42ms
     90%    2.16ms
     99%    1.20s
  108818 requests in 2.01s, 30.52MB read
Requests/sec:  54139.04
Transfer/sec:     15.18MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkReport)
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 108818 || r.rps != 54139.04 || r.p50ms != 0.824 || r.p99ms != 1200 || r.bad != 0 {
		t.Fatalf("parsed %+v", r)
	}
	bad := strings.Replace(wrkReport, "Requests/sec", "  Socket errors: connect 0, read 2, write 0, timeout 3\n  Non-2xx or 3xx responses: 7\nRequests/sec", 1)
	if r, err := parseWrk(bad); err != nil || r.bad != 12 {
		t.Fatalf("failed answers counted %d (%v), want 12", r.bad, err)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Fatal("a report without a request count parsed")
	}
}

func TestRoutesConfigValidate(t *testing.T) {
	ok := DefaultRoutesConfig()
	ok.Wrk = "/usr/bin/wrk"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if len(ok.Routes) != len(PassThroughRoutes) || ok.Rounds != 2 || ok.Duration != 2*time.Second || ok.LoadCore != 1 {
		t.Errorf("defaults = %+v: want every route, 2 rounds of 2 s, the load on core 1", ok)
	}
	for name, tc := range map[string]struct {
		set    func(c *RoutesConfig) // on DefaultRoutesConfig
		errSub string
	}{
		"no wrk":           {func(c *RoutesConfig) { c.Wrk = "" }, "wrk not found"},
		"half a second":    {func(c *RoutesConfig) { c.Duration = 1500 * time.Millisecond }, "whole seconds"},
		"one core":         {func(c *RoutesConfig) { c.ProxyCore, c.LoadCore = 1, 1 }, "a core of its own"},
		"unknown route":    {func(c *RoutesConfig) { c.Routes = []string{"/v1/nope"} }, "unknown route"},
		"no routes":        {func(c *RoutesConfig) { c.Routes = nil }, "bench.DefaultRoutesConfig()"},
		"no rounds at all": {func(c *RoutesConfig) { c.Rounds = -1 }, "at least 1 of each"},
		"zero config":      {func(c *RoutesConfig) { *c = RoutesConfig{Wrk: "wrk", LoadCore: 1} }, "bench.DefaultRoutesConfig()"},
	} {
		c := ok
		tc.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.errSub) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.errSub)
		}
	}
}

// routesFixture is a routes suite result on both planes (fullReport's).
func routesFixture() *RoutesResult {
	return &RoutesResult{
		PassThrough: []RouteRow{
			{Route: "/v1/chat/completions", Key: "direct", RPS: 20000},
			{Route: "/v1/chat/completions", Key: "smg-evloop", RPS: 15000, CPUPerRequestUS: 20},
			{Route: "/v1/chat/completions", Key: "smg-fasthttp", RPS: 12000, CPUPerRequestUS: 25},
			{Route: "/v1/embeddings", Key: "direct", RPS: 20000},
			{Route: "/v1/embeddings", Key: "smg-evloop", RPS: 10000, CPUPerRequestUS: 30},
			{Route: "/v1/embeddings", Key: "smg-fasthttp", RPS: 10000, CPUPerRequestUS: 25},
			{Route: "/v1/rerank", Key: "smg-evloop", RPS: 10000, CPUPerRequestUS: 18},
		},
		EPD: []RouteRow{
			{Route: "epd", Key: "smg-evloop", RPS: 3000, CPUPerRequestUS: 60}, {Route: "pd", Key: "smg-evloop", RPS: 4000, CPUPerRequestUS: 40},
			{Route: "epd", Key: "smg-fasthttp", RPS: 3000, CPUPerRequestUS: 90}, {Route: "pd", Key: "smg-fasthttp", RPS: 4000, CPUPerRequestUS: 60},
		},
	}
}

func TestRoutesMetrics(t *testing.T) {
	r := routesFixture()
	m := map[string]float64{}
	r.metrics(m)
	for name, want := range map[string]float64{
		"routes.embeddings.cpu_ratio.smg-evloop/chat":         1.5,
		"routes.pass_through.max_cpu_ratio.smg-evloop/chat":   1.5,
		"routes.rerank.cpu_ratio.smg-evloop/chat":             0.9,
		"routes.embeddings.rps_ratio.smg-evloop/direct":       0.5,
		"routes.chat/completions.rps_ratio.smg-evloop/direct": 0.75,
		"routes.epd.cpu_ratio.smg-evloop/pd":                  1.5,
		"routes.epd.rps_ratio.smg-evloop/pd":                  0.75,
		"routes.pd.cpu_us_per_request.smg-evloop":             40,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if _, ok := m["routes.chat/completions.cpu_ratio.smg-evloop/chat"]; ok {
		t.Error("chat compared with itself")
	}
	if tab := r.Table(); !strings.Contains(tab, "| /v1/embeddings | smg-evloop | 10000 | 0.50 |") || !strings.Contains(tab, "| epd | smg-evloop | 3000 |") {
		t.Errorf("table:\n%s", tab)
	}
}
