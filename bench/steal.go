package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The hypervisor's steal time: how long the VM's host kept the measured cores from running
// anything (the `steal` column of /proc/stat). On the shared 2-core VM the overhead suite runs
// on, stretches of heavy steal produce a slow mode of every row: a vCPU holding a loopback
// socket's lock is descheduled by the host while the other vCPU spins on that lock in the
// paravirtual slow path (__pv_queued_spin_lock_slowpath, kvm_kick_cpu), so a proxy's kernel
// time per request triples and its p99 reaches tens of milliseconds (docs/benchmarks-history.md,
// "The slow mode"). Each measurement records the steal of the proxy's and the load core over
// its run, so that such a row can be told from a regression.

// stealLimit is the hypervisor steal, in percent of the measured cores' time, past which a
// row measured the machine rather than the proxy: the table names it (stealNote), a round
// past it is kept only when no round of the row was below it and the row is measured again
// (measureRounds), and the gate does not judge a metric computed from it (Baseline.Check).
// The slow mode of docs/benchmarks-history.md came with 25-40%; quiet runs measure 0-5%.
const stealLimit = 10

// cpuTicks is one core's /proc/stat counters: the steal ticks and all ticks.
type cpuTicks struct{ steal, total uint64 }

// coreTicks is how drive reads the cores' counters (a test's fake replaces it).
var coreTicks = readCPUTicks

// readCPUTicks returns the summed counters of cores from /proc/stat.
func readCPUTicks(cores ...int) (cpuTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	return parseCPUTicks(b, cores...)
}

// parseCPUTicks sums the counters of the "cpuN" lines of cores in a /proc/stat text; a core
// listed twice counts once.
func parseCPUTicks(stat []byte, cores ...int) (cpuTicks, error) {
	want := map[string]bool{}
	for _, c := range cores {
		want["cpu"+strconv.Itoa(c)] = true
	}
	var t cpuTicks
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || !want[f[0]] {
			continue
		}
		found++
		// user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
		// already counted in user and nice.
		for i, s := range f[1:9] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("/proc/stat %s: %w", f[0], err)
			}
			t.total += v
			if i == 7 {
				t.steal += v
			}
		}
	}
	if found != len(want) {
		return cpuTicks{}, fmt.Errorf("/proc/stat lists %d of the cores %v", found, cores)
	}
	return t, nil
}

// stealPercent is the share of the cores' time the host stole between a and b, in percent.
func stealPercent(a, b cpuTicks) float64 {
	if b.total <= a.total {
		return 0
	}
	return float64(b.steal-a.steal) / float64(b.total-a.total) * 100
}
