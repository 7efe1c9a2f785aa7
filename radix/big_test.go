package radix

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The 100 MB measurements take tens of seconds and gigabytes of transient memory, so they
// are benchmarks, run on demand (go test -run '^$' -bench Big -benchtime 1x ./radix), not
// part of go test. They report figures with Logf and assert only correctness: timing on a
// shared machine is for reading, not for failing.

const bigStoredChars = 100_000_000

// bigTree inserts conversations until the tree stores bigStoredChars distinct
// characters: each starts with one of six chat templates and a first user message,
// and each later turn repeats the whole conversation so far and adds an assistant
// reply and a user message. So every insert shares a prefix with an earlier one
// and adds a unique tail. It returns up to keep prompts sampled along the way.
func bigTree(t testing.TB, tree *TextTree, tenants, keep int) [][]byte {
	g := newTextGen(5)
	rng := rand.New(rand.NewPCG(5, 5))
	templates := chatTemplates()
	var kept [][]byte
	conv := make([]byte, 0, 64<<10)
	now := int64(0)
	for c := 0; tree.Stats().StoredChars < bigStoredChars; c++ {
		tenant := Tenant(c % tenants)
		conv = append(conv[:0], templates[c%len(templates)]...)
		turns := 1 + rng.IntN(8)
		for turn := range turns {
			if turn > 0 {
				conv = append(conv, "\n<|assistant|>\n"...)
				conv = g.appendChars(conv, 200+rng.IntN(1500))
				conv = append(conv, "\n<|user|>\n"...)
			}
			conv = g.appendChars(conv, 100+rng.IntN(2000))
			now++
			tree.Insert(conv, tenant, now)
			if len(kept) < keep && rng.IntN(16) == 0 {
				kept = append(kept, slices.Clone(conv))
			}
		}
		if c%4096 == 0 && tree.Stats().StoredChars >= bigStoredChars {
			break
		}
	}
	return kept
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestBigMemoryPerChar measures heap bytes per stored character of a 100 MB tree:
// runtime.ReadMemStats after GC, before and after building it.
func BenchmarkBigMemoryPerChar(t *testing.B) {
	before := heapAfterGC()
	tree := newText(t, Config{})
	start := time.Now()
	bigTree(t, tree, 100, 0)
	elapsed := time.Since(start)
	after := heapAfterGC()
	st := tree.Stats()
	heap := float64(after - before)
	t.Logf("stored %d chars (tenant-weighted size %d) in %d nodes; edge bytes %d, free %d", st.StoredChars, st.Size, st.Nodes, st.EdgeBytes, st.FreeBytes)
	t.Logf("heap %.1f MB: %.3f bytes per stored character (%.3f per unit of Size); arenas report %.1f MB",
		heap/1e6, heap/float64(st.StoredChars), heap/float64(st.Size), float64(st.MemoryBytes)/1e6)
	t.Logf("built in %v (%.0f ns per stored character, inserts included)", elapsed, float64(elapsed.Nanoseconds())/float64(st.StoredChars))
	if err := checkInvariants(tree.c); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(tree)
}

// TestBigEvictionLatency evicts 10% of a 100 MB tree while two goroutines keep
// matching (MatchAndInsert and Match of stored conversations, yielding between
// operations), and reports the longest single operation during the eviction next
// to the longest in an equally long stretch without eviction.
func BenchmarkBigEvictionLatency(t *testing.B) {
	// holdEnded is told how long each of Evict's shard lock holds lasted.
	var holdEnded func(scan bool, held time.Duration)
	var lockedAt time.Time
	tree := newText(t, Config{OnEvictLock: func(scan, held bool) {
		if held {
			lockedAt = time.Now()
		} else if holdEnded != nil {
			holdEnded(scan, time.Since(lockedAt))
		}
	}})
	prompts := bigTree(t, tree, 100, 512)
	runtime.GC()
	var nowClock atomic.Int64
	nowClock.Store(1 << 40) // newer than every stamp of the build

	measure := func(during func()) (maxWait time.Duration, ops int64, elapsed time.Duration) {
		var stop atomic.Bool
		var wg sync.WaitGroup
		var maxNs, count atomic.Int64
		for w := range 2 {
			wg.Go(func() {
				dst := make([]Tenant, 0, MaxMatchTenants)
				ch := &fixedChooser{t: Tenant(w)}
				local, n := int64(0), int64(0)
				for i := w; !stop.Load(); i++ {
					p := prompts[i%len(prompts)]
					t0 := time.Now()
					if i%2 == 0 {
						tree.MatchAndInsert(p, nowClock.Add(1), ch)
					} else {
						tree.Match(p, dst)
					}
					local = max(local, int64(time.Since(t0)))
					n++
					runtime.Gosched()
				}
				for old := maxNs.Load(); local > old && !maxNs.CompareAndSwap(old, local); old = maxNs.Load() {
				}
				count.Add(n)
			})
		}
		start := time.Now()
		during()
		elapsed = time.Since(start)
		stop.Store(true)
		wg.Wait()
		return time.Duration(maxNs.Load()), count.Load(), elapsed
	}

	size := tree.Size()
	var st EvictStats
	// Each hold is measured on the wall clock, which counts time the evicting
	// thread spent descheduled by a busy machine, and on the thread's CPU clock
	// (the work done between two holds' ends; the gaps between holds are a heap
	// pop), which does not.
	var longestScan, longestRemoval, longestCPU time.Duration
	holds := 0
	var lastCPU time.Duration
	holdEnded = func(scan bool, d time.Duration) {
		if scan {
			longestScan = max(longestScan, d)
		} else {
			longestRemoval = max(longestRemoval, d)
		}
		cpu := threadCPU()
		longestCPU = max(longestCPU, cpu-lastCPU)
		lastCPU = cpu
		holds++
	}
	evictWait, evictOps, evictTime := measure(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		lastCPU = threadCPU()
		st = tree.Evict(size * 9 / 10)
	})
	baseWait, baseOps, _ := measure(func() { time.Sleep(evictTime) })
	t.Logf("Evict(%d) of a tree of %d: %v, %d segments, %d nodes, %d rounds, size after %d",
		size*9/10, size, evictTime, st.Segments, st.Nodes, st.Rounds, st.After)
	t.Logf("eviction held a shard lock %d times: longest %v scanning for leaves, %v removing them (wall); longest %v of CPU",
		holds, longestScan, longestRemoval, longestCPU)
	t.Logf("during eviction: %d operations, longest %v; without eviction: %d operations, longest %v",
		evictOps, evictWait, baseOps, baseWait)
	if st.After > size*9/10 {
		t.Fatalf("Evict left %d, budget %d", st.After, size*9/10)
	}
	if err := checkInvariants(tree.c); err != nil {
		t.Fatal(err)
	}
}

// threadCPU is the CPU time of the calling OS thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
