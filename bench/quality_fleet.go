package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/loadgen"
)

// The pieces of a quality row beyond one gateway over a steady fleet (QualityCase.Gateways,
// RestartAt, EventsPolicy): meshed gateways, one loadgen each merged into one result, a
// worker restarted mid-run, and the hit the engines' events foretold.

// gateway is one running smg of a row.
type gateway struct {
	p             *proc
	base, metrics string
}

// launchGateways starts n gateways over the same workers, meshed when n > 1 (the first is
// every other's seed peer). On error it returns the ones started, for the caller to stop.
func launchGateways(bin string, n int, policy string, workerArgs, extra []string) ([]gateway, error) {
	var gws []gateway
	var seed string
	for i := range n {
		args := slices.Clone(extra)
		if n > 1 {
			port, err := freePort()
			if err != nil {
				return gws, err
			}
			args = append(args, "--enable-mesh", "--mesh-server-name", "gw"+strconv.Itoa(i), "--mesh-host", "127.0.0.1",
				"--mesh-advertise-host", "127.0.0.1", "--mesh-port", strconv.Itoa(port))
			if i == 0 {
				seed = "127.0.0.1:" + strconv.Itoa(port)
			} else {
				args = append(args, "--mesh-peer-urls", seed)
			}
		}
		p, base, metrics, err := launchSMGMetrics(placement{}, bin, policy, workerArgs, args...)
		if err != nil {
			return gws, err
		}
		gws = append(gws, gateway{p: p, base: base, metrics: metrics})
	}
	return gws, nil
}

// workloadSize is the number of prompts in a prebuilt workload's order from its loadgen
// flags (shared-prefix: groups × prompts per group), 0 when the flags do not say.
func workloadSize(args []string) int {
	get := func(name string) int {
		i := slices.Index(args, name)
		if i < 0 || i+1 >= len(args) {
			return 0
		}
		n, _ := strconv.Atoi(args[i+1])
		return n
	}
	return get("--gsp-num-groups") * get("--gsp-prompts-per-group")
}

// workerRestart restarts a mock engine as its gateways see it, once, from a timer.
type workerRestart struct {
	url    string
	events bool
	done   chan error
}

// restartWorker prepares the restart of the mock engine at url (grpc:// or http://; its
// admin routes answer HTTP on the same port): it loses its prefix cache and, when it
// publishes events, its event sequence restarts.
func restartWorker(url string, events bool) *workerRestart {
	return &workerRestart{url: url, events: events, done: make(chan error, 1)}
}

func (w *workerRestart) run() {
	body := `{"lose_prefix_cache":true}`
	if w.events {
		body = `{"lose_prefix_cache":true,"kv_events_restart":true}`
	}
	base := "http://" + strings.TrimPrefix(strings.TrimPrefix(w.url, "grpc://"), "http://")
	resp, err := http.Post(base+"/admin/config", "application/json", strings.NewReader(body))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("POST /admin/config %s: %d %s", body, resp.StatusCode, b)
		}
	}
	w.done <- err
}

// wait returns the restart's outcome, or an error when it never ran (the row ended first).
func (w *workerRestart) wait() error {
	select {
	case err := <-w.done:
		return err
	default:
		return errors.New("the row ended before the restart was due")
	}
}

// mergeResults combines the results of loadgens that ran side by side into one: counts,
// rates and timelines add up; the hit rate and TTFT/TPOT medians are weighted by the
// requests each completed; p99s are the largest (the union's lies between the halves').
func mergeResults(rs []*loadgen.Result) *loadgen.Result {
	if len(rs) == 1 {
		return rs[0]
	}
	m := &loadgen.Result{Workers: map[string]int64{}, StatusCounts: map[string]int64{}, ErrorExamples: map[string]string{}}
	var hitW, ttftW, tpotW, inputs float64
	for _, r := range rs {
		m.Completed += r.Completed
		m.Failed += r.Failed
		m.TotalInputTokens += r.TotalInputTokens
		m.TotalOutputTokens += r.TotalOutputTokens
		m.TotalCachedTokens += r.TotalCachedTokens
		m.UsageReported += r.UsageReported
		m.RequestThroughput += r.RequestThroughput
		m.OutputThroughput += r.OutputThroughput
		m.DurationS = max(m.DurationS, r.DurationS)
		for k, v := range r.Workers {
			m.Workers[k] += v
		}
		for k, v := range r.StatusCounts {
			m.StatusCounts[k] += v
		}
		for k, v := range r.ErrorExamples {
			m.ErrorExamples[k] = v
		}
		hitW += r.CacheHitRate * float64(r.TotalInputTokens)
		inputs += float64(r.TotalInputTokens)
		n := float64(r.Completed)
		ttftW += r.TTFT.Median * n
		tpotW += r.TPOT.Median * n
		m.TTFT.P99 = max(m.TTFT.P99, r.TTFT.P99)
		m.ArrivalLag.P99 = max(m.ArrivalLag.P99, r.ArrivalLag.P99)
		for i, p := range r.Timeline {
			if i == len(m.Timeline) {
				m.Timeline = append(m.Timeline, loadgen.TimelinePoint{StartS: p.StartS})
			}
			t := &m.Timeline[i]
			t.Completed += p.Completed
			t.Failed += p.Failed
			t.RequestThroughput += p.RequestThroughput
			t.OutputThroughput += p.OutputThroughput
		}
	}
	if inputs > 0 {
		m.CacheHitRate = hitW / inputs
	}
	if m.Completed > 0 {
		m.TTFT.Median = ttftW / float64(m.Completed)
		m.TPOT.Median = tpotW / float64(m.Completed)
	}
	return m
}

// readHits sets the row's predicted and engine-reported hit rates from the gateways'
// counters: cache_aware's foretold hits, in event mode and on the token tree, and the hits the
// engines report.
func (row *QualityRow) readHits(gws []gateway) error {
	var predicted, pickedPrompt, cached, prompt float64
	for _, gw := range gws {
		sums, err := scrapeSums(gw.metrics,
			"smg_cache_aware_event_mode_predicted_cached_tokens_total", "smg_cache_aware_event_mode_prompt_tokens_total",
			"smg_cache_aware_tree_predicted_cached_tokens_total", "smg_cache_aware_tree_prompt_tokens_total",
			"smg_grpc_cached_prompt_tokens_total", "smg_grpc_prompt_tokens_total")
		if err != nil {
			return err
		}
		predicted += sums[0] + sums[2]
		pickedPrompt += sums[1] + sums[3]
		cached, prompt = cached+sums[4], prompt+sums[5]
	}
	if pickedPrompt > 0 {
		row.PredictedHitRate = predicted / pickedPrompt
	}
	if prompt > 0 {
		row.EngineHitRate = cached / prompt
	}
	return nil
}

// scrapeSums reads a Prometheus text page and sums every series of each named metric.
func scrapeSums(url string, names ...string) ([]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape the gateway's metrics: %w", err)
	}
	defer resp.Body.Close()
	sums := make([]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, n := range names {
			rest, ok := strings.CutPrefix(line, n)
			if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
			if len(f) == 0 {
				continue
			}
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				sums[i] += v
			}
		}
	}
	return sums, sc.Err()
}
