package radix

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used. Benchmarks report it per
// operation beside the wall time: on a shared machine a waiting benchmark is slow
// on the wall clock but not on the CPU clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The benchmark matrix of the issue: prompts of 4,096, 16,384 and 65,536
// characters; 10, 100 and 500 tenants; a tree pre-filled with 2,000 entries that
// share six chat-template prefixes. Each MatchAndInsert prompt repeats the first
// 3,000/4,096 of a stored entry (3,000 characters for 4,096-character prompts) and
// adds a new tail, so every operation matches, splits an edge, and inserts the tail.

const benchEntries = 2000

var (
	benchSizes   = []int{4096, 16384, 65536}
	benchTenants = []int{10, 100, 500}
)

// fixedChooser always picks one tenant.
type fixedChooser struct{ t Tenant }

func (c *fixedChooser) Choose(Match) (Tenant, bool) { return c.t, true }

// cacheChooser picks like the cache-aware policy would, cheaply: the most recent
// holder when at least half the prompt matched, else a rotating tenant.
type cacheChooser struct {
	next, tenants Tenant
}

func (c *cacheChooser) Choose(m Match) (Tenant, bool) {
	if len(m.Tenants) > 0 && 2*m.MatchedChars >= m.InputChars {
		return m.Tenants[0], true
	}
	c.next = (c.next + 1) % c.tenants
	return c.next, true
}

// benchFixture is a pre-filled tree and the prompts that extend its entries.
type benchFixture struct {
	tree    *TextTree
	entries [][]byte
	cuts    []int // byte length of the stored part each prompt repeats
	tails   [][]byte
	tenants int
	now     int64
}

func newBenchFixture(tb testing.TB, chars, tenants int, cfg Config) *benchFixture {
	tree, err := NewTextTree(cfg.withDefaults(false))
	if err != nil {
		tb.Fatal(err)
	}
	f := &benchFixture{tree: tree, entries: prefillEntries(benchEntries, chars, 1), tenants: tenants}
	storedChars := chars * 3000 / 4096
	g := newTextGen(2)
	for _, e := range f.entries {
		f.cuts = append(f.cuts, cutChars(e, storedChars))
	}
	for range 16 {
		f.tails = append(f.tails, g.appendChars(nil, chars-storedChars))
	}
	f.prefill()
	return f
}

func (f *benchFixture) prefill() {
	for i, e := range f.entries {
		f.now++
		f.tree.Insert(e, Tenant(i%f.tenants), f.now)
	}
}

// reset empties the tree, keeping its arenas, and pre-fills it again.
func (f *benchFixture) reset() {
	for t := range f.tenants + 64 {
		f.tree.RemoveTenant(Tenant(t))
	}
	f.prefill()
}

// prompt builds prompt i into buf: entry i's stored part and tail i/entries.
func (f *benchFixture) prompt(buf []byte, i int) []byte {
	e := f.entries[i%len(f.entries)]
	buf = append(buf[:0], e[:f.cuts[i%len(f.entries)]]...)
	return append(buf, f.tails[(i/len(f.entries))%len(f.tails)]...)
}

// BenchmarkMatchAndInsert is the hot path on one goroutine. Every operation splits
// an edge and inserts a new tail; after benchEntries operations the tree is reset
// and pre-filled again with the timer stopped.
func BenchmarkMatchAndInsert(b *testing.B) {
	for _, chars := range benchSizes {
		for _, tenants := range benchTenants {
			b.Run(fmt.Sprintf("chars=%d/tenants=%d", chars, tenants), func(b *testing.B) {
				f := newBenchFixture(b, chars, tenants, Config{})
				prompts := make([][]byte, benchEntries)
				for i := range prompts {
					prompts[i] = f.prompt(nil, i)
				}
				ch := &cacheChooser{tenants: Tenant(tenants)}
				// One untimed round grows the arenas to their steady size.
				for _, p := range prompts {
					f.now++
					f.tree.MatchAndInsert(p, f.now, ch)
				}
				f.reset()
				runtime.GC()
				b.ReportAllocs()
				b.SetBytes(int64(len(prompts[0])))
				b.ResetTimer()
				cpu, cpuStart := time.Duration(0), cpuTime()
				for i := range b.N {
					j := i % benchEntries
					if j == 0 && i > 0 {
						cpu += cpuTime() - cpuStart
						b.StopTimer()
						f.reset()
						b.StartTimer()
						cpuStart = cpuTime()
					}
					f.now++
					f.tree.MatchAndInsert(prompts[j], f.now, ch)
				}
				cpu += cpuTime() - cpuStart
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkMatch is the read-only descent of the same prompts.
func BenchmarkMatch(b *testing.B) {
	for _, chars := range benchSizes {
		b.Run(fmt.Sprintf("chars=%d/tenants=100", chars), func(b *testing.B) {
			f := newBenchFixture(b, chars, 100, Config{})
			p := f.prompt(nil, 0)
			dst := make([]Tenant, 0, MaxMatchTenants)
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				f.tree.Match(p, dst)
			}
		})
	}
}

// BenchmarkInsertStored re-inserts a stored entry: the whole prompt matches and
// only the stamps along its path change (a repeated request).
func BenchmarkInsertStored(b *testing.B) {
	for _, tenants := range benchTenants {
		b.Run(fmt.Sprintf("chars=4096/tenants=%d", tenants), func(b *testing.B) {
			f := newBenchFixture(b, 4096, tenants, Config{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f.now++
				f.tree.Insert(f.entries[i%benchEntries], Tenant(i%tenants), f.now)
				i++
			}
		})
	}
}

// BenchmarkMatchAndInsertParallel runs the 4,096-character, 100-tenant case from
// every goroutine RunParallel starts (GOMAXPROCS of them: run with -cpu 1,2 for one
// and two). Operation i builds prompt i into the goroutine's buffer (a 4 KB copy,
// like a request arriving) from entry i%2,000 and tail (i/2,000)%16: up to 32,000
// operations each insert a new tail of 1,096 characters after a 3,000-character
// match (the edge was split by an untimed pass that grew the arenas); beyond that
// they only match and stamp, so the tree stays bounded however long the benchmark
// runs. Compare runs with the same -benchtime.
func BenchmarkMatchAndInsertParallel(b *testing.B) {
	for _, k := range []int{16, 64, 256, 1024} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			f := newBenchFixture(b, 4096, 100, Config{ShardPrefix: k})
			// Grow the arenas for every prompt once, untimed, so the timed part
			// neither faults in fresh pages nor runs the GC.
			buf := make([]byte, 0, 8192)
			for i := range 2 * benchEntries * len(f.tails) {
				buf = f.prompt(buf, i)
				f.now++
				f.tree.Insert(buf, 1000, f.now)
			}
			f.tree.RemoveTenant(1000)
			var next, goroutine, now atomic.Int64
			now.Store(f.now)
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ch := &fixedChooser{t: Tenant(1000 + goroutine.Add(1))}
				buf := make([]byte, 0, 8192)
				clock := now.Load()
				for pb.Next() {
					buf = f.prompt(buf, int(next.Add(1)-1))
					clock++
					f.tree.MatchAndInsert(buf, clock, ch)
				}
			})
		})
	}
}

// BenchmarkRepeatParallel repeats requests whose whole prompt is stored: each
// goroutine cycles through 16 stored 4,096-character prompts (its own, so they
// stay in its core's cache), matching all of it and stamping the path. With memory
// traffic out of the way this shows how the lock sharding scales.
func BenchmarkRepeatParallel(b *testing.B) {
	for _, k := range []int{64, 1024} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			f := newBenchFixture(b, 4096, 100, Config{ShardPrefix: k})
			var goroutine, now atomic.Int64
			now.Store(f.now)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(goroutine.Add(1))
				ch := &fixedChooser{t: Tenant(1000 + g)}
				clock := now.Load()
				for i := 0; pb.Next(); i++ {
					clock++ // a clock per goroutine: a shared counter would cost a cache miss per call
					f.tree.MatchAndInsert(f.entries[(g*16+i%16)%benchEntries], clock, ch)
				}
			})
		})
	}
}

// BenchmarkCountChars counts the characters of 4,096 characters of the workload's
// text (about one non-ASCII character in a hundred).
func BenchmarkCountChars(b *testing.B) {
	text := newTextGen(3).appendChars(nil, 4096)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		countChars(text)
	}
}
