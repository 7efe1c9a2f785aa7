package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// MicroSuite is one `go test -bench` invocation over a hot-path package.
type MicroSuite struct {
	Package string // import path relative to the module root, e.g. "./radix"
	Bench   string // -bench pattern
}

// HotPathSuites are the benchmarks of the hot path whose allocs/op the gate holds at zero
// (docs/architecture.md): the proxy round trip (regular and PD), the request field extractor, the PD
// body rewrites, the radix tree's match and insert, and every policy's Pick. The comparison
// benchmarks (fastjson, encoding/json) are not the hot path and are left out.
func HotPathSuites(smoke bool) []MicroSuite {
	pick := "^BenchmarkPick$"
	radixPattern := "^(BenchmarkMatchAndInsert|BenchmarkMatch|BenchmarkInsertStored)$"
	if smoke {
		// The smoke run keeps the smallest fleets and inputs: same code paths, a third of the time.
		pick = "^BenchmarkPick$/^workers=(8|64)$"
		radixPattern = "^(BenchmarkMatchAndInsert|BenchmarkMatch|BenchmarkInsertStored)$/^chars=4096/"
	}
	return []MicroSuite{
		{"./fastpath", "^(BenchmarkProxyRoundTrip|BenchmarkPDRoundTrip)$"},
		{"./fastpath/extract", "^BenchmarkExtract$"},
		{"./fastpath/disagg", "^BenchmarkRewrite$/^Append"},
		{"./fastpath/disagg", "^BenchmarkKVTransferParams$"},
		{"./radix", radixPattern},
		{"./policy/all", pick},
	}
}

// MicroResult is one benchmark line.
type MicroResult struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"` // without the -GOMAXPROCS suffix
	Iterations  int64   `json:"iterations"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	// HasAllocs is false when the line carried no allocs/op (run without -benchmem).
	HasAllocs bool `json:"has_allocs"`
}

// MicroConfig configures the micro suite. Start from DefaultMicroConfig, which sets every
// default; Validate refuses the empty fields.
type MicroConfig struct {
	// Go is the go command. Default "go".
	Go string
	// ModuleDir is the module root the packages are relative to. Default ".".
	ModuleDir string
	// BenchTime is go test's -benchtime. Default 5000x: a fixed count keeps the run short and
	// is plenty for allocs/op, which is an exact count, not a timing.
	BenchTime string
	// Suites are the benchmarks run. Default HotPathSuites(false).
	Suites []MicroSuite
}

// DefaultMicroConfig returns the micro suite's defaults (each field says its own).
func DefaultMicroConfig() MicroConfig {
	return MicroConfig{Go: "go", ModuleDir: ".", BenchTime: "5000x", Suites: HotPathSuites(false)}
}

// Validate reports configuration errors, each saying how to fix it.
func (c MicroConfig) Validate() error {
	if c.Go == "" || c.ModuleDir == "" || c.BenchTime == "" || len(c.Suites) == 0 {
		return fmt.Errorf("micro suite: go command %q, module dir %q, benchtime %q, %d suites: give each (start from bench.DefaultMicroConfig())",
			c.Go, c.ModuleDir, c.BenchTime, len(c.Suites))
	}
	return nil
}

// Micro runs every suite with -benchmem and returns the parsed lines in order.
func Micro(cfg MicroConfig) ([]MicroResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var all []MicroResult
	for _, s := range cfg.Suites {
		cmd := exec.Command(cfg.Go, "test", "-run", "^$", "-bench", s.Bench, "-benchmem", "-benchtime", cfg.BenchTime, s.Package)
		cmd.Dir = cfg.ModuleDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return all, fmt.Errorf("go test -bench %q %s failed: %w\n%s", s.Bench, s.Package, err, tail(string(out)))
		}
		rs, err := ParseBenchOutput(out)
		if err != nil {
			return all, fmt.Errorf("%s: %w", s.Package, err)
		}
		if len(rs) == 0 {
			return all, fmt.Errorf("go test -bench %q %s ran no benchmark: was it renamed?", s.Bench, s.Package)
		}
		all = append(all, rs...)
	}
	return all, nil
}

// ParseBenchOutput reads `go test -bench` output: "pkg:" lines name the package of the
// benchmark lines that follow; a benchmark line is the name (with its -GOMAXPROCS suffix), the
// iteration count, then value-unit pairs (ns/op, B/op, allocs/op and any custom metric). Other
// lines (goos, PASS, log output) are skipped. A line that starts like a result but does not
// parse is an error, so a format change cannot silently empty the gate.
func ParseBenchOutput(out []byte) ([]MicroResult, error) {
	var rs []MicroResult
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		iters, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // "BenchmarkX  some log text": not a result line
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("benchmark line %q: want value-unit pairs after the iteration count", line)
		}
		r := MicroResult{Package: pkg, Name: trimProcs(f[0]), Iterations: iters}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: value %q: %w", line, f[i], err)
			}
			switch f[i+1] {
			case "ns/op":
				r.NsPerOp = v
			case "B/op":
				r.BytesPerOp = v
			case "allocs/op":
				r.AllocsPerOp, r.HasAllocs = v, true
			}
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}

// trimProcs drops the "-N" GOMAXPROCS suffix go test appends to a benchmark name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// errAllocs is wrapped by CheckAllocs.
var errAllocs = errors.New("hot path allocates")

// CheckAllocs returns an error naming every benchmark with non-zero or missing allocs/op.
func CheckAllocs(rs []MicroResult) error {
	var errs []error
	for _, r := range rs {
		switch {
		case !r.HasAllocs:
			errs = append(errs, fmt.Errorf("%w: %s %s reported no allocs/op (run with -benchmem)", errAllocs, r.Package, r.Name))
		case r.AllocsPerOp != 0:
			errs = append(errs, fmt.Errorf("%w: %s %s: %g allocs/op, want 0", errAllocs, r.Package, r.Name, r.AllocsPerOp))
		}
	}
	return errors.Join(errs...)
}
