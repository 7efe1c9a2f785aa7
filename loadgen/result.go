package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/smg-go/smg/internal/jsonx"
)

// SchemaVersion is Result.SchemaVersion; it changes only when a field changes meaning or
// is removed (fields may be added without a bump).
const SchemaVersion = 1

// Result is the outcome of a run. Field names are stable: the benchmark harness and
// `loadgen compare` read them. Latencies are milliseconds; throughputs are per second of
// Duration; token counts prefer the server's usage report (see the package doc).
type Result struct {
	SchemaVersion int       `json:"schema_version"`
	StartedAt     time.Time `json:"started_at"`
	Config        Config    `json:"config"`

	// DurationS runs from the first request to the last completion (warmup excluded).
	DurationS float64 `json:"duration_s"`
	Completed int64   `json:"completed"` // successful requests
	Failed    int64   `json:"failed"`
	// StatusCounts counts every request once: successes by HTTP status ("200"), failures by
	// HTTP status ("503") or by kind: "timeout", "connection_error", "stream_error" (an error
	// payload), "truncated_stream" (no [DONE]), "bad_response" (not JSON).
	StatusCounts map[string]int64 `json:"status_counts"`
	// ErrorExamples holds, per failing StatusCounts key, the first failure's error or the
	// start of its response body: what to read first when a run fails.
	ErrorExamples map[string]string `json:"error_examples,omitempty"`
	// Workers counts responses by the worker that served them (x-smg-routed-worker-id, else
	// x-mock-worker-id); empty when servers send neither header.
	Workers map[string]int64 `json:"workers"`

	TotalInputTokens  int64 `json:"total_input_tokens"`
	TotalOutputTokens int64 `json:"total_output_tokens"`
	TotalCachedTokens int64 `json:"total_cached_tokens"`
	UsageReported     int64 `json:"usage_reported"` // successful requests whose server reported token usage

	RequestThroughput    float64 `json:"request_throughput"`     // completed requests/s
	InputThroughput      float64 `json:"input_throughput"`       // prompt tokens/s
	OutputThroughput     float64 `json:"output_throughput"`      // generated tokens/s
	TotalTokenThroughput float64 `json:"total_token_throughput"` // (prompt + generated) tokens/s
	// CacheHitRate is cached_tokens / prompt_tokens over requests that reported usage: the
	// share of prompt tokens served from the engines' prefix caches.
	CacheHitRate float64 `json:"cache_hit_rate"`
	// Concurrency is the mean number of requests in flight: Σ e2e latency / duration.
	Concurrency float64 `json:"concurrency"`
	// ClientCPUS is the CPU time (user + system) the process used during the measured run,
	// and ClientCPUPerRequestUS that per request: the load generator's own cost, to judge
	// whether it co-limited the result. It covers the whole process, so it includes anything
	// else running in it (a server started in the same test, say). 0 where not measured.
	ClientCPUS            float64 `json:"client_cpu_s"`
	ClientCPUPerRequestUS float64 `json:"client_cpu_per_request_us"`

	TTFT Summary `json:"ttft_ms"`        // streams: first content event; non-streamed: = e2e
	TPOT Summary `json:"tpot_ms"`        // streams: (e2e - ttft) / (output tokens - 1), per request
	ITL  Summary `json:"itl_ms"`         // streams: gaps between content events
	E2E  Summary `json:"e2e_latency_ms"` // send to last byte
	// ArrivalLag (open loop only) is how late requests started against their scheduled
	// arrival: waiting for the MaxConcurrency cap or for a multi-turn conversation to be
	// ready, and the load generator's own delays. A large lag means the offered rate was not
	// the configured one.
	ArrivalLag Summary `json:"arrival_lag_ms"`

	// Histograms of ttft_ms, tpot_ms, itl_ms and e2e_latency_ms, for the HTML report.
	Histograms map[string]Histogram `json:"histograms"`
	Timeline   []TimelinePoint      `json:"timeline"`
}

// Histogram counts samples in bins. Linear (UpperMS 0): equal bins of BinWidthMS from the
// minimum to the 99th percentile, the rest in Overflow, so one outlier does not squash the
// picture. Logarithmic (UpperMS > 0) when the 99th percentile is at least wideRange times the
// median, as cold starts make it: bins of equal ratio from LowerMS to UpperMS (the maximum),
// so the mass around the median and the slow tail both show.
type Histogram struct {
	LowerMS    float64 `json:"lower_ms"`
	BinWidthMS float64 `json:"bin_width_ms"`
	UpperMS    float64 `json:"upper_ms,omitempty"`
	Counts     []int64 `json:"counts"`
	Overflow   int64   `json:"overflow"`
}

// Log reports whether the bins are logarithmic.
func (h Histogram) Log() bool { return h.UpperMS > 0 }

// Edge is the lower edge of bin i (i = len(Counts): the upper edge of the last bin).
func (h Histogram) Edge(i int) float64 {
	if h.Log() {
		return h.LowerMS * math.Pow(h.UpperMS/h.LowerMS, float64(i)/float64(len(h.Counts)))
	}
	return h.LowerMS + h.BinWidthMS*float64(i)
}

// TimelinePoint describes the completions in one Config.TimelineInterval.
type TimelinePoint struct {
	StartS            float64 `json:"start_s"`
	Completed         int64   `json:"completed"`
	Failed            int64   `json:"failed"`
	RequestThroughput float64 `json:"request_throughput"`
	OutputThroughput  float64 `json:"output_throughput"`
	MeanE2EMS         float64 `json:"mean_e2e_latency_ms"`
	MeanTTFTMS        float64 `json:"mean_ttft_ms"`
}

const histogramBins = 40

// buildResult turns the merged recorder into a Result.
func buildResult(cfg *Config, rec *recorder, startedAt time.Time, duration time.Duration) *Result {
	r := &Result{
		SchemaVersion:     SchemaVersion,
		StartedAt:         startedAt.UTC(),
		Config:            *cfg,
		DurationS:         duration.Seconds(),
		Completed:         rec.completed,
		Failed:            rec.failed,
		StatusCounts:      map[string]int64{},
		Workers:           map[string]int64{},
		ErrorExamples:     rec.examples,
		TotalInputTokens:  rec.inputTokens,
		TotalOutputTokens: rec.outputTokens,
		TotalCachedTokens: rec.cachedTokens,
		UsageReported:     rec.usageReported,
		Histograms:        map[string]Histogram{},
	}
	for code, n := range rec.okStatus {
		r.StatusCounts[strconv.Itoa(code)] += n
	}
	for code, n := range rec.badStatus {
		r.StatusCounts[strconv.Itoa(code)] += n
	}
	for kind, n := range rec.failures {
		if n > 0 {
			r.StatusCounts[failureNames[kind]] += n
		}
	}
	for id, n := range rec.workers {
		r.Workers[id] = *n
	}
	if secs := duration.Seconds(); secs > 0 {
		r.RequestThroughput = float64(rec.completed) / secs
		r.InputThroughput = float64(rec.inputTokens) / secs
		r.OutputThroughput = float64(rec.outputTokens) / secs
		r.TotalTokenThroughput = float64(rec.inputTokens+rec.outputTokens) / secs
		r.Concurrency = rec.sumE2E / 1000 / secs
	}
	if rec.usagePrompt > 0 {
		r.CacheHitRate = float64(rec.cachedTokens) / float64(rec.usagePrompt)
	}
	for _, m := range []struct {
		name string
		xs   []float64
		dst  *Summary
	}{
		{"ttft_ms", rec.ttft, &r.TTFT},
		{"tpot_ms", rec.tpot, &r.TPOT},
		{"itl_ms", rec.itl, &r.ITL},
		{"e2e_latency_ms", rec.e2e, &r.E2E},
	} {
		*m.dst = summarize(m.xs) // sorts xs
		if len(m.xs) > 0 {
			r.Histograms[m.name] = histogram(m.xs, m.dst.Median, m.dst.P99)
		}
	}
	r.Timeline = timeline(rec.timeline, cfg.TimelineInterval, duration)
	return r
}

// wideRange is the p99/median ratio from which a histogram's bins are logarithmic.
const wideRange = 10

// minLogLowerMS is the lowest edge of a logarithmic histogram: samples below it (sub-µs,
// below the clock's use) fall in its first bin.
const minLogLowerMS = 1e-3

// histogram bins ascending xs: linearly from xs[0] to the 99th percentile p99, or
// logarithmically from xs[0] to the maximum when p99 is at least wideRange times the median.
func histogram(xs []float64, median, p99 float64) Histogram {
	lo, hi := xs[0], xs[len(xs)-1]
	if median > 0 && p99 >= wideRange*median && hi > max(lo, minLogLowerMS) {
		h := Histogram{LowerMS: max(lo, minLogLowerMS), UpperMS: hi, Counts: make([]int64, histogramBins)}
		ratio := math.Log(h.UpperMS / h.LowerMS)
		for _, x := range xs {
			i := 0
			if x > h.LowerMS {
				i = min(int(histogramBins*math.Log(x/h.LowerMS)/ratio), histogramBins-1)
			}
			h.Counts[i]++
		}
		return h
	}
	h := Histogram{LowerMS: lo, Counts: make([]int64, histogramBins)}
	h.BinWidthMS = (p99 - h.LowerMS) / histogramBins
	for _, x := range xs {
		if x > p99 {
			h.Overflow++
			continue
		}
		i := 0
		if h.BinWidthMS > 0 {
			i = min(int((x-h.LowerMS)/h.BinWidthMS), histogramBins-1)
		}
		h.Counts[i]++
	}
	return h
}

// timeline converts accumulated buckets to points. The last bucket is usually partial, so
// rates divide by the part of it the run covered; a last bucket covering less than half an
// interval is folded into the one before, since a few completions over a sliver of time
// read as a rate far above the real one (47.8 req/s in a run of ~18).
func timeline(acc []timelineAcc, interval, duration time.Duration) []TimelinePoint {
	folded := false
	if n := len(acc); n > 1 && duration-time.Duration(n-1)*interval < interval/2 {
		prev := acc[n-2]
		prev.add(acc[n-1])
		acc, folded = append(acc[:n-2:n-2], prev), true
	}
	points := make([]TimelinePoint, len(acc))
	for i, a := range acc {
		start := time.Duration(i) * interval
		width := min(interval, duration-start)
		if folded && i == len(acc)-1 {
			width = duration - start // an interval and the sliver folded into it
		}
		if width <= 0 {
			width = interval
		}
		p := TimelinePoint{StartS: start.Seconds(), Completed: a.completed, Failed: a.failed}
		p.RequestThroughput = float64(a.completed) / width.Seconds()
		p.OutputThroughput = float64(a.outputTokens) / width.Seconds()
		if a.completed > 0 {
			p.MeanE2EMS = a.sumE2E / float64(a.completed)
			p.MeanTTFTMS = a.sumTTFT / float64(a.completed)
		}
		points[i] = p
	}
	return points
}

// WriteJSON writes r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadResultFile loads a Result written by WriteJSON.
func ReadResultFile(path string) (*Result, error) {
	r, err := jsonx.ReadFile[Result](path, "result")
	if err != nil {
		return nil, err
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("cannot use result %s: schema_version %d, this loadgen reads %d", path, r.SchemaVersion, SchemaVersion)
	}
	return r, nil
}
