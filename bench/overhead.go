package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/loadgen"
)

// OverheadConfig configures the overhead suite. Zero values take the defaults.
type OverheadConfig struct {
	Bin Binaries
	// Duration of each measured run. Default 10 s.
	Duration time.Duration
	// Connections is the closed-loop client count. Default 32.
	Connections int
	// Workers is the mock fleet size. Default 4.
	Workers int
	// Policy is the gateway's --policy. Default round_robin.
	Policy string
	// ProxyCore runs the proxy under test; LoadCore runs the load generator and the mock
	// workers. Defaults 0 and 1 (DESIGN.md §9's setup).
	ProxyCore, LoadCore int
	// Warmup requests before each measured run. Default 2,000.
	Warmup int
	// WorkDir receives the loadgen JSON results. Default a temporary directory.
	WorkDir string
}

func (c *OverheadConfig) fillDefaults() {
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Connections == 0 {
		c.Connections = 32
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Policy == "" {
		c.Policy = "round_robin"
	}
	if c.ProxyCore == 0 && c.LoadCore == 0 {
		c.LoadCore = 1
	}
	if c.Warmup == 0 {
		c.Warmup = 2000
	}
}

// Measurement is one closed-loop run.
type Measurement struct {
	Name      string  `json:"name"`
	RPS       float64 `json:"requests_per_s"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	Completed int64   `json:"completed"`
	Failed    int64   `json:"failed"`
	// ProxyCPUPer10k is CPU seconds the proxy process spent per 10,000 requests (0 for the
	// direct run, which has no proxy).
	ProxyCPUPer10k float64 `json:"proxy_cpu_s_per_10k"`
}

// OverheadResult is the suite's outcome.
type OverheadResult struct {
	Config  OverheadConfig `json:"config"`
	Direct  Measurement    `json:"direct"`
	Gateway Measurement    `json:"gateway"`
	Bare    Measurement    `json:"bare_fasthttp_proxy"`
}

// RPSRatio is gateway requests/s over direct requests/s.
func (r *OverheadResult) RPSRatio() float64 { return r.Gateway.RPS / r.Direct.RPS }

// CPURatio is the gateway's CPU per request over the bare proxy's.
func (r *OverheadResult) CPURatio() float64 { return r.Gateway.ProxyCPUPer10k / r.Bare.ProxyCPUPer10k }

var mockLine = regexp.MustCompile(`listening on (http://\S+)`)

// Overhead runs the suite: mocks on LoadCore; loadgen straight to a mock, through smg, and
// through the bare proxy, each proxy alone on ProxyCore.
func Overhead(cfg OverheadConfig) (*OverheadResult, error) {
	cfg.fillDefaults()
	if cfg.WorkDir == "" {
		d, err := os.MkdirTemp("", "smg-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.WorkDir = d
	}
	res := &OverheadResult{Config: cfg}
	mocks, err := start(cfg.LoadCore, cfg.Bin.MockWorker, "--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(cfg.Workers), "--model", "mock-model")
	if err != nil {
		return nil, err
	}
	defer mocks.stop()
	urls, err := mocks.waitOutput(mockLine, cfg.Workers, 10*time.Second)
	if err != nil {
		return nil, err
	}

	// Straight to one mock worker: the mocks answer instantly, so one absorbs the whole load.
	if res.Direct, err = cfg.drive("direct", urls[0], nil); err != nil {
		return nil, err
	}

	port, err := freePort()
	if err != nil {
		return nil, err
	}
	prom, err := freePort()
	if err != nil {
		return nil, err
	}
	smg, err := start(cfg.ProxyCore, cfg.Bin.SMG, append([]string{"launch", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--prometheus-host", "127.0.0.1", "--prometheus-port", strconv.Itoa(prom), "--log-level", "warn",
		"--policy", cfg.Policy, "--worker-urls"}, urls...)...)
	if err != nil {
		return nil, err
	}
	gwURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHTTP(gwURL, 10*time.Second); err != nil {
		smg.stop()
		return nil, err
	}
	res.Gateway, err = cfg.drive("smg ("+cfg.Policy+")", gwURL, smg)
	smg.stop()
	if err != nil {
		return nil, err
	}

	bare, err := start(cfg.ProxyCore, cfg.Bin.BareProxy, "--listen", "127.0.0.1:0", "--workers", strings.Join(urls, ","))
	if err != nil {
		return nil, err
	}
	defer bare.stop()
	bareURL, err := bare.waitOutput(regexp.MustCompile(`listening on (http://\S+)`), 1, 10*time.Second)
	if err != nil {
		return nil, err
	}
	res.Bare, err = cfg.drive("bare fasthttp proxy", bareURL[0], bare)
	return res, err
}

// drive runs loadgen's closed loop against base and, when proxy is set, charges the proxy's
// CPU time over the whole run (warm-up included) to the requests of the run.
func (cfg *OverheadConfig) drive(name, base string, proxy *proc) (Measurement, error) {
	out := filepath.Join(cfg.WorkDir, strings.Fields(name)[0]+".json")
	var cpu0 float64
	if proxy != nil {
		var err error
		if cpu0, err = proxy.cpuSeconds(); err != nil {
			return Measurement{}, err
		}
	}
	lg, err := start(cfg.LoadCore, cfg.Bin.LoadGen, "run", "--base-url", base+"/v1", "--model", "mock-model",
		"--workload", "raw", "--stream=false", "--max-concurrency", strconv.Itoa(cfg.Connections),
		"--duration", cfg.Duration.String(), "--warmup", strconv.Itoa(cfg.Warmup), "--progress", "off", "--output", out)
	if err != nil {
		return Measurement{}, err
	}
	if err := lg.wait(); err != nil {
		return Measurement{}, err
	}
	m := Measurement{Name: name}
	b, err := os.ReadFile(out)
	if err != nil {
		return m, err
	}
	var r loadgen.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return m, fmt.Errorf("cannot read %s: %w", out, err)
	}
	m.RPS, m.P50MS, m.P99MS, m.Completed, m.Failed = r.RequestThroughput, r.E2E.Median, r.E2E.P99, r.Completed, r.Failed
	if proxy != nil {
		cpu1, err := proxy.cpuSeconds()
		if err != nil {
			return m, err
		}
		if n := r.Completed + r.Failed + int64(cfg.Warmup); n > 0 {
			m.ProxyCPUPer10k = (cpu1 - cpu0) / float64(n) * 10000
		}
	}
	if m.Failed > 0 {
		return m, fmt.Errorf("%s: %d requests failed (%v)", name, m.Failed, r.ErrorExamples)
	}
	return m, nil
}

// Table renders the result as a Markdown table.
func (r *OverheadResult) Table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| run | req/s | p50 ms | p99 ms | proxy CPU s / 10k req | proxy CPU µs / req |\n|---|---|---|---|---|---|\n")
	for _, m := range []Measurement{r.Direct, r.Gateway, r.Bare} {
		cpu := "–"
		us := "–"
		if m.ProxyCPUPer10k > 0 {
			cpu = fmt.Sprintf("%.3f", m.ProxyCPUPer10k)
			us = fmt.Sprintf("%.1f", m.ProxyCPUPer10k*100)
		}
		fmt.Fprintf(&sb, "| %s | %.0f | %.3f | %.3f | %s | %s |\n", m.Name, m.RPS, m.P50MS, m.P99MS, cpu, us)
	}
	fmt.Fprintf(&sb, "\nsmg / direct req/s: **%.2f**; smg / bare-proxy CPU per request: **%.2f**\n", r.RPSRatio(), r.CPURatio())
	return sb.String()
}
