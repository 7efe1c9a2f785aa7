package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// benchText is testdata/bench_en_code.txt (English prose and Go code)
// cut to n bytes at a character boundary.
func benchText(b testing.TB, n int) string {
	data, err := os.ReadFile(filepath.Join("testdata", "bench_en_code.txt"))
	if err != nil {
		b.Fatal(err)
	}
	if n > len(data) {
		n = len(data)
	}
	for n < len(data) && !utf8.RuneStart(data[n]) {
		n--
	}
	return string(data[:n])
}

func BenchmarkEncode(b *testing.B) {
	for _, fam := range families {
		tk := family(b, fam)
		for _, size := range []struct {
			name string
			n    int
		}{{"4KB", 4 << 10}, {"100KB", 100 << 10}} {
			text := benchText(b, size.n)
			b.Run(fam+"/"+size.name, func(b *testing.B) {
				dst := tk.Encode(nil, text, false)
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0 := threadCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					dst = tk.Encode(dst[:0], text, false)
				}
				b.StopTimer()
				// The machine is shared: CPU time of this thread is the fair measure.
				if sec := (threadCPU() - cpu0).Seconds(); sec > 0 {
					b.ReportMetric(float64(len(text))*float64(b.N)/1e6/sec, "MB/cpu-s")
				}
			})
		}
	}
}

// BenchmarkEncodeCold encodes with the word cache bypassed by unique long
// words: the merge loop's own cost.
func BenchmarkEncodeCold(b *testing.B) {
	for _, fam := range families {
		tk := family(b, fam)
		text := benchText(b, 100<<10)
		b.Run(fam, func(b *testing.B) {
			dst := tk.Encode(nil, text, false)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tk.cache.reset()
				dst = tk.Encode(dst[:0], text, false)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, fam := range families {
		tk := family(b, fam)
		text := benchText(b, 4<<10)
		ids := tk.Encode(nil, text, false)
		b.Run(fam+"/4KB", func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				dst = tk.Decode(dst[:0], ids, false)
			}
		})
	}
}

// threadCPU is the CPU time of the calling OS thread (lock it first).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
