package loadgen

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportRendersInChromium opens a report in headless Chromium (hack/chromium/install.sh,
// run by make tools) and reads the screenshot: the histogram bars, the red overflow bar and
// every timeline colour are painted, and the browser logged no console message (the report
// runs no script, so any message is an error in the page).
func TestReportRendersInChromium(t *testing.T) {
	browser := os.Getenv("CHROMIUM")
	if browser == "" {
		browser = "chromium"
	}
	path, err := exec.LookPath(browser)
	if err != nil {
		t.Fatalf("no headless browser: %v; run make tools (hack/chromium/install.sh) or set CHROMIUM", err)
	}

	r := &Result{SchemaVersion: SchemaVersion, Completed: 100, DurationS: 12, Histograms: map[string]Histogram{}}
	var fast, cold []float64
	for i := range 100 {
		fast = append(fast, 40+float64(i%20))
		cold = append(cold, 20+float64(i%10))
	}
	for i := range 5 {
		cold[95+i] = 4000 // cold starts: a log-scale histogram
	}
	fast[99] = 400 // one slow answer: the overflow bar of a linear histogram
	for name, xs := range map[string][]float64{"e2e_latency_ms": fast, "ttft_ms": cold} {
		s := summarize(append([]float64(nil), xs...))
		r.Histograms[name] = histogram(sortedCopy(xs), s.Median, s.P99)
	}
	for i := range 12 {
		r.Timeline = append(r.Timeline, TimelinePoint{StartS: float64(i), RequestThroughput: 8 + float64(i%3),
			OutputThroughput: 900 + 10*float64(i), MeanE2EMS: 50 + float64(i), MeanTTFTMS: 20})
	}
	dir := t.TempDir()
	var html bytes.Buffer
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, html.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	shot := filepath.Join(dir, "report.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0",
		"--window-size=1200,2000", "--screenshot="+shot, "file://"+page)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "CONSOLE") {
			t.Errorf("the browser logged a console message: %s", l)
		}
	}

	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 2000 {
		t.Errorf("screenshot %v, want 1200x2000", b)
	}
	for name, c := range map[string]color.RGBA{
		"histogram bars":    {0x4c, 0x78, 0xa8, 0xff},
		"the overflow bar":  {0xe4, 0x57, 0x56, 0xff},
		"requests/s line":   {0x1f, 0x77, 0xb4, 0xff},
		"output tokens/s":   {0x2c, 0xa0, 0x2c, 0xff},
		"end-to-end line":   {0xd6, 0x27, 0x28, 0xff},
		"TTFT line":         {0x94, 0x67, 0xbd, 0xff},
		"text and the axes": {0x44, 0x44, 0x44, 0xff},
	} {
		if n := countNear(img, c); n < 100 {
			t.Errorf("%s (%v): %d pixels painted, want at least 100", name, c, n)
		}
	}
}

func sortedCopy(xs []float64) []float64 {
	out := append([]float64(nil), xs...)
	summarize(out) // sorts
	return out
}

// countNear counts the pixels of colour c, give or take 2 per channel: the solid centres of
// bars and lines, not the anti-aliased blends at their edges (a red line's edge can pass for
// the overflow bar's red).
func countNear(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r>>8, c.R) && near(g>>8, c.G) && near(bl>>8, c.B) {
				n++
			}
		}
	}
	return n
}

func near(a uint32, b uint8) bool { return int(a)-int(b) <= 2 && int(b)-int(a) <= 2 }
