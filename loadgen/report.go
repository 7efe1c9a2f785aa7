package loadgen

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
)

//go:embed report.html.tmpl
var reportTemplateText string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"percent": func(f float64) float64 { return 100 * f },
	"add":     func(a, b int) int { return a + b },
	"mul":     func(a, b int) int { return a * b },
}).Parse(reportTemplateText))

// WriteHTML writes a self-contained HTML report of r: summary tables, latency histograms and
// throughput/latency-over-time charts as inline SVG. It loads nothing from the network and
// runs no script, so it opens offline and in CI artifact viewers.
func WriteHTML(w io.Writer, r *Result) error {
	return reportTemplate.Execute(w, newReportView(r))
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 560.0
	chartHeight = 220.0
	chartLeft   = 56.0
	chartRight  = 12.0
	chartTop    = 28.0 // the legend row sits above the plot, never on a line
	chartBottom = 34.0
	plotWidth   = chartWidth - chartLeft - chartRight
	plotHeight  = chartHeight - chartTop - chartBottom
)

type reportView struct {
	R          *Result
	Latencies  []latencyRow
	Status     []countRow
	Workers    []countRow
	Histograms []chart
	Timelines  []chart
}

type latencyRow struct {
	Name string
	S    Summary
}

type countRow struct {
	Key   string
	Count int64
	Share string
}

// chart is one SVG figure: bars (histograms) or polylines (timelines), with axis ticks.
type chart struct {
	Title  string
	Bars   []bar
	Lines  []line
	XTicks []tick
	YTicks []tick
	XLabel string
}

type bar struct {
	X, Y, W, H float64
	Tip        string
}

type line struct {
	Name   string
	Color  string
	Points string
}

type tick struct {
	Pos   float64
	Label string
}

func newReportView(r *Result) reportView {
	v := reportView{R: r, Latencies: []latencyRow{
		{"TTFT", r.TTFT}, {"TPOT", r.TPOT}, {"ITL", r.ITL}, {"End-to-end", r.E2E},
	}}
	if r.ArrivalLag.Count > 0 {
		v.Latencies = append(v.Latencies, latencyRow{"Open-loop arrival lag", r.ArrivalLag})
	}
	v.Status = countRows(r.StatusCounts)
	v.Workers = countRows(r.Workers)
	for _, h := range []struct{ key, title string }{
		{"ttft_ms", "TTFT (ms)"}, {"tpot_ms", "TPOT (ms)"}, {"itl_ms", "ITL (ms)"}, {"e2e_latency_ms", "End-to-end latency (ms)"},
	} {
		if hist, ok := r.Histograms[h.key]; ok {
			v.Histograms = append(v.Histograms, histogramChart(h.title, hist))
		}
	}
	if len(r.Timeline) > 0 {
		v.Timelines = timelineCharts(r.Timeline)
	}
	return v
}

func countRows(m map[string]int64) []countRow {
	var total int64
	rows := make([]countRow, 0, len(m))
	for k, n := range m {
		rows = append(rows, countRow{Key: k, Count: n})
		total += n
	}
	slices.SortFunc(rows, func(a, b countRow) int { return strings.Compare(a.Key, b.Key) })
	for i := range rows {
		rows[i].Share = fmt.Sprintf("%.1f%%", 100*float64(rows[i].Count)/float64(max(total, 1)))
	}
	return rows
}

func histogramChart(title string, h Histogram) chart {
	c := chart{Title: title, XLabel: "ms (last bar: above p99)"}
	n := len(h.Counts) + 1 // + overflow bar
	var peak int64 = 1
	for _, k := range h.Counts {
		peak = max(peak, k)
	}
	peak = max(peak, h.Overflow)
	w := plotWidth / float64(n)
	for i := range n {
		k, tip := h.Overflow, fmt.Sprintf("> %.3g ms: %d", h.LowerMS+h.BinWidthMS*float64(len(h.Counts)), h.Overflow)
		if i < len(h.Counts) {
			lo := h.LowerMS + h.BinWidthMS*float64(i)
			k, tip = h.Counts[i], fmt.Sprintf("%.3g–%.3g ms: %d", lo, lo+h.BinWidthMS, h.Counts[i])
		}
		bh := plotHeight * float64(k) / float64(peak)
		c.Bars = append(c.Bars, bar{X: chartLeft + w*float64(i) + 0.5, Y: chartTop + plotHeight - bh, W: max(w-1, 0.5), H: bh, Tip: tip})
	}
	for i := 0; i <= 4; i++ {
		bin := float64(len(h.Counts)) * float64(i) / 4
		c.XTicks = append(c.XTicks, tick{Pos: chartLeft + w*bin, Label: formatTick(h.LowerMS + h.BinWidthMS*bin)})
	}
	c.YTicks = yTicks(float64(peak))
	return c
}

func timelineCharts(points []TimelinePoint) []chart {
	xs := make([]float64, len(points))
	series := func(f func(TimelinePoint) float64) []float64 {
		ys := make([]float64, len(points))
		for i, p := range points {
			ys[i] = f(p)
		}
		return ys
	}
	for i, p := range points {
		xs[i] = p.StartS
	}
	throughput := lineChart("Throughput over time", xs, []namedSeries{
		{"requests/s", "#1f77b4", series(func(p TimelinePoint) float64 { return p.RequestThroughput })},
	})
	tokens := lineChart("Output tokens/s over time", xs, []namedSeries{
		{"output tokens/s", "#2ca02c", series(func(p TimelinePoint) float64 { return p.OutputThroughput })},
	})
	latency := lineChart("Latency over time (ms, mean per interval)", xs, []namedSeries{
		{"end-to-end", "#d62728", series(func(p TimelinePoint) float64 { return p.MeanE2EMS })},
		{"TTFT", "#9467bd", series(func(p TimelinePoint) float64 { return p.MeanTTFTMS })},
	})
	return []chart{throughput, tokens, latency}
}

type namedSeries struct {
	name, color string
	ys          []float64
}

func lineChart(title string, xs []float64, series []namedSeries) chart {
	c := chart{Title: title, XLabel: "seconds since start"}
	xmax := 1.0
	if n := len(xs); n > 0 {
		xmax = max(xs[n-1], 1)
	}
	ymax := 0.0
	for _, s := range series {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	ymax = max(ymax, 1e-9)
	for _, s := range series {
		var pts strings.Builder
		for i, y := range s.ys {
			px := chartLeft + plotWidth*xs[i]/xmax
			py := chartTop + plotHeight*(1-y/ymax)
			fmt.Fprintf(&pts, "%.1f,%.1f ", px, py)
		}
		c.Lines = append(c.Lines, line{Name: s.name, Color: s.color, Points: strings.TrimSpace(pts.String())})
	}
	for i := 0; i <= 4; i++ {
		x := xmax * float64(i) / 4
		c.XTicks = append(c.XTicks, tick{Pos: chartLeft + plotWidth*x/xmax, Label: formatTick(x)})
	}
	c.YTicks = yTicks(ymax)
	return c
}

func yTicks(top float64) []tick {
	ticks := make([]tick, 0, 5)
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		ticks = append(ticks, tick{Pos: chartTop + plotHeight*(1-float64(i)/4), Label: formatTick(v)})
	}
	return ticks
}

func formatTick(v float64) string {
	return strconv.FormatFloat(v, 'g', 4, 64)
}
