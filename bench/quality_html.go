package bench

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
)

//go:embed quality.html.tmpl
var qualityTemplateText string

var qualityTemplate = template.Must(template.New("quality").Parse(qualityTemplateText))

// WriteQualityHTML writes the suite's plots as one self-contained HTML page: per case, bar
// charts of capacity and TTFT p99 per policy, inline SVG in the loadgen report's style. It
// loads nothing from the network and runs no script, so it opens offline and in CI artifact
// viewers.
func WriteQualityHTML(w io.Writer, q *QualityResult) error {
	return qualityTemplate.Execute(w, newQualityView(q))
}

// Bar chart geometry, in SVG user units (the loadgen report's chart size).
const (
	barChartWidth  = 560.0
	barChartHeight = 240.0
	barLeft        = 56.0
	barRight       = 12.0
	barTop         = 16.0
	barBottom      = 58.0 // room for slanted policy names
	barPlotWidth   = barChartWidth - barLeft - barRight
	barPlotHeight  = barChartHeight - barTop - barBottom
)

type qualityView struct {
	Config      QualityConfig
	LoadPercent string
	Cases       []qualityCaseView
}

type qualityCaseView struct {
	Name, About string
	Charts      []barChart
}

// barChart is one SVG figure: groups of bars (one group per policy, one bar per series).
type barChart struct {
	Title  string
	Bars   []svgBar
	Labels []svgLabel // policy names under the groups
	YTicks []tick
	Legend []legendItem
}

type svgBar struct {
	X, Y, W, H float64
	Mid        float64 // X + W/2, where the value is printed
	Color      string
	Value      string // printed above the bar
	Tip        string
}

type svgLabel struct {
	X    float64
	Text string
}

type tick struct {
	Pos   float64
	Label string
}

type legendItem struct {
	X           float64
	Color, Name string
}

// barSeries is one bar per group: a name and a value per group (NaN-free; missing groups
// are left out by the caller).
type barSeries struct {
	name, color string
	values      []float64
	present     []bool
}

// Colours: round robin (the reference) in grey, every other policy in blue; repeats in
// shades.
const (
	colorReference = "#9d9d9d"
	colorPolicy    = "#4c78a8"
)

var repeatColors = []string{"#4c78a8", "#72b7b2", "#54a24b", "#eeca3b", "#e45756"}

func newQualityView(q *QualityResult) qualityView {
	v := qualityView{Config: q.Config, LoadPercent: strconv.FormatFloat(q.Config.LoadFraction*100, 'f', 0, 64)}
	for _, cr := range q.Cases {
		cv := qualityCaseView{Name: cr.Case.Name, About: cr.Case.About}
		if len(cr.Saturation) > 0 {
			var names []string
			capacity := barSeries{name: "capacity", color: colorPolicy}
			p99 := barSeries{name: "TTFT p99", color: colorPolicy}
			for _, r := range cr.Saturation {
				names = append(names, r.Policy)
				capacity.values, capacity.present = append(capacity.values, r.Capacity), append(capacity.present, true)
				p99.values, p99.present = append(p99.values, r.TTFTP99MS), append(p99.present, true)
			}
			cv.Charts = append(cv.Charts, newBarChart("Capacity at saturation (requests/s of model time)", names, []barSeries{capacity}, true))
			if !cr.Case.SatNoStream { // non-streamed answers have no TTFT
				cv.Charts = append(cv.Charts, newBarChart("TTFT p99 at saturation (ms of model time)", names, []barSeries{p99}, true))
			}
		}
		if len(cr.Load) > 0 {
			policies, repeats := loadPolicies(cr.Load)
			var series []barSeries
			for rep := 1; rep <= repeats; rep++ {
				s := barSeries{name: "repeat " + strconv.Itoa(rep), color: repeatColors[(rep-1)%len(repeatColors)]}
				for _, p := range policies {
					r := findRow(cr.Load, p, rep)
					s.present = append(s.present, r != nil)
					if r != nil {
						s.values = append(s.values, r.TTFTP99MS)
					} else {
						s.values = append(s.values, 0)
					}
				}
				series = append(series, s)
			}
			title := fmt.Sprintf("TTFT p99 at %.0f%% of round robin's capacity (ms of model time)", q.Config.LoadFraction*100)
			cv.Charts = append(cv.Charts, newBarChart(title, policies, series, false))
		}
		v.Cases = append(v.Cases, cv)
	}
	return v
}

// newBarChart lays out one bar per series in each group. With greyReference a single
// series' round-robin bar is grey, so the reference stands out.
func newBarChart(title string, groups []string, series []barSeries, greyReference bool) barChart {
	c := barChart{Title: title}
	top := 0.0
	for _, s := range series {
		for i, v := range s.values {
			if s.present[i] {
				top = max(top, v)
			}
		}
	}
	top = niceCeil(top)
	groupW := barPlotWidth / float64(max(len(groups), 1))
	barW := (groupW * 0.8) / float64(max(len(series), 1))
	for g, name := range groups {
		x0 := barLeft + groupW*float64(g) + groupW*0.1
		c.Labels = append(c.Labels, svgLabel{X: barLeft + groupW*(float64(g)+0.5), Text: name})
		for si, s := range series {
			if !s.present[g] {
				continue
			}
			h := barPlotHeight * s.values[g] / top
			color := s.color
			if greyReference && len(series) == 1 && name == referencePolicy {
				color = colorReference
			}
			c.Bars = append(c.Bars, svgBar{
				X: x0 + barW*float64(si), Y: barTop + barPlotHeight - h, W: max(barW-1, 0.5), H: h, Color: color, Mid: x0 + barW*(float64(si)+0.5),
				Value: formatValue(s.values[g]), Tip: fmt.Sprintf("%s, %s: %s", name, s.name, formatValue(s.values[g])),
			})
		}
	}
	for i := 0; i <= 4; i++ {
		c.YTicks = append(c.YTicks, tick{Pos: barTop + barPlotHeight*(1-float64(i)/4), Label: formatValue(top * float64(i) / 4)})
	}
	if len(series) > 1 {
		for i, s := range series {
			c.Legend = append(c.Legend, legendItem{X: barLeft + 8 + 90*float64(i), Color: s.color, Name: s.name})
		}
	}
	return c
}

// niceCeil rounds v up to 1, 2 or 5 × a power of ten, so the axis ticks are round; 1 for 0.
func niceCeil(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v {
		p /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func formatValue(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
