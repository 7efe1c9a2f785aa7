package evloop

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The loops' timers (timer.go) are re-armed on every request: a client connection's idle
// timer, its exchange's deadline (shared with Sleep) and head-wait watch, a worker
// connection's idle timer. With lazy disarming an entry stays in the heap under a key that
// may belong to an earlier request; if one ever fired as if it were the current deadline, a
// live request would time out (502 here, a breaker fault in the gateway) or an idle
// keep-alive connection would be closed under its client. This test keeps connections and
// worker connections busy for several times each timeout, so that every timer is re-armed
// many times past the deadline its first arming set, and requires that none of those
// timeouts fires: every request answered, no connection closed by the proxy.

// timerStress forwards /sleep requests after a short Sleep on the exchange's timer (the one
// the deadline uses) and watches every wait for a head with a watcher that always waits on.
type timerStress struct {
	proxy
	sleep   time.Duration
	watched atomic.Int64
}

func (p *timerStress) Serve(x *Exchange) {
	if strings.HasPrefix(string(x.Req().Path()), "/sleep") {
		x.Sleep(p, p.sleep)
		return
	}
	p.forward(x)
}

// forward forwards with p itself as the Forwarder (its UpstreamHead and UpstreamDone are the
// proxy's), so that KeepWaiting makes every wait for a head watched.
func (p *timerStress) forward(x *Exchange) {
	x.Forward(p, &p.target, time.Now().Add(p.deadline))
}

func (p *timerStress) Wake(x *Exchange) { p.forward(x) }

func (p *timerStress) KeepWaiting(*Exchange) bool {
	p.watched.Add(1)
	return true
}

func TestTimeoutsThatMustNotFireDoNotFire(t *testing.T) {
	const (
		deadline    = 2 * time.Second       // per attempt; an answer takes a few ms
		idle        = 1 * time.Second       // client keep-alive; pauses are at most maxPause
		upIdle      = 20 * time.Millisecond // worker connections: many expire between bursts
		maxPause    = 60 * time.Millisecond // between two requests of a connection
		runFor      = 3 * time.Second       // each connection: 1.5 deadlines, 3 idle timeouts
		conns       = 12
		workerDelay = 3 * time.Millisecond
	)
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if d := r.Header.Get("X-Delay"); d != "" {
			dd, _ := time.ParseDuration(d)
			time.Sleep(dd)
		}
		fmt.Fprintf(w, "echo:%s", b)
	}))
	p := &timerStress{proxy: proxy{addr: up, deadline: deadline}, sleep: time.Millisecond}
	addr := startProxy(t, &p.proxy, func(c *Config) {
		c.Handler = p
		c.IdleTimeout, c.UpstreamIdleTimeout, c.ReadTimeout = idle, upIdle, idle
		c.WatchInterval = time.Millisecond // the watch timer re-armed every millisecond of a wait
	})

	var wg sync.WaitGroup
	var requests atomic.Int64
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			end := time.Now().Add(runFor)
			for n := 0; time.Now().Before(end); n++ {
				path := "/x"
				if rng.IntN(4) == 0 {
					path = "/sleep"
				}
				body := fmt.Sprintf("c%d-r%d", i, n)
				delay := time.Duration(rng.Int64N(int64(workerDelay)))
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-Delay: %s\r\nContent-Length: %d\r\n\r\n%s", path, delay, len(body), body)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					errs <- fmt.Errorf("connection %d, request %d (%s): the proxy closed a live keep-alive connection: %v", i, n, path, err)
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(got) != "echo:"+body {
					errs <- fmt.Errorf("connection %d, request %d (%s): %d %q: a timeout fired on a live request", i, n, path, resp.StatusCode, got)
					return
				}
				requests.Add(1)
				if rng.IntN(3) == 0 { // idle long enough for worker connections to expire
					time.Sleep(time.Duration(rng.Int64N(int64(maxPause))))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f := p.fails.Load(); f != 0 {
		t.Errorf("%d attempts failed (a deadline or watch cut a live request)", f)
	}
	if p.done.Load() != requests.Load() {
		t.Errorf("%d attempts done for %d requests answered", p.done.Load(), requests.Load())
	}
	if p.watched.Load() == 0 {
		t.Errorf("the head-wait watch never ran: the test does not exercise it")
	}
	t.Logf("%d requests, %d watch calls", requests.Load(), p.watched.Load())
}
