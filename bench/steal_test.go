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
	cfg := OverheadConfig{Bin: Binaries{LoadGen: lg}, WorkDir: t.TempDir(), ProxyCore: 0, LoadCore: 1}
	cfg.fillDefaults()
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
