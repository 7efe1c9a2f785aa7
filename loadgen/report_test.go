package loadgen

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/loadgen/loadgentest"
)

func TestHTMLReportIsSelfContained(t *testing.T) {
	srv := startServer(t, loadgentest.Options{WorkerID: "w<1>"})
	cfg := smallRandom(srv.BaseURL)
	cfg.TimelineInterval = time.Millisecond
	res := runOK(t, cfg)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, res); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, banned := range []string{"<script", "<link", "@import", "cdn", "src="} {
		if strings.Contains(strings.ToLower(html), banned) {
			t.Errorf("report contains %q: it must open offline", banned)
		}
	}
	bars := 0
	for _, h := range res.Histograms {
		bars += len(h.Counts)
		if !h.Log() {
			bars++ // the overflow bar
		}
	}
	if strings.Count(html, "<svg") != 3+4 || !strings.Contains(html, "<polyline") || strings.Count(html, `<rect class="bar`) != bars {
		t.Errorf("report lacks charts: %d svg, %d bars", strings.Count(html, "<svg"), strings.Count(html, `<rect class="bar`))
	}
	if !strings.Contains(html, "w&lt;1&gt;") || strings.Contains(html, "w<1>") {
		t.Error("worker ids are not escaped")
	}
	// Every SVG figure is well-formed XML.
	for rest := html; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "</svg>") + i + len("</svg>")
		dec := xml.NewDecoder(strings.NewReader(rest[i:j]))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("svg is not well-formed: %v\n%s", err, rest[i:j])
			}
		}
		rest = rest[j:]
	}
}

func TestHistogramBins(t *testing.T) {
	xs := []float64{1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 100}
	h := histogram(xs, 5, 9)
	var sum int64
	for _, c := range h.Counts {
		sum += c
	}
	if h.Overflow != 1 || sum != 10 || h.LowerMS != 1 || h.BinWidthMS != 8.0/histogramBins || h.Counts[0] != 1 || h.Counts[histogramBins-1] != 1 {
		t.Fatalf("histogram %+v", h)
	}
	flat := histogram([]float64{3, 3, 3}, 3, 3)
	if flat.Counts[0] != 3 || flat.Overflow != 0 {
		t.Fatalf("constant sample %+v", flat)
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine(45, 5, 100, 2*time.Second, 0)
	want := "[===============               ]  50% 50/100 req  25.0 req/s  failed 5  2s"
	if got != want {
		t.Fatalf("progress\n%q\nwant\n%q", got, want)
	}
	if got := progressLine(10, 0, 0, 3*time.Second, 4*time.Second); !strings.Contains(got, " 75% 10 req") {
		t.Fatalf("duration-bound progress %q", got)
	}
}

func TestHTMLReportOfAFailedRun(t *testing.T) {
	r := &Result{SchemaVersion: SchemaVersion, Failed: 3, StatusCounts: map[string]int64{"connection_error": 3},
		ErrorExamples: map[string]string{"connection_error": "dial tcp: connection refused <x>"}}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if strings.Contains(html, "<svg") || !strings.Contains(html, "connection refused &lt;x&gt;") {
		t.Fatalf("report of a run without samples:\n%s", html)
	}
}

// TestLegendNeverCoversALine: the legend row is above the plot area, so a series at its
// peak (drawn at the plot's top edge) passes below the legend text.
func TestLegendNeverCoversALine(t *testing.T) {
	r := &Result{Timeline: []TimelinePoint{
		{StartS: 0, MeanE2EMS: 50, MeanTTFTMS: 10, RequestThroughput: 5},
		{StartS: 1, MeanE2EMS: 90, MeanTTFTMS: 90, RequestThroughput: 9}, // both lines at the top
	}}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	legends := regexp.MustCompile(`<text class="legend" x="[0-9.]+" y="([0-9.]+)"`).FindAllStringSubmatch(html, -1)
	lines := regexp.MustCompile(`<polyline [^>]*points="([^"]+)"`).FindAllStringSubmatch(html, -1)
	if len(legends) == 0 || len(lines) == 0 {
		t.Fatalf("no legend or line:\n%s", html)
	}
	const legendFont = 12 // .legend font-size: the text's baseline is its bottom
	topmost := chartHeight
	for _, l := range lines {
		for _, pt := range strings.Fields(l[1]) {
			_, y, _ := strings.Cut(pt, ",")
			v, _ := strconv.ParseFloat(y, 64)
			topmost = min(topmost, v)
		}
	}
	for _, l := range legends {
		y, _ := strconv.ParseFloat(l[1], 64)
		if y+legendFont/4 >= topmost { // descenders reach about a quarter of the font size below
			t.Errorf("legend baseline at y=%v reaches the line at y=%v", y, topmost)
		}
	}
	// The y axis ends at the nice number above the peak (90 → 100): the peak is 10% below it.
	if want := chartTop + plotHeight*0.1; math.Abs(topmost-want) > 0.05 {
		t.Errorf("the peak is drawn at y=%v, want %v (90 on an axis to 100)", topmost, want)
	}
}

// TestColdStartHistogramIsLogarithmic: a run whose p99 is a cold start far above the median
// gets bins of equal ratio up to the maximum, so the bulk spreads over many bars instead of
// sitting in the first one, and the x axis is labelled at 1-2-5 values.
func TestColdStartHistogramIsLogarithmic(t *testing.T) {
	var xs []float64
	for i := range 95 {
		xs = append(xs, 20+float64(i%10)) // 20-29 ms
	}
	for range 5 {
		xs = append(xs, 4000) // cold starts
	}
	s := summarize(xs)
	h := histogram(xs, s.Median, s.P99)
	if !h.Log() || h.Overflow != 0 || h.LowerMS != 20 || h.UpperMS != 4000 {
		t.Fatalf("histogram %+v, want log bins from 20 to 4000", h)
	}
	var sum, peak int64
	for _, k := range h.Counts[:len(h.Counts)-1] {
		sum += k
		peak = max(peak, k)
	}
	// Linear bins up to the p99 (4000 ms, 100 ms each) put all 95 in the first bar.
	if sum != 95 || h.Counts[len(h.Counts)-1] != 5 || peak > 95/2 {
		t.Fatalf("the 20-29 ms bulk: %d samples, the fullest bin holds %d (want under half); counts %v", sum, peak, h.Counts)
	}
	c := histogramChart("TTFT (ms)", h)
	var labels []string
	for _, tk := range c.XTicks {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "20 50 100 200 500 1000 2000" {
		t.Errorf("log x ticks %q", got)
	}
	if len(c.Bars) != histogramBins || !strings.Contains(c.XLabel, "log scale") {
		t.Errorf("%d bars, x label %q", len(c.Bars), c.XLabel)
	}

	narrow := append([]float64(nil), xs[:95]...)
	s = summarize(narrow)
	if h := histogram(narrow, s.Median, s.P99); h.Log() {
		t.Errorf("a narrow distribution got log bins: %+v", h)
	}
}

// TestReportNotesTheWarmUp: the report says whether cold-start requests were measured.
func TestReportNotesTheWarmUp(t *testing.T) {
	for warmup, want := range map[int]string{0: "none: the first requests", 16: "16 requests sent first, not measured"} {
		r := &Result{SchemaVersion: SchemaVersion, Config: Config{Warmup: warmup}}
		var buf bytes.Buffer
		if err := WriteHTML(&buf, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), want) {
			t.Errorf("warm-up %d: the report lacks %q", warmup, want)
		}
	}
}
