package loadgen

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// recorder accumulates the samples of one clientState. It is owned by one goroutine at a
// time; Run merges all recorders after the clients stopped, so recording takes no lock.
type recorder struct {
	interval time.Duration

	ttft, tpot, itl, e2e []float64 // ms, successful requests only

	completed, failed int64
	inputTokens       int64
	outputTokens      int64
	cachedTokens      int64
	usageReported     int64 // successful requests whose server reported usage
	usagePrompt       int64 // their prompt tokens: the cache hit rate's denominator
	sumE2E            float64

	okStatus  map[int]int64 // successful requests by HTTP status (200)
	badStatus map[int]int64 // failed requests by HTTP status
	failures  [numFailures]int64
	workers   map[string]*int64 // pointer values: counting an existing id does not allocate
	timeline  []timelineAcc
	examples  map[string]string // the first failure detail per status key
}

// maxExample bounds a stored failure detail.
const maxExample = 300

// timelineAcc is one Config.TimelineInterval of completions.
type timelineAcc struct {
	completed, failed int64
	outputTokens      int64
	sumE2E, sumTTFT   float64
}

// add counts o's completions in a too.
func (a *timelineAcc) add(o timelineAcc) {
	a.completed += o.completed
	a.failed += o.failed
	a.outputTokens += o.outputTokens
	a.sumE2E += o.sumE2E
	a.sumTTFT += o.sumTTFT
}

func newRecorder(interval time.Duration) recorder {
	return recorder{
		interval:  interval,
		okStatus:  map[int]int64{},
		badStatus: map[int]int64{},
		workers:   map[string]*int64{},
		examples:  map[string]string{},
	}
}

// countWorker counts one response from the worker named id (empty: header absent).
func (r *recorder) countWorker(id []byte) {
	if len(id) == 0 {
		return
	}
	if n := r.workers[string(id)]; n != nil {
		*n++
		return
	}
	n := int64(1)
	r.workers[string(id)] = &n
}

// record adds one sample; itl holds its inter-token gaps (ms), kept only on success.
func (r *recorder) record(s *sample, itl []float64, stream bool) {
	slot := r.bucket(s.end)
	if s.fail != failNone {
		r.failed++
		slot.failed++
		if s.fail == failHTTPStatus {
			r.badStatus[s.status]++
		} else {
			r.failures[s.fail]++
		}
		if key := statusKey(s); len(s.detail) > 0 && r.examples[key] == "" {
			r.examples[key] = exampleText(s.detail)
		}
		return
	}
	r.completed++
	r.okStatus[s.status]++
	e2e, ttft := ms(s.e2e), ms(s.ttft)
	r.e2e = append(r.e2e, e2e)
	r.sumE2E += e2e
	r.inputTokens += int64(s.promptTokens)
	r.outputTokens += int64(s.outputTokens)
	if s.usage.reported {
		r.usageReported++
		r.usagePrompt += int64(s.usage.promptTokens)
		r.cachedTokens += int64(s.usage.cachedTokens)
	}
	slot.completed++
	slot.outputTokens += int64(s.outputTokens)
	slot.sumE2E += e2e
	if !stream || s.contentEvents > 0 {
		r.ttft = append(r.ttft, ttft)
		slot.sumTTFT += ttft
	}
	if !stream {
		return
	}
	if s.outputTokens > 1 && s.contentEvents > 0 {
		r.tpot = append(r.tpot, (e2e-ttft)/float64(s.outputTokens-1))
	}
	r.itl = append(r.itl, itl...)
}

// bucket returns the timeline slot of a completion at end, growing the timeline.
func (r *recorder) bucket(end time.Duration) *timelineAcc {
	i := max(int(end/r.interval), 0)
	for len(r.timeline) <= i {
		r.timeline = append(r.timeline, timelineAcc{})
	}
	return &r.timeline[i]
}

// merge adds o into r.
func (r *recorder) merge(o *recorder) {
	r.ttft = append(r.ttft, o.ttft...)
	r.tpot = append(r.tpot, o.tpot...)
	r.itl = append(r.itl, o.itl...)
	r.e2e = append(r.e2e, o.e2e...)
	r.completed += o.completed
	r.failed += o.failed
	r.inputTokens += o.inputTokens
	r.outputTokens += o.outputTokens
	r.cachedTokens += o.cachedTokens
	r.usageReported += o.usageReported
	r.usagePrompt += o.usagePrompt
	r.sumE2E += o.sumE2E
	for k, v := range o.okStatus {
		r.okStatus[k] += v
	}
	for k, v := range o.badStatus {
		r.badStatus[k] += v
	}
	for i, v := range o.failures {
		r.failures[i] += v
	}
	for id, n := range o.workers {
		if m := r.workers[id]; m != nil {
			*m += *n
		} else {
			v := *n
			r.workers[id] = &v
		}
	}
	for k, v := range o.examples {
		if r.examples[k] == "" {
			r.examples[k] = v
		}
	}
	for i, t := range o.timeline {
		r.bucket(time.Duration(i) * r.interval).add(t)
	}
}

// statusKey is the Result.StatusCounts key of a failed sample.
func statusKey(s *sample) string {
	if s.fail == failHTTPStatus {
		return strconv.Itoa(s.status)
	}
	return failureNames[s.fail]
}

// exampleText copies a failure detail, cut to maxExample bytes on a UTF-8 boundary.
func exampleText(detail []byte) string {
	if len(detail) > maxExample {
		cut := maxExample
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		return strings.ToValidUTF8(string(detail[:cut]), "\uFFFD") + "…"
	}
	return strings.ToValidUTF8(string(detail), "\uFFFD")
}
