package bench

import (
	"math"
	"os"
	"strings"
	"testing"
)

const statSample = `cpu  2292606 33937 675266 1437701 7827 0 101961 400632 0 0
cpu0 100 0 50 800 0 0 10 40 0 0
cpu1 200 0 100 500 0 0 40 160 7 0
intr 1 2 3
`

func TestParseCPUTicksSumsTheNamedCores(t *testing.T) {
	got, err := parseCPUTicks([]byte(statSample), 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuTicks{steal: 200, total: 1000 + 1000}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	one, err := parseCPUTicks([]byte(statSample), 1)
	if err != nil {
		t.Fatal(err)
	}
	if one != (cpuTicks{steal: 160, total: 1000}) {
		t.Fatalf("core 1: %+v (guest time must not count twice)", one)
	}
	if _, err := parseCPUTicks([]byte(statSample), 2); err == nil {
		t.Fatal("a core missing from /proc/stat must be an error")
	}
}

func TestStealPercentIsTheStolenShareOfTheInterval(t *testing.T) {
	a, b := cpuTicks{steal: 10, total: 1000}, cpuTicks{steal: 60, total: 1200}
	if got := stealPercent(a, b); math.Abs(got-25) > 1e-9 {
		t.Fatalf("stealPercent = %v, want 25", got)
	}
	if got := stealPercent(b, b); got != 0 {
		t.Fatalf("an empty interval: %v, want 0", got)
	}
}

func TestReadCPUTicksOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skipf("no /proc/stat on this system: %v", err)
	}
	got, err := readCPUTicks(0)
	if err != nil || got.total == 0 || got.steal > got.total {
		t.Fatalf("readCPUTicks(0) = %+v, %v", got, err)
	}
}

func TestTableNamesTheRowsTheHostStoleFrom(t *testing.T) {
	r := fullReport()
	if table := r.Table(); !strings.Contains(table, "during the rows kept: at most 0.0%.") || strings.Contains(table, "Rows past") {
		t.Errorf("a quiet run's table must say so and name no row:\n%s", table)
	}
	r.Overhead.JSON[1].StealPct = 31.5
	r.Overhead.SSE[2].StealPct = 4
	table := r.Table()
	want := "at most 31.5%. Rows past 10%, whose timings measured the machine rather than the proxy: JSON: smg (cache_aware) 32%."
	if !strings.Contains(table, want) {
		t.Errorf("table lacks %q:\n%s", want, table)
	}
}

func TestDriveRecordsTheStealOverItsRun(t *testing.T) {
	lg := fakeLoadgen(t, `{"completed": 100, "failed": 0, "request_throughput": 50, "e2e_latency_ms": {"median": 1, "p99": 2}}`)
	cfg := DefaultOverheadConfig()
	cfg.Bin, cfg.WorkDir = Binaries{LoadGen: lg}, t.TempDir()
	cfg.derive()
	reads := []cpuTicks{{steal: 5, total: 1000}, {steal: 65, total: 1200}}
	var asked [][]int
	coreTicks = func(cores ...int) (cpuTicks, error) {
		asked = append(asked, cores)
		next := reads[0]
		reads = reads[1:]
		return next, nil
	}
	defer func() { coreTicks = readCPUTicks }()
	m, err := cfg.drive(Measurement{Key: "direct", Name: "direct"}, "", baseURLArgs("http://127.0.0.1:1"), nil, cfg.regularLoad(false))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.StealPct-30) > 1e-9 {
		t.Errorf("StealPct = %v, want 30 (60 of 200 ticks)", m.StealPct)
	}
	if len(asked) != 2 || len(asked[0]) != 2 || asked[0][0] != 0 || asked[0][1] != 1 {
		t.Errorf("read the cores %v, want the proxy and the load core before and after the run", asked)
	}
}

// TestKeepBestPrefersUndisturbedRoundsAndRetriesStolenRows: a round below stealLimit beats a
// cheaper stolen one; a row every round of which was stolen is measured again, at most
// StealRetries times, and keeps its stolen figure (for the gate not to judge) when every
// retry is stolen too.
func TestKeepBestPrefersUndisturbedRoundsAndRetriesStolenRows(t *testing.T) {
	rounds := map[string][]Measurement{
		// Round 2 is cheaper but stolen: round 1 is kept, no retry.
		"nginx": {{CPUPerRequestUS: 20, StealPct: 3}, {CPUPerRequestUS: 15, StealPct: 30}},
		// Both rounds stolen; the first retry is quiet and kept although dearer.
		"smg": {{CPUPerRequestUS: 18, StealPct: 25}, {CPUPerRequestUS: 17, StealPct: 40}, {CPUPerRequestUS: 19, StealPct: 2}, {CPUPerRequestUS: 1}},
		// Stolen in every round and both retries: the least-CPU stolen round is kept.
		"bare": {{CPUPerRequestUS: 30, StealPct: 50}, {CPUPerRequestUS: 26, StealPct: 35}, {CPUPerRequestUS: 28, StealPct: 20}, {CPUPerRequestUS: 27, StealPct: 60}, {CPUPerRequestUS: 1}},
		// The direct run keeps its most requests/s among quiet rounds.
		"direct": {{RPS: 100, StealPct: 90}, {RPS: 90}},
	}
	calls := map[string]int{}
	cfg := OverheadConfig{StealRetries: 2}
	runs := []proxyUnderTest{{key: "direct"}, {key: "smg"}, {key: "bare"}, {key: "nginx"}}
	ms, err := cfg.keepBest(runs, load{kind: "json"}, 2, func(p proxyUnderTest) (Measurement, error) {
		m := rounds[p.key][calls[p.key]]
		calls[p.key]++
		m.Key = p.key
		return m, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Measurement{}
	for _, m := range ms {
		got[m.Key] = m
	}
	for key, want := range map[string]struct {
		calls  int
		cpu    float64
		steal  float64
		rps    float64
		reason string
	}{
		"nginx":  {2, 20, 3, 0, "a quiet round beats a cheaper stolen one; nothing to retry"},
		"smg":    {3, 19, 2, 0, "the first quiet retry ends the retries"},
		"bare":   {4, 26, 35, 0, "two retries at most, then the cheapest stolen round"},
		"direct": {2, 0, 0, 90, "the quiet round, not the faster stolen one"},
	} {
		m := got[key]
		if calls[key] != want.calls || m.CPUPerRequestUS != want.cpu || m.StealPct != want.steal || m.RPS != want.rps {
			t.Errorf("%s: %d measurements, kept cpu %v steal %v rps %v; want %d, cpu %v steal %v rps %v (%s)",
				key, calls[key], m.CPUPerRequestUS, m.StealPct, m.RPS, want.calls, want.cpu, want.steal, want.rps, want.reason)
		}
	}
	if len(ms) != 4 || ms[0].Key != "direct" || ms[3].Key != "nginx" {
		t.Errorf("rows %v: want runs' order", ms)
	}
}

// TestMetricsCarryTheStealOfTheirRows: a ratio carries the larger steal of its two rows, a
// single row's figure its own, and the quality metrics none (they are always judged).
func TestMetricsCarryTheStealOfTheirRows(t *testing.T) {
	r := fullReport()
	r.Overhead.JSON[3].StealPct = 4  // smg-evloop-cache_aware
	r.Overhead.JSON[6].StealPct = 22 // nginx
	r.Overhead.JSONOpen[1].StealPct = 12
	got := r.Measured()
	for metric, want := range map[string]float64{
		"overhead.json.cpu_ratio.smg-evloop-cache_aware/nginx":      22,
		"overhead.json.cpu_ratio.smg-evloop-cache_aware/bare":       4,
		"overhead.json.cpu_us_per_request.smg-evloop-cache_aware":   4,
		"overhead.json.cpu_ratio.smg-cache_aware/bare":              0,
		"overhead.json_open.p50_ratio.smg-evloop-cache_aware/nginx": 12,
		"overhead.json_open.added_p50_ms.smg-evloop-cache_aware":    12,
	} {
		s, ok := got.Steal[metric]
		if !ok || s != want {
			t.Errorf("steal of %s = %v (present %v), want %v", metric, s, ok, want)
		}
	}
	for metric := range got.Values {
		_, timed := got.Steal[metric]
		if overhead := strings.HasPrefix(metric, "overhead."); overhead != timed {
			t.Errorf("%s: carries a steal figure %v; want exactly the overhead metrics to", metric, timed)
		}
	}
}
