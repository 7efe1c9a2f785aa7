package loadgen

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func randomSample(rng *rand.Rand) (sample, []float64) {
	s := sample{
		status:        200,
		end:           time.Duration(rng.IntN(5000)) * time.Millisecond,
		e2e:           time.Duration(1+rng.IntN(900)) * time.Millisecond,
		contentEvents: rng.IntN(4),
		promptTokens:  rng.IntN(100),
		outputTokens:  rng.IntN(10),
	}
	s.ttft = s.e2e / 2
	if rng.IntN(3) == 0 {
		s.usage = usage{reported: true, promptTokens: s.promptTokens, cachedTokens: rng.IntN(s.promptTokens + 1)}
	}
	switch rng.IntN(6) {
	case 0:
		s.fail, s.status = failHTTPStatus, 503
	case 1:
		s.fail, s.status = failTimeout, 0
	}
	itl := make([]float64, max(s.contentEvents-1, 0))
	for i := range itl {
		itl[i] = rng.Float64()
	}
	return s, itl
}

// TestRecorderMergeEqualsOneRecorder checks that splitting samples across clients and
// merging gives what one client recording everything gives.
func TestRecorderMergeEqualsOneRecorder(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	one := newRecorder(time.Second)
	parts := []recorder{newRecorder(time.Second), newRecorder(time.Second), newRecorder(time.Second)}
	ids := []string{"a", "b", "c"}
	for i := range 500 {
		s, itl := randomSample(rng)
		one.record(&s, itl, true)
		one.countWorker([]byte(ids[i%3]))
		p := &parts[rng.IntN(len(parts))]
		p.record(&s, itl, true)
		p.countWorker([]byte(ids[i%3]))
	}
	merged := newRecorder(time.Second)
	for i := range parts {
		merged.merge(&parts[i])
	}
	for _, xs := range [][]float64{one.ttft, one.tpot, one.itl, one.e2e, merged.ttft, merged.tpot, merged.itl, merged.e2e} {
		slices.Sort(xs)
	}
	a := buildResult(&Config{TimelineInterval: time.Second}, &one, time.Time{}, 5*time.Second)
	b := buildResult(&Config{TimelineInterval: time.Second}, &merged, time.Time{}, 5*time.Second)
	// Sums of floats in another order may differ in the last bits.
	for i := range a.Timeline {
		a.Timeline[i].MeanE2EMS = roundTo(a.Timeline[i].MeanE2EMS)
		b.Timeline[i].MeanE2EMS = roundTo(b.Timeline[i].MeanE2EMS)
		a.Timeline[i].MeanTTFTMS = roundTo(a.Timeline[i].MeanTTFTMS)
		b.Timeline[i].MeanTTFTMS = roundTo(b.Timeline[i].MeanTTFTMS)
	}
	a.Concurrency, b.Concurrency = roundTo(a.Concurrency), roundTo(b.Concurrency)
	for _, r := range []*Result{a, b} {
		for _, s := range []*Summary{&r.TTFT, &r.TPOT, &r.ITL, &r.E2E} {
			s.Mean, s.Std = roundTo(s.Mean), roundTo(s.Std)
		}
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("merged result differs:\n%+v\n%+v", a, b)
	}
	if a.Completed+a.Failed != 500 || a.Workers["a"] != 167 || a.StatusCounts["503"] == 0 || a.StatusCounts["timeout"] == 0 {
		t.Fatalf("counts %d+%d, workers %v, status %v", a.Completed, a.Failed, a.Workers, a.StatusCounts)
	}
}

func roundTo(x float64) float64 { return float64(int64(x*1e6+0.5)) / 1e6 }

func TestTimelineRatesUseTheCoveredPartOfTheLastInterval(t *testing.T) {
	acc := []timelineAcc{{completed: 10, outputTokens: 100, sumE2E: 50, sumTTFT: 20}, {completed: 2, outputTokens: 4, sumE2E: 8}}
	points := timeline(acc, time.Second, 1500*time.Millisecond)
	if points[0].RequestThroughput != 10 || points[0].OutputThroughput != 100 || points[0].MeanE2EMS != 5 || points[0].MeanTTFTMS != 2 {
		t.Fatalf("full interval %+v", points[0])
	}
	if points[1].StartS != 1 || points[1].RequestThroughput != 4 || points[1].OutputThroughput != 8 || points[1].MeanE2EMS != 4 {
		t.Fatalf("half interval %+v", points[1])
	}
}

// TestTimelineFoldsATrailingSliver: a last bucket covering less than half an interval is
// not scaled up to a rate of its own (2 completions in 0.1 s would read 20 req/s in a run
// of 10 req/s); it joins the interval before it.
func TestTimelineFoldsATrailingSliver(t *testing.T) {
	acc := []timelineAcc{{completed: 10, outputTokens: 100, sumE2E: 50}, {completed: 10, outputTokens: 100, sumE2E: 50}, {completed: 2, outputTokens: 20, sumE2E: 10, failed: 1}}
	points := timeline(acc, time.Second, 2100*time.Millisecond)
	if len(points) != 2 {
		t.Fatalf("%d points, want the sliver folded into 2: %+v", len(points), points)
	}
	last := points[1]
	if last.StartS != 1 || last.Completed != 12 || last.Failed != 1 || roundTo(last.RequestThroughput) != roundTo(12/1.1) || roundTo(last.OutputThroughput) != roundTo(120/1.1) || last.MeanE2EMS != 5 {
		t.Fatalf("folded point %+v", last)
	}
	// An interval with no completion at the end dilutes nothing: the last point covers at
	// most one interval.
	points = timeline(acc[:1], time.Second, 3*time.Second)
	if points[0].RequestThroughput != 10 {
		t.Fatalf("last point over more than an interval: %+v", points[0])
	}
}
