package loadgen

import (
	"bytes"
	"encoding/xml"
	"io"
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
	if strings.Count(html, "<svg") != 3+4 || !strings.Contains(html, "<polyline") || strings.Count(html, `<rect class="bar"`) != 4*(histogramBins+1) {
		t.Errorf("report lacks charts: %d svg, %d bars", strings.Count(html, "<svg"), strings.Count(html, `<rect class="bar"`))
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
	h := histogram(xs, 9)
	var sum int64
	for _, c := range h.Counts {
		sum += c
	}
	if h.Overflow != 1 || sum != 10 || h.LowerMS != 1 || h.BinWidthMS != 8.0/histogramBins || h.Counts[0] != 1 || h.Counts[histogramBins-1] != 1 {
		t.Fatalf("histogram %+v", h)
	}
	flat := histogram([]float64{3, 3, 3}, 3)
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
	if topmost != chartTop {
		t.Errorf("the peak is drawn at y=%v, want the plot's top %v", topmost, chartTop)
	}
}
