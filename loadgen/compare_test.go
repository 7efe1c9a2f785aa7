package loadgen

import (
	"strings"
	"testing"
)

func resultFor(throughput, ttftP99 float64, failed int64) *Result {
	return &Result{
		Completed: 100, Failed: failed,
		RequestThroughput: throughput, OutputThroughput: throughput * 10,
		TTFT: Summary{Count: 100, Mean: 10, Median: 9, P90: 15, P99: ttftP99},
		E2E:  Summary{Count: 100, Mean: 50, Median: 45, P90: 70, P99: 90},
	}
}

func TestCompare(t *testing.T) {
	base := resultFor(1000, 20, 0)
	if r := Compare(base, resultFor(990, 20.5, 0), 0.05); len(r) != 0 {
		t.Fatalf("changes within 5%% reported: %v", r)
	}
	if r := Compare(base, resultFor(1200, 10, 0), 0.05); len(r) != 0 {
		t.Fatalf("improvements reported: %v", r)
	}
	r := Compare(base, resultFor(900, 30, 0), 0.05)
	names := map[string]bool{}
	for _, x := range r {
		names[x.Metric] = true
	}
	if !names["request_throughput"] || !names["output_throughput"] || !names["ttft_ms.p99"] || len(r) != 3 {
		t.Fatalf("regressions %v", r)
	}
	if r[0].Metric != "ttft_ms.p99" || r[0].Change != 0.5 {
		t.Fatalf("worst first: %v", r[0])
	}
	if !strings.Contains(r[0].String(), "ttft_ms.p99 regressed by 50.0%") {
		t.Fatalf("message %q", r[0])
	}
	if r := Compare(base, resultFor(1000, 20, 10), 0.05); len(r) != 1 || r[0].Metric != "error_rate" {
		t.Fatalf("error rate rise from 0 to 9%%: %v", r)
	}
	empty := resultFor(1000, 20, 0)
	empty.TTFT = Summary{}
	if r := Compare(base, empty, 0.05); len(r) != 0 {
		t.Fatalf("metric without samples compared: %v", r)
	}
}

func TestParseFraction(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, "0.05": 0.05, " 12.5% ": 0.125, "0": 0} {
		if got, err := ParseFraction(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-5%", "NaN", "5%%"} {
		if _, err := ParseFraction(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseFraction(f *testing.F) {
	for _, s := range []string{"5%", "0.05", "1e-2", "%", "-0", "+3%", "Inf", "0x1p-4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFraction(s)
		if err != nil {
			return
		}
		if v < 0 || v != v || v > 1e308 {
			t.Fatalf("%q parsed to %v", s, v)
		}
		if strings.HasSuffix(strings.TrimSpace(s), "%") {
			if again, err := ParseFraction(strings.TrimSuffix(strings.TrimSpace(s), "%")); err != nil || again/100 != v {
				t.Fatalf("%q = %v but without %% = %v (%v)", s, v, again, err)
			}
		}
	})
}

// TestDiffTable: every metric of both runs on one row each, with base, new, the change and
// the verdict, and the gated rows past the limit are exactly Compare's regressions.
func TestDiffTable(t *testing.T) {
	base, newer := resultFor(1000, 20, 0), resultFor(900, 30, 10)
	newer.TTFT.Median = 4.5 // better
	diffs := Diff(base, newer, 0.05)
	var b strings.Builder
	if err := WriteDiffTable(&b, diffs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(diffs)+1 || strings.Join(strings.Fields(lines[0]), " ") != "metric base new change" {
		t.Fatalf("want a header and %d rows, got:\n%s", len(diffs), b.String())
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if _, dup := rows[f[0]]; dup {
			t.Fatalf("metric %s listed twice:\n%s", f[0], b.String())
		}
		rows[f[0]] = f[1:]
	}
	for metric, want := range map[string]string{
		"request_throughput": "1000 900 -10.0% REGRESSION",
		"output_throughput":  "10000 9000 -10.0% REGRESSION",
		"ttft_ms.p99":        "20 30 +50.0% REGRESSION",
		"ttft_ms.median":     "9 4.5 -50.0% better",
		"ttft_ms.mean":       "10 10 0.0%",
		"e2e_latency_ms.p90": "70 70 0.0%",
		"error_rate":         "0 0.09091 +9.1 pp REGRESSION",
		"failed":             "0 10 n/a",
		"input_throughput":   "0 0 0.0%",
	} {
		if got := strings.Join(rows[metric], " "); got != want {
			t.Errorf("row %s = %q, want %q\n%s", metric, got, want, b.String())
		}
	}
	if _, ok := rows["tpot_ms.p99"]; ok {
		t.Errorf("tpot_ms has no samples on either side but is listed:\n%s", b.String())
	}
	var regressed []string
	for _, d := range diffs {
		if d.Regressed {
			regressed = append(regressed, d.Metric)
		}
	}
	var compared []string
	for _, r := range Compare(base, newer, 0.05) {
		compared = append(compared, r.Metric)
	}
	if strings.Join(regressed, ",") != "request_throughput,output_throughput,ttft_ms.p99,error_rate" || len(compared) != len(regressed) || compared[0] != "ttft_ms.p99" {
		t.Fatalf("regressed rows %v, Compare %v", regressed, compared)
	}
}
