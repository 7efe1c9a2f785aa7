package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The routes suite: what the engine pass-through routes and EPD cost through the
// gateway. loadgen speaks the generation APIs only, so the load is wrk's (a Lua script per
// route sets the POST body), a closed loop on LoadCore beside the mocks; the gateway runs
// alone on ProxyCore as in the overhead suite, and its CPU comes from the same schedstat
// reading.
//
//   - Pass-through: one instant mock worker; per route, wrk straight to it ("direct"), then
//     through smg (key smg-evloop, the name it had beside the fasthttp plane's smg-fasthttp,
//     since removed). The chat row is the generation route on the same mock and
//     gateway: a pass-through route should cost what generation costs.
//   - EPD: an encode, a prefill (--require-encode: it claims each request's embeddings from
//     the encode worker the gateway named, or refuses it) and a decode mock, smg
//     --epd-disaggregation in front; a chat request with an image part (three upstream
//     requests: encode, prefill, decode) against a text-only one on the same gateway (PD:
//     prefill and decode). There is no direct row: no client drives the three legs itself.

// RoutesConfig configures the routes suite. Start from DefaultRoutesConfig, which sets every
// default.
type RoutesConfig struct {
	Bin Binaries
	// Wrk is the load generator. Default looked up on PATH; the suite fails without it.
	Wrk string
	// Duration of each measured run, after Warmup of the same load (not counted), both whole
	// seconds (wrk's unit). Defaults 2 s and 1 s (0: no warm-up).
	Duration, Warmup time.Duration
	// Rounds: every run is measured this many times, the runs alternating within a round;
	// the round with the least proxy CPU per request is kept (for direct runs, the most
	// requests/s). Default 2.
	Rounds int
	// Connections is wrk's closed-loop connection count. Default 32.
	Connections int
	// Routes are the pass-through routes measured (paths of PassThroughRoutes). Default all.
	Routes []string
	// ProxyCore runs smg; LoadCore runs wrk and the mocks. Defaults 0 and 1.
	ProxyCore, LoadCore int
	// EPDRounds is the rounds of the EPD rows. 0 (the default) is as many as Rounds; < 0
	// skips them.
	EPDRounds int
	// WorkDir receives the Lua scripts. Default a temporary directory, removed afterwards.
	WorkDir string
	// SkipDirect leaves out the rows straight to the mock (requests/s reference only: no gate
	// reads them), as the smoke does to stay short.
	SkipDirect bool
}

// RouteBody is one request of the routes suite.
type RouteBody struct{ Path, Body string }

// PassThroughRoutes are the requests of the pass-through rows (/rerank is /v1/rerank's
// alias and is not measured apart); "chat" is the generation reference.
var PassThroughRoutes = []RouteBody{
	{"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hello there"}],"max_tokens":8}`},
	{"/v1/embeddings", `{"model":"mock-model","input":["doc one","doc two"]}`},
	{"/v1/rerank", `{"model":"mock-model","query":"which doc?","documents":["a","b"]}`},
	{"/v1/classify", `{"model":"mock-model","input":"classify me"}`},
	{"/v1/tokenize", `{"model":"mock-model","prompt":"hello"}`},
	{"/v1/detokenize", `{"model":"mock-model","tokens":[1,2,3]}`},
	{"/v1/responses", `{"model":"mock-model","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
	{"/v1/messages", `{"model":"mock-model","system":"be brief","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`},
}

// The EPD rows' requests: a chat request with an image part, and a text-only one.
var (
	epdMedia = RouteBody{"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":[{"type":"text","text":"what is in the picture?"},{"type":"image_url","image_url":{"url":"http://images.test/1.png"}}]}],"max_tokens":8}`}
	epdText  = RouteBody{"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"no picture here"}],"max_tokens":8}`}
)

// DefaultRoutesConfig returns the suite's defaults (each field says its own), wrk looked up
// on PATH. Start from it: Validate refuses the zeros that make no sense. EPDRounds 0 (as many
// as Rounds) is derived when the suite runs.
func DefaultRoutesConfig() RoutesConfig {
	wrk, _ := exec.LookPath("wrk")
	c := RoutesConfig{Wrk: wrk, Duration: 2 * time.Second, Warmup: time.Second, Rounds: 2, Connections: 32, ProxyCore: 0, LoadCore: 1}
	for _, r := range PassThroughRoutes {
		c.Routes = append(c.Routes, r.Path)
	}
	return c
}

// Validate reports configuration errors, each saying how to fix it; a Config not built from
// DefaultRoutesConfig fails here on its zero fields.
func (c *RoutesConfig) Validate() error {
	var errs []error
	if c.Wrk == "" {
		errs = append(errs, errors.New("routes suite: wrk not found on PATH: install it (apt-get install wrk) or leave the suite out"))
	}
	if c.Duration < time.Second || c.Warmup < 0 || c.Duration%time.Second != 0 || c.Warmup%time.Second != 0 {
		errs = append(errs, fmt.Errorf("routes duration %v, warmup %v: use whole seconds (wrk's unit), a duration of at least 1s (CPU time ticks are 10 ms) and a warmup ≥ 0 (start from bench.DefaultRoutesConfig())", c.Duration, c.Warmup))
	}
	if c.Rounds < 1 || c.Connections < 1 {
		errs = append(errs, fmt.Errorf("routes rounds %d, connections %d: use at least 1 of each (start from bench.DefaultRoutesConfig())", c.Rounds, c.Connections))
	}
	if c.ProxyCore == c.LoadCore && c.ProxyCore >= 0 {
		errs = append(errs, fmt.Errorf("proxy core and load core are both %d: give the proxy a core of its own", c.ProxyCore))
	}
	if len(c.Routes) == 0 {
		errs = append(errs, errors.New("routes suite: no routes: name at least one path of bench.PassThroughRoutes (start from bench.DefaultRoutesConfig())"))
	}
	for _, r := range c.Routes {
		if routeBody(r) == nil {
			errs = append(errs, fmt.Errorf("routes suite: unknown route %q (known: the paths of bench.PassThroughRoutes)", r))
		}
	}
	return errors.Join(errs...)
}

func routeBody(path string) *RouteBody {
	for i := range PassThroughRoutes {
		if PassThroughRoutes[i].Path == path {
			return &PassThroughRoutes[i]
		}
	}
	return nil
}

// RouteRow is one wrk run of the routes suite.
type RouteRow struct {
	// Route is the request's path (EPD rows: "epd" with an image, "pd" text-only).
	Route string `json:"route"`
	// Key is direct or smg-evloop.
	Key      string  `json:"key"`
	RPS      float64 `json:"requests_per_s"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	Requests int64   `json:"requests"`
	// ProxyCPUS is smg's CPU seconds over the measured run (0 for direct), CPUPerRequestUS
	// the same per request.
	ProxyCPUS       float64 `json:"proxy_cpu_s"`
	CPUPerRequestUS float64 `json:"proxy_cpu_us_per_request"`
}

// RoutesResult is the suite's outcome.
type RoutesResult struct {
	Config      RoutesConfig `json:"config"`
	PassThrough []RouteRow   `json:"pass_through"`
	EPD         []RouteRow   `json:"epd,omitempty"`
}

// Routes runs the suite.
func Routes(cfg RoutesConfig) (*RoutesResult, error) {
	if cfg.EPDRounds == 0 {
		cfg.EPDRounds = cfg.Rounds
	}
	cleanup, err := prepareSuite(cfg.Validate, &cfg.WorkDir, "smg-bench-routes-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &RoutesResult{Config: cfg}
	var errs []error
	if err := cfg.passThrough(res); err != nil {
		errs = append(errs, fmt.Errorf("pass-through: %w", err))
	}
	if cfg.EPDRounds > 0 {
		if err := cfg.epd(res); err != nil {
			errs = append(errs, fmt.Errorf("EPD: %w", err))
		}
	}
	return res, errors.Join(errs...)
}

// keep records row in best unless a less disturbed round of the same run is there.
func keep(best map[string]RouteRow, order *[]string, row RouteRow) {
	id := row.Route + " " + row.Key
	b, ok := best[id]
	if !ok {
		*order = append(*order, id)
	}
	if !ok || row.Key == "direct" && row.RPS > b.RPS || row.Key != "direct" && row.CPUPerRequestUS < b.CPUPerRequestUS {
		best[id] = row
	}
}

func rowsOf(best map[string]RouteRow, order []string) []RouteRow {
	rows := make([]RouteRow, 0, len(order))
	for _, id := range order {
		rows = append(rows, best[id])
	}
	return rows
}

func (cfg *RoutesConfig) passThrough(res *RoutesResult) error {
	mock, urls, err := startListening(pinned(cfg.LoadCore), cfg.Bin.MockWorker, listenLine, 1, 10*time.Second,
		"--host", "127.0.0.1", "--port", "0", "--count", "1", "--model", "mock-model", "--event-loops", "1")
	if err != nil {
		return err
	}
	defer mock.stop()
	directRoutes := cfg.Routes
	if cfg.SkipDirect {
		directRoutes = nil
	}
	var errs []error
	best, order := map[string]RouteRow{}, []string(nil)
	for round := range cfg.Rounds {
		for _, path := range directRoutes {
			row, err := cfg.wrk(RouteRow{Route: path, Key: "direct"}, urls[0], *routeBody(path), nil)
			if err != nil {
				errs = append(errs, fmt.Errorf("round %d: %w", round+1, err))
				continue
			}
			keep(best, &order, row)
		}
		runs := make([]namedBody, len(cfg.Routes))
		for i, path := range cfg.Routes {
			runs[i] = namedBody{path, *routeBody(path)}
		}
		errs = append(errs, cfg.smgRows(round, "cache_aware", workerURLArgs(urls), runs, best, &order)...)
	}
	res.PassThrough = rowsOf(best, order)
	return errors.Join(errs...)
}

func (cfg *RoutesConfig) epd(res *RoutesResult) error {
	encode, encodeURL, encodePort, err := startPDMock(cfg.LoadCore, cfg.Bin.MockWorker, "encode", "0")
	if err != nil {
		return err
	}
	defer encode.stop()
	prefill, prefillURL, prefillPort, err := startPDMock(cfg.LoadCore, cfg.Bin.MockWorker, "prefill", "0", "--require-encode")
	if err != nil {
		return err
	}
	defer prefill.stop()
	decode, decodeURL, _, err := startPDMock(cfg.LoadCore, cfg.Bin.MockWorker, "decode", prefillPort)
	if err != nil {
		return err
	}
	defer decode.stop()
	workers := []string{"--epd-disaggregation", "--encode", encodeURL, encodePort, "--prefill", prefillURL, prefillPort, "--decode", decodeURL}

	var errs []error
	best, order := map[string]RouteRow{}, []string(nil)
	for round := range cfg.EPDRounds {
		errs = append(errs, cfg.smgRows(round, "round_robin", workers, []namedBody{{"epd", epdMedia}, {"pd", epdText}}, best, &order)...)
	}
	res.EPD = rowsOf(best, order)
	return errors.Join(errs...)
}

// namedBody is one wrk run of a suite: the row's route name and the request it repeats.
type namedBody struct {
	name string
	body RouteBody
}

// smgRows starts smg with policy and the worker arguments, waits until it is ready, measures
// each run through it into best (in order) and stops it. It returns the round's errors.
func (cfg *RoutesConfig) smgRows(round int, policy string, workers []string, runs []namedBody, best map[string]RouteRow, order *[]string) []error {
	pr, base, err := launchSMG(cfg.ProxyCore, cfg.Bin.SMG, policy, workers, "--disable-load-monitoring")
	if err != nil {
		return []error{fmt.Errorf("round %d: %w", round+1, err)}
	}
	defer pr.stop()
	if err := waitReadiness(base, 10*time.Second); err != nil {
		return []error{fmt.Errorf("round %d: %w", round+1, err)}
	}
	var errs []error
	for _, r := range runs {
		row, err := cfg.wrk(RouteRow{Route: r.name, Key: "smg-evloop"}, base, r.body, pr)
		if err != nil {
			errs = append(errs, fmt.Errorf("round %d: %w", round+1, err))
			continue
		}
		keep(best, order, row)
	}
	return errs
}

// wrk runs wrk's closed loop of req against base on LoadCore: Warmup first (not counted),
// then Duration measured, charging proxy's CPU over the measured run to its requests. Any
// answer that is not 2xx, or a socket error, fails the run.
func (cfg *RoutesConfig) wrk(row RouteRow, base string, req RouteBody, proxy *proc) (RouteRow, error) {
	script := filepath.Join(cfg.WorkDir, "post.lua")
	lua := "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = " + strconv.Quote(req.Body) + "\n"
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return row, err
	}
	run := func(d time.Duration) (string, error) {
		p, err := start(cfg.LoadCore, cfg.Wrk, "-t1", "-c"+strconv.Itoa(cfg.Connections), "-d"+strconv.Itoa(int(d/time.Second))+"s",
			"--latency", "--timeout", "5s", "-s", script, base+req.Path)
		if err != nil {
			return "", err
		}
		if err := p.wait(); err != nil {
			return "", err
		}
		return p.out.String(), nil
	}
	if cfg.Warmup > 0 {
		if _, err := run(cfg.Warmup); err != nil {
			return row, fmt.Errorf("%s %s warm-up: %w", row.Key, row.Route, err)
		}
	}
	var cpu0 float64
	if proxy != nil {
		var err error
		if cpu0, err = proxy.cpuTime(); err != nil {
			return row, err
		}
	}
	out, err := run(cfg.Duration)
	if err != nil {
		return row, fmt.Errorf("%s %s: %w", row.Key, row.Route, err)
	}
	w, err := parseWrk(out)
	if err != nil {
		return row, fmt.Errorf("%s %s: %w", row.Key, row.Route, err)
	}
	row.RPS, row.P50MS, row.P99MS, row.Requests = w.rps, w.p50ms, w.p99ms, w.requests
	if proxy != nil {
		cpu1, err := proxy.cpuTime()
		if err != nil {
			return row, err
		}
		row.ProxyCPUS = cpu1 - cpu0
		if row.Requests > 0 {
			row.CPUPerRequestUS = row.ProxyCPUS / float64(row.Requests) * 1e6
		}
	}
	if w.bad > 0 {
		return row, fmt.Errorf("%s %s: %d of %d answers were not 2xx or failed on the socket:\n%s", row.Key, row.Route, w.bad, w.requests, tail(out))
	}
	return row, nil
}

// wrkResult is what parseWrk reads from wrk --latency's report.
type wrkResult struct {
	rps          float64
	p50ms, p99ms float64
	requests     int64
	bad          int64 // non-2xx/3xx answers and socket errors
}

var (
	wrkRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s*([0-9.]+)`)
	wrkPct      = regexp.MustCompile(`(?m)^\s*(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses:\s*(\d+)`)
	wrkSocket   = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// parseWrk reads wrk's report (run with --latency).
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkRequests.FindStringSubmatch(out)
	rps := wrkRPS.FindStringSubmatch(out)
	if m == nil || rps == nil {
		return r, fmt.Errorf("wrk's report has no request count or rate:\n%s", tail(out))
	}
	r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.rps, _ = strconv.ParseFloat(rps[1], 64)
	for _, p := range wrkPct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		switch p[3] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		if p[1] == "50" {
			r.p50ms = v
		} else {
			r.p99ms = v
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.bad += n
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.bad += n
		}
	}
	return r, nil
}

// findRoute returns the row of route and key, or nil.
func findRoute(rows []RouteRow, route, key string) *RouteRow {
	for i := range rows {
		if rows[i].Route == route && rows[i].Key == key {
			return &rows[i]
		}
	}
	return nil
}

// metrics adds the suite's metrics:
//
//	routes.<route>.cpu_us_per_request.smg-evloop
//	routes.<route>.rps_ratio.smg-evloop/direct            requests/s through smg over direct
//	routes.<route>.cpu_ratio.smg-evloop/chat               CPU per request over the chat row's
//	routes.pass_through.max_cpu_ratio.smg-evloop/chat      the largest of those over the routes
//	routes.epd.cpu_us_per_request.smg-evloop, routes.pd.…
//	routes.epd.cpu_ratio.smg-evloop/pd                     EPD over PD on the same gateway
//	routes.epd.rps_ratio.smg-evloop/pd
//
// <route> is the path without its leading "/v1/" ("chat/completions" for chat).
func (r *RoutesResult) metrics(m map[string]float64) {
	chat := PassThroughRoutes[0].Path
	for _, x := range r.PassThrough {
		if x.Key == "direct" {
			continue
		}
		name := "routes." + strings.TrimPrefix(x.Route, "/v1/")
		m[name+".cpu_us_per_request."+x.Key] = x.CPUPerRequestUS
		if d := findRoute(r.PassThrough, x.Route, "direct"); d != nil && d.RPS > 0 {
			m[name+".rps_ratio."+x.Key+"/direct"] = x.RPS / d.RPS
		}
		if c := findRoute(r.PassThrough, chat, x.Key); c != nil && x.Route != chat && c.CPUPerRequestUS > 0 {
			ratio := x.CPUPerRequestUS / c.CPUPerRequestUS
			m[name+".cpu_ratio."+x.Key+"/chat"] = ratio
			most := "routes.pass_through.max_cpu_ratio." + x.Key + "/chat"
			m[most] = max(m[most], ratio)
		}
	}
	for _, x := range r.EPD {
		m["routes."+x.Route+".cpu_us_per_request."+x.Key] = x.CPUPerRequestUS
		if x.Route != "epd" {
			continue
		}
		if pd := findRoute(r.EPD, "pd", x.Key); pd != nil && pd.CPUPerRequestUS > 0 && pd.RPS > 0 {
			m["routes.epd.cpu_ratio."+x.Key+"/pd"] = x.CPUPerRequestUS / pd.CPUPerRequestUS
			m["routes.epd.rps_ratio."+x.Key+"/pd"] = x.RPS / pd.RPS
		}
	}
}

// Table renders the suite as Markdown.
func (r *RoutesResult) Table() string {
	var sb strings.Builder
	c := r.Config
	fmt.Fprintf(&sb, "## 4. Engine pass-through routes and EPD (wrk)\n\n"+
		"wrk (one thread, %d connections, closed loop) and the mocks on core %d, smg alone on core %d; %v per run after a %v warm-up, "+
		"%d round(s), the least smg CPU per request kept (direct: the most requests/s). smg CPU from schedstat over the measured run.\n\n",
		c.Connections, c.LoadCore, c.ProxyCore, c.Duration, c.Warmup, c.Rounds)
	sb.WriteString("### Pass-through routes (one instant mock worker; chat is the generation route for reference)\n\n")
	sb.WriteString("| route | run | req/s | vs direct | p50 ms | p99 ms | smg CPU µs/req | vs chat |\n|---|---|---|---|---|---|---|---|\n")
	chat := PassThroughRoutes[0].Path
	for _, x := range r.PassThrough {
		vsDirect, vsChat, cpu := "", "", ""
		if x.Key != "direct" {
			cpu = fmt.Sprintf("%.1f", x.CPUPerRequestUS)
			if d := findRoute(r.PassThrough, x.Route, "direct"); d != nil && d.RPS > 0 {
				vsDirect = fmt.Sprintf("%.2f", x.RPS/d.RPS)
			}
			if ch := findRoute(r.PassThrough, chat, x.Key); ch != nil && x.Route != chat && ch.CPUPerRequestUS > 0 {
				vsChat = fmt.Sprintf("%.2f", x.CPUPerRequestUS/ch.CPUPerRequestUS)
			}
		}
		fmt.Fprintf(&sb, "| %s | %s | %.0f | %s | %.2f | %.2f | %s | %s |\n", x.Route, x.Key, x.RPS, vsDirect, x.P50MS, x.P99MS, cpu, vsChat)
	}
	if len(r.EPD) > 0 {
		fmt.Fprintf(&sb, "\n### EPD (1 encode + 1 prefill + 1 decode mock; smg --epd-disaggregation; %d round(s))\n\n"+
			"epd: a chat request with an image part (encode, prefill and decode legs); pd: a text-only chat request on the same gateway (prefill and decode). "+
			"No direct row: no client drives the three legs itself.\n\n", c.EPDRounds)
		sb.WriteString("| request | run | req/s | p50 ms | p99 ms | smg CPU µs/req | EPD/PD CPU |\n|---|---|---|---|---|---|---|\n")
		for _, x := range r.EPD {
			ratio := ""
			if pd := findRoute(r.EPD, "pd", x.Key); x.Route == "epd" && pd != nil && pd.CPUPerRequestUS > 0 {
				ratio = fmt.Sprintf("%.2f", x.CPUPerRequestUS/pd.CPUPerRequestUS)
			}
			fmt.Fprintf(&sb, "| %s | %s | %.0f | %.2f | %.2f | %.1f | %s |\n", x.Route, x.Key, x.RPS, x.P50MS, x.P99MS, x.CPUPerRequestUS, ratio)
		}
	}
	sb.WriteString("\n")
	return sb.String()
}
