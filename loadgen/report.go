package loadgen

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
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
	Overflow   bool // the linear histogram's "above p99" bar, drawn in red
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

// overflowSlot is the width kept right of a linear histogram for its "above p99" bar.
const overflowSlot = 24.0

func histogramChart(title string, h Histogram) chart {
	if h.Log() {
		return logHistogramChart(title, h)
	}
	c := chart{Title: title, XLabel: "ms (red bar: above p99)"}
	n := len(h.Counts)
	var peak int64 = 1
	for _, k := range h.Counts {
		peak = max(peak, k)
	}
	peak = max(peak, h.Overflow)
	ys := countScale(float64(peak))
	xs := niceScale(h.Edge(0), h.Edge(n), 6)
	width := plotWidth - overflowSlot
	for i, k := range h.Counts {
		lo, hi := h.Edge(i), h.Edge(i+1)
		x0, x1 := chartLeft+width*xs.pos(lo), chartLeft+width*xs.pos(hi)
		c.Bars = append(c.Bars, countBar(x0, x1, k, ys, formatRange(xs, lo, hi, k)))
	}
	x0 := chartLeft + width + overflowSlot/4
	over := countBar(x0, x0+overflowSlot/2, h.Overflow, ys, "> "+xs.label(h.Edge(n))+" ms (above p99): "+strconv.FormatInt(h.Overflow, 10))
	over.Overflow = true
	c.Bars = append(c.Bars, over)
	for _, v := range xs.ticks() {
		c.XTicks = append(c.XTicks, tick{Pos: chartLeft + width*xs.pos(v), Label: xs.label(v)})
	}
	c.YTicks = linearTicks(ys)
	return c
}

// logHistogramChart draws bins of equal ratio on a logarithmic x axis.
func logHistogramChart(title string, h Histogram) chart {
	c := chart{Title: title, XLabel: "ms, log scale (the p99 is over 10× the median)"}
	n := len(h.Counts)
	var peak int64 = 1
	for _, k := range h.Counts {
		peak = max(peak, k)
	}
	ys := countScale(float64(peak))
	lo, hi := h.Edge(0), h.Edge(n)
	pos := func(v float64) float64 { return chartLeft + plotWidth*math.Log(v/lo)/math.Log(hi/lo) }
	for i, k := range h.Counts {
		a, b := h.Edge(i), h.Edge(i+1)
		c.Bars = append(c.Bars, countBar(pos(a), pos(b), k, ys, fmt.Sprintf("%s–%s ms: %d", logLabel2(a), logLabel2(b), k)))
	}
	for _, v := range logTicks(lo, hi) {
		c.XTicks = append(c.XTicks, tick{Pos: pos(v), Label: logLabel(v)})
	}
	c.YTicks = linearTicks(ys)
	return c
}

// logLabel2 prints a bin edge of a logarithmic histogram with three significant digits.
func logLabel2(v float64) string { return formatValue(roundSig(v, 3)) }

// formatRange is a linear bin's tooltip, its edges in the axis' precision plus one digit.
func formatRange(s scale, lo, hi float64, k int64) string {
	fine := scale{Min: s.Min, Max: s.Max, Step: s.Step / 10}
	return fine.label(lo) + "–" + fine.label(hi) + " ms: " + strconv.FormatInt(k, 10)
}

// countBar is a bar from x0 to x1 as tall as k on the count scale ys.
func countBar(x0, x1 float64, k int64, ys scale, tip string) bar {
	h := plotHeight * ys.pos(float64(k))
	return bar{X: x0 + 0.5, Y: chartTop + plotHeight - h, W: max(x1-x0-1, 0.5), H: h, Tip: tip}
}

// countScale is a y axis for counts: integer ticks from 0.
func countScale(peak float64) scale {
	s := niceScale(0, peak, 4)
	if s.Step < 1 {
		s = scale{Min: 0, Max: math.Ceil(max(peak, 1)), Step: 1}
	}
	return s
}

// linearTicks places s's ticks on the y axis.
func linearTicks(s scale) []tick {
	var ticks []tick
	for _, v := range s.ticks() {
		ticks = append(ticks, tick{Pos: chartTop + plotHeight*(1-s.pos(v)), Label: s.label(v)})
	}
	return ticks
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
	xsc, ysc := niceScale(0, xmax, 8), niceScale(0, ymax, 4)
	for _, s := range series {
		var pts strings.Builder
		for i, y := range s.ys {
			fmt.Fprintf(&pts, "%.1f,%.1f ", chartLeft+plotWidth*xsc.pos(xs[i]), chartTop+plotHeight*(1-ysc.pos(y)))
		}
		c.Lines = append(c.Lines, line{Name: s.name, Color: s.color, Points: strings.TrimSpace(pts.String())})
	}
	for _, v := range xsc.ticks() {
		c.XTicks = append(c.XTicks, tick{Pos: chartLeft + plotWidth*xsc.pos(v), Label: xsc.label(v)})
	}
	c.YTicks = linearTicks(ysc)
	return c
}
