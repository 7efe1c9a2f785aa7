package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
)

// TestDiscoveredFleetInAProcess runs the fleet-scale harness small: 200 pods through a real
// kube-apiserver discovered by a real smg, a few single-pod changes and a restart, each
// observed from outside through /readiness. The 10,000-pod run with its figures is
// BenchmarkDiscoveryScaleProcess (make bench-scale).
func TestDiscoveredFleetInAProcess(t *testing.T) {
	t.Log(runProcessScale(t, 200, 4, 0))
}

// BenchmarkDiscoveryScaleProcess is make bench-scale's process half of discovery at scale:
// $SMG_SCALE_PODS pods (default 10,000) made Ready through a real kube-apiserver beside a real
// `smg launch --service-discovery` process (its picker rebuilds, health checks and load
// polling included), one mockworker process on 0.0.0.0 answering every pod's loopback IP.
// Everything is observed from outside, through /readiness (healthy_workers counts the
// workers the gateway's route table routes to), /proc and pprof. Run it once:
//
//	go test -run '^$' -bench '^BenchmarkDiscoveryScaleProcess$' -benchtime 1x -timeout 40m ./internal/e2e/
func BenchmarkDiscoveryScaleProcess(b *testing.B) {
	n := k8stest.ScalePods(b)
	for range b.N {
		figs := runProcessScale(b, n, 60, time.Minute)
		fmt.Println(figs)
		b.ReportMetric(figs.readyToRoutable.Seconds(), "s/ready-to-routable")
		b.ReportMetric(figs.restart.Seconds(), "s/restart-to-routable")
		b.ReportMetric(float64(figs.addLatency.P99.Microseconds())/1000, "ms/change-p99")
		b.ReportMetric(float64(figs.rssPerPod), "B-rss/pod")
		b.ReportMetric(figs.cpuPerWorkerInterval.Seconds()*1e6, "us-cpu/worker/interval")
	}
}

// profileDirEnv names a directory where runProcessScale saves CPU profiles of smg (pprof on
// its metrics port): while single pods change (changes.pprof), idle beside the fleet
// (idle.pprof) and from a restart on (restart.pprof). Unset: no profile is taken.
const profileDirEnv = "SMG_SCALE_PROFILE_DIR"

// readinessPoll is how often the harness asks /readiness while it waits for a change: the
// figures are late by up to this much plus one request.
const readinessPoll = 5 * time.Millisecond

// processScaleFigures are one run's measurements of an smg process.
type processScaleFigures struct {
	pods                 int
	created              time.Duration        // creating the pods and writing their Ready status
	readyToRoutable      time.Duration        // last status write sent → /readiness counts every pod's worker
	removeLatency        testutil.Percentiles // a pod's status write (unready) → /readiness counts one fewer
	addLatency           testutil.Percentiles // a pod's status write (Ready again) → /readiness counts all again
	restart              time.Duration        // a new smg started → /readiness counts every pod's worker
	rssPerPod            int64                // resident memory holding every pod minus idle, per pod
	heapPerPod           int64                // live heap (after a collection) holding every pod minus idle, per pod
	cpuWindow            time.Duration        // the window the CPU was measured over, holding every pod
	cpuPerWorkerInterval time.Duration        // smg's CPU per worker per health interval, idle beside the fleet
	cpuShare             float64              // smg's CPU in that window, in cores
	goroutinesIdle       int                  // smg's goroutines with no pod
	goroutinesHolding    int                  // smg's goroutines holding every pod
	load                 string               // /proc/loadavg when the run ended
}

func (f processScaleFigures) String() string {
	return fmt.Sprintf("discovery scale, smg process: %d pods created and Ready through the API in %v; last status write → all %d routable %v; "+
		"one pod's change beside them: unready → not routable %v, Ready → routable %v; restart → all routable %v; "+
		"RSS %d B per pod, live heap %d B per pod; CPU over %v holding every pod: %.3f cores, %v per worker per health interval; "+
		"goroutines %d idle, %d holding every pod; loadavg %s",
		f.pods, f.created.Round(time.Millisecond), f.pods, f.readyToRoutable.Round(time.Millisecond),
		f.removeLatency, f.addLatency, f.restart.Round(time.Millisecond), f.rssPerPod, f.heapPerPod,
		f.cpuWindow, f.cpuShare, f.cpuPerWorkerInterval.Round(100*time.Nanosecond), f.goroutinesIdle, f.goroutinesHolding, f.load)
}

// runProcessScale makes n pods Ready beside an smg process, changes `changes` pods one at a
// time, measures smg's CPU over cpuWindow (none when 0), and restarts smg. Figures are
// measured, never asserted; what is asserted is that every pod's worker becomes routable,
// after the changes and after the restart.
func runProcessScale(t testing.TB, n, changes int, cpuWindow time.Duration) processScaleFigures {
	ctx := context.Background()
	figs := processScaleFigures{pods: n, cpuWindow: cpuWindow}
	api, err := k8stest.Start(func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	ns, err := api.Namespace(ctx, "scale")
	if err != nil {
		t.Fatal(err)
	}

	// One engine on every address answers for all pods, each at its own loopback IP.
	engine := Start(t, Build(t).MockWorker, "--host", "0.0.0.0", "--port", "0", "--count", "1", "--event-loops", "2")
	var port string
	testutil.Eventually(t, "the mock engine listening", func() bool {
		m := listeningLine.FindStringSubmatch(engine.Output())
		if m != nil {
			port = m[1][strings.LastIndexByte(m[1], ':')+1:]
		}
		return m != nil
	})

	env := []string{"KUBECONFIG=" + api.Kubeconfig}
	args := []string{"--service-discovery", "--selector", "app=scale", "--service-discovery-namespace", ns,
		"--service-discovery-port", port,
		"--max-workers", strconv.Itoa(n + 16), "--job-queue-capacity", strconv.Itoa(n), // both default to about 1,000
		"--drain-settle-secs", "0"} // an unready pod's worker leaves at once, so it can come back at once
	g := StartGatewayUnready(t, env, args...)
	testutil.Eventually(t, "smg's informer synced", func() bool { return strings.Contains(g.Output(), "K8s worker store synced") })
	idle := g.memory(t)
	figs.goroutinesIdle = idle.goroutines

	fleet, err := api.NewFleet()
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]k8stest.PodSpec, n)
	for i := range specs {
		specs[i] = k8stest.PodSpec{Namespace: ns, Name: "w-" + strconv.Itoa(i), Labels: map[string]string{"app": "scale"}}
	}
	begin := time.Now()
	lastWrite, err := fleet.ReadyPods(ctx, specs, k8stest.LoopbackIP)
	if err != nil {
		t.Fatal(err)
	}
	figs.created = time.Since(begin)
	figs.readyToRoutable = g.routableWhen(t, "all workers routable", func(healthy int) bool { return healthy == n }).Sub(lastWrite)

	holding := g.memory(t)
	figs.rssPerPod = (holding.rss - idle.rss) / int64(n)
	figs.heapPerPod = (holding.heap - idle.heap) / int64(n)
	figs.goroutinesHolding = holding.goroutines

	// Single-pod changes beside the fleet: unready (the worker leaves routing), Ready again.
	profiled := g.profile(t, "changes", 30*time.Second)
	var removed, added []time.Duration
	for k := range changes {
		i := (k*7919 + 13) % n
		name, ip := "w-"+strconv.Itoa(i), k8stest.LoopbackIP(i)
		pod, err := fleet.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		if pod, err = k8stest.WriteStatus(ctx, fleet.Client, pod, ip, true, false); err != nil {
			t.Fatal(err)
		}
		removed = append(removed, g.routableWhen(t, name+" out of routing", func(healthy int) bool { return healthy == n-1 }).Sub(sent))
		sent = time.Now()
		if _, err = k8stest.WriteStatus(ctx, fleet.Client, pod, ip, true, true); err != nil {
			t.Fatal(err)
		}
		added = append(added, g.routableWhen(t, name+" routable again", func(healthy int) bool { return healthy == n }).Sub(sent))
	}
	figs.removeLatency, figs.addLatency = testutil.PercentilesOf(removed), testutil.PercentilesOf(added)
	<-profiled

	if cpuWindow > 0 {
		profiled = g.profile(t, "idle", cpuWindow/2)
		before := g.cpuTime(t)
		time.Sleep(cpuWindow)
		used := g.cpuTime(t) - before
		figs.cpuShare = used.Seconds() / cpuWindow.Seconds()
		interval := time.Minute // --health-check-interval-secs' default
		figs.cpuPerWorkerInterval = time.Duration(float64(used) * float64(interval) / float64(cpuWindow) / float64(n))
		<-profiled
	}

	// A gateway (re)started beside the Ready pods: every registration at once.
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := g.Wait(testutil.Patience); code != 0 {
		t.Fatalf("smg exited with %d on SIGTERM", code)
	}
	begin = time.Now()
	second := StartGatewayUnready(t, env, args...)
	profiled = second.profile(t, "restart", 20*time.Second)
	figs.restart = second.routableWhen(t, "all workers routable after a restart", func(healthy int) bool { return healthy == n }).Sub(begin)
	<-profiled
	figs.load = testutil.LoadAverage()
	return figs
}

// routableWhen polls /readiness every readinessPoll until cond holds for the count of
// routable workers it reports, and returns when the answer that met it arrived.
func (g *Gateway) routableWhen(t testing.TB, what string, cond func(healthy int) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * testutil.Patience) // only keeps a broken run from hanging
	last := -1
	for {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		now := time.Now()
		if err == nil {
			var body struct {
				Healthy int `json:"healthy_workers"`
			}
			if json.Unmarshal([]byte(r.Body), &body) == nil {
				if cond(body.Healthy) {
					return now
				}
				last = body.Healthy
			}
		}
		if now.After(deadline) {
			t.Fatalf("timed out waiting for %s: /readiness last counted %d routable workers (error %v)", what, last, err)
		}
		time.Sleep(readinessPoll)
	}
}

// profile saves a CPU profile of smg over the next d as <name>.pprof in $SMG_SCALE_PROFILE_DIR,
// in the background; the channel closes when it is saved (at once when the variable is unset).
func (g *Gateway) profile(t testing.TB, name string, d time.Duration) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	dir := os.Getenv(profileDirEnv)
	if dir == "" {
		close(done)
		return done
	}
	url := strings.TrimSuffix(g.MetricsURL, "/metrics") + "/debug/pprof/profile?seconds=" + strconv.Itoa(int(d.Seconds()))
	go func() {
		defer close(done)
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("cannot profile smg (%s): %v", name, err)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, body)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
		}
		if err != nil {
			t.Errorf("cannot save smg's %s profile: %v", name, err)
		}
	}()
	return done
}

// processMemory is what an smg process holds.
type processMemory struct {
	rss, heap  int64 // resident set; live heap after a collection
	goroutines int
}

// memory reads smg's resident set from /proc and its live heap and goroutine count from
// pprof on the metrics port (the heap profile with gc=1 collects first).
func (g *Gateway) memory(t testing.TB) processMemory {
	t.Helper()
	base := strings.TrimSuffix(g.MetricsURL, "/metrics") + "/debug/pprof/"
	r := MustDo(t, http.MethodGet, base+"heap?gc=1&debug=1", "", nil)
	var m processMemory
	sc := bufio.NewScanner(strings.NewReader(r.Body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			m.heap, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	r = MustDo(t, http.MethodGet, base+"goroutine?debug=1", "", nil)
	first, _, _ := strings.Cut(r.Body, "\n")
	if _, v, ok := strings.Cut(first, "total "); ok {
		m.goroutines, _ = strconv.Atoi(v)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(g.Cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			m.rss = kb << 10
		}
	}
	if m.heap == 0 || m.goroutines == 0 || m.rss == 0 {
		t.Fatalf("cannot read smg's memory: heap %d B, %d goroutines, RSS %d B", m.heap, m.goroutines, m.rss)
	}
	return m
}

// cpuTime is the CPU smg has used so far, user and system (/proc/<pid>/stat, in clock ticks
// of 10 ms).
func (g *Gateway) cpuTime(t testing.TB) time.Duration {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(g.Cmd.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("cannot read smg's CPU time from %q", stat)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
