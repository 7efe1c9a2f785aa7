package loadgen

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// progressRefresh is how often the progress line is redrawn.
const progressRefresh = 200 * time.Millisecond

// progress draws a one-line progress bar on a terminal while a run goes on. Clients only
// bump two atomic counters; one goroutine draws.
type progress struct {
	w         io.Writer
	total     int64         // NumRequests, 0 when only a duration bounds the run
	duration  time.Duration // 0 when only a count bounds the run
	start     time.Time
	ok, bad   atomic.Int64
	stop, out chan struct{}
}

func startProgress(w io.Writer, total int64, duration time.Duration) *progress {
	p := &progress{w: w, total: total, duration: duration, start: time.Now(), stop: make(chan struct{}), out: make(chan struct{})}
	go p.loop()
	return p
}

func (p *progress) add(ok bool) {
	if ok {
		p.ok.Add(1)
	} else {
		p.bad.Add(1)
	}
}

func (p *progress) loop() {
	defer close(p.out)
	tick := time.NewTicker(progressRefresh)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.draw()
		case <-p.stop:
			p.draw()
			fmt.Fprintln(p.w)
			return
		}
	}
}

// finish draws the final state and ends the line.
func (p *progress) finish() {
	close(p.stop)
	<-p.out
}

func (p *progress) draw() {
	line := progressLine(p.ok.Load(), p.bad.Load(), p.total, time.Since(p.start), p.duration)
	fmt.Fprint(p.w, "\r"+line+"\x1b[K") // erase what a longer previous line left
}

const progressWidth = 30

// progressLine renders the bar: the fraction done is the larger of requests/total and
// elapsed/duration, whichever limits exist.
func progressLine(ok, bad, total int64, elapsed, duration time.Duration) string {
	done := ok + bad
	var frac float64
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if duration > 0 {
		frac = max(frac, float64(elapsed)/float64(duration))
	}
	frac = min(frac, 1)
	filled := int(frac * progressWidth)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", progressWidth-filled)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done) / elapsed.Seconds()
	}
	count := fmt.Sprintf("%d", done)
	if total > 0 {
		count = fmt.Sprintf("%d/%d", done, total)
	}
	return fmt.Sprintf("[%s] %3.0f%% %s req  %.1f req/s  failed %d  %s", bar, frac*100, count, rate, bad, elapsed.Truncate(100*time.Millisecond))
}
