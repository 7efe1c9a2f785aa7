package bench

import (
	"errors"
	"strings"
	"testing"
)

// sampleBenchOutput is real `go test -bench -benchmem` output (trimmed), including a log line
// between results and a custom metric column.
const sampleBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/smg-go/smg/radix
cpu: Intel(R) Xeon(R) Processor
BenchmarkMatchAndInsert/chars=4096/tenants=10-2         	    2000	      2400 ns/op	1712.20 MB/s	      2398 cpu-ns/op	       0 B/op	       0 allocs/op
2026/12/02 14:17:12 WARN passthrough policy with more than one worker
BenchmarkPick/workers=512/policy=passthrough-2              	    2000	        11.05 ns/op	       0 B/op	       0 allocs/op
PASS
ok  	github.com/smg-go/smg/radix	0.343s
pkg: github.com/smg-go/smg/fastpath
BenchmarkProxyRoundTrip-2   	    2000	     14453 ns/op	      54 B/op	       3 allocs/op
BenchmarkNoMem   	    100	     7 ns/op
`

func TestParseBenchOutput(t *testing.T) {
	rs, err := ParseBenchOutput([]byte(sampleBenchOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []MicroResult{
		{Package: "github.com/smg-go/smg/radix", Name: "BenchmarkMatchAndInsert/chars=4096/tenants=10", Iterations: 2000, NsPerOp: 2400, HasAllocs: true},
		{Package: "github.com/smg-go/smg/radix", Name: "BenchmarkPick/workers=512/policy=passthrough", Iterations: 2000, NsPerOp: 11.05, HasAllocs: true},
		{Package: "github.com/smg-go/smg/fastpath", Name: "BenchmarkProxyRoundTrip", Iterations: 2000, NsPerOp: 14453, BytesPerOp: 54, AllocsPerOp: 3, HasAllocs: true},
		{Package: "github.com/smg-go/smg/fastpath", Name: "BenchmarkNoMem", Iterations: 100, NsPerOp: 7},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d results %+v, want %d", len(rs), rs, len(want))
	}
	for i := range want {
		if rs[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, rs[i], want[i])
		}
	}
}

func TestParseBenchOutputRejectsMalformedResult(t *testing.T) {
	for _, line := range []string{
		"BenchmarkX-2 100 12 ns/op 0",          // odd field count: a unit is missing
		"BenchmarkX-2 100 twelve ns/op 0 B/op", // a value is not a number
	} {
		if _, err := ParseBenchOutput([]byte(line + "\n")); err == nil {
			t.Errorf("%q parsed without error", line)
		}
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkPick/workers=8-2":    "BenchmarkPick/workers=8",
		"BenchmarkX-16":                "BenchmarkX",
		"BenchmarkX":                   "BenchmarkX",
		"BenchmarkPick/policy=a-b":     "BenchmarkPick/policy=a-b",
		"BenchmarkPick/policy=power-2": "BenchmarkPick/policy=power",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckAllocs(t *testing.T) {
	ok := []MicroResult{{Name: "BenchmarkA", HasAllocs: true}}
	if err := CheckAllocs(ok); err != nil {
		t.Fatalf("zero allocs failed the gate: %v", err)
	}
	bad := append(ok, MicroResult{Package: "p", Name: "BenchmarkB", AllocsPerOp: 2, HasAllocs: true}, MicroResult{Package: "p", Name: "BenchmarkC"})
	err := CheckAllocs(bad)
	if !errors.Is(err, errAllocs) {
		t.Fatalf("CheckAllocs = %v, want errAllocs", err)
	}
	for _, name := range []string{"BenchmarkB: 2 allocs/op", "BenchmarkC reported no allocs/op"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %q", err, name)
		}
	}
	if strings.Contains(err.Error(), "BenchmarkA") {
		t.Errorf("error %q names the clean benchmark", err)
	}
	// No benchmark is exempt: a proxied round trip that allocated once (as the fasthttp plane
	// did when fasthttp discarded a streamed body) would fail the gate again.
	rt := MicroResult{Package: "github.com/smg-go/smg/fastpath", Name: "BenchmarkProxyRoundTrip", AllocsPerOp: 1, HasAllocs: true}
	if err := CheckAllocs([]MicroResult{rt}); err == nil {
		t.Fatal("one allocation per proxied round trip passed the gate")
	}
}

func TestHotPathSuitesCoverTheHotPath(t *testing.T) {
	for _, smoke := range []bool{false, true} {
		pkgs := map[string]bool{}
		for _, s := range HotPathSuites(smoke) {
			pkgs[s.Package] = true
		}
		for _, p := range []string{"./fastpath", "./fastpath/extract", "./fastpath/disagg", "./radix", "./policy/all"} {
			if !pkgs[p] {
				t.Errorf("smoke=%v: no suite for %s", smoke, p)
			}
		}
	}
}

// FuzzParseBenchOutput: the parser never panics, and every result it returns has a
// Benchmark name and came from a line of the input.
func FuzzParseBenchOutput(f *testing.F) {
	f.Add([]byte(sampleBenchOutput))
	f.Add([]byte("BenchmarkX-2 1 1 ns/op 0 B/op 0 allocs/op\n"))
	f.Add([]byte("pkg: x\nBenchmark 1 NaN allocs/op\n"))
	f.Add([]byte("Benchmark\t-1\t1e400 ns/op\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := ParseBenchOutput(in)
		if err != nil {
			return
		}
		for _, r := range rs {
			if !strings.HasPrefix(r.Name, "Benchmark") {
				t.Fatalf("result %+v has no Benchmark name", r)
			}
			if !strings.Contains(string(in), r.Name) {
				t.Fatalf("result name %q is not in the input", r.Name)
			}
		}
	})
}
