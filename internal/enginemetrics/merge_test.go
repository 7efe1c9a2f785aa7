package enginemetrics

import (
	"bytes"
	"strings"
	"testing"
)

const sglangBody = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",engine_type="unified"} 3
# HELP sglang:e2e_request_latency_seconds Histogram of latency.
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 1
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 2
sglang:e2e_request_latency_seconds_sum{model_name="m"} 0.5
sglang:e2e_request_latency_seconds_count{model_name="m"} 2
# an ordinary comment
weird{worker="engine-own"} NaN 1700000000000
broken{le="unterminated} 1
`

func TestMergerGroupsFamiliesAndLabelsEveryWorker(t *testing.T) {
	m := Merger{MaxSeries: DefaultMaxSeries}
	if n := m.Add("http://10.0.0.1:8000", []byte(sglangBody)); n != 6 {
		t.Fatalf("kept %d samples of the first worker, want 6", n)
	}
	m.Add("http://10.0.0.2:8000", []byte("sglang:num_running_reqs{model_name=\"m\"} 5\n"))
	var out bytes.Buffer
	m.WriteTo(&out)
	want := `# HELP sglang:e2e_request_latency_seconds Histogram of latency.
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{worker="http://10.0.0.1:8000",le="0.1",model_name="m"} 1
sglang:e2e_request_latency_seconds_bucket{worker="http://10.0.0.1:8000",le="+Inf",model_name="m"} 2
sglang:e2e_request_latency_seconds_sum{worker="http://10.0.0.1:8000",model_name="m"} 0.5
sglang:e2e_request_latency_seconds_count{worker="http://10.0.0.1:8000",model_name="m"} 2
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{worker="http://10.0.0.1:8000",model_name="m",engine_type="unified"} 3
sglang:num_running_reqs{worker="http://10.0.0.2:8000",model_name="m"} 5
weird{worker="http://10.0.0.1:8000",exported_worker="engine-own"} NaN 1700000000000
`
	if out.String() != want {
		t.Fatalf("merged exposition:\n%s\nwant:\n%s", out.String(), want)
	}
	if m.Invalid != 1 {
		t.Fatalf("Invalid = %d, want 1 (the unterminated label value)", m.Invalid)
	}
}

func TestMergerBoundsTheSeries(t *testing.T) {
	m := Merger{MaxSeries: 3}
	var body strings.Builder
	for i := range 10 {
		body.WriteString("x{i=\"" + string(rune('a'+i)) + "\"} 1\n")
	}
	if n := m.Add("http://w:1", []byte(body.String())); n != 3 || m.Dropped != 7 || m.Samples() != 3 {
		t.Fatalf("kept %d, dropped %d, samples %d; want 3, 7, 3", n, m.Dropped, m.Samples())
	}
}

func TestAppendRelabeled(t *testing.T) {
	cases := []struct{ in, want string }{
		{`up 1`, `up{worker="u"} 1`},
		{`up{} 1`, `up{worker="u"} 1`},
		{`up{a="x\"y",b="2",} 1 123`, `up{worker="u",a="x\"y",b="2"} 1 123`},
		{`a:b_c 2.5e3`, `a:b_c{worker="u"} 2.5e3`},
		{`up`, ``},
		{`up{a="1"}`, ``},
		{`up 1 x`, ``},
		{`up{a:b="1"} 1`, ``},
		{`1up 1`, ``},
		{`up{a="1"}2`, ``},
		{`up notanumber`, ``},
	}
	for _, c := range cases {
		got, ok := AppendRelabeled(nil, []byte(c.in), "u")
		if string(got) != c.want || ok != (c.want != "") {
			t.Errorf("%q: %q %v, want %q", c.in, got, ok, c.want)
		}
	}
}

// FuzzAppendRelabeled: whatever the engine sends, a line is either refused or relabeled into
// a line that parses again (relabeling is idempotent in shape) and names the worker first.
func FuzzAppendRelabeled(f *testing.F) {
	for _, line := range strings.Split(sglangBody, "\n") {
		f.Add(line)
	}
	f.Add(`up{a="\\",b="\n"} -Inf`)
	f.Fuzz(func(t *testing.T, line string) {
		out, ok := AppendRelabeled([]byte("prefix"), []byte(line), `http://h:1`)
		if !ok {
			if string(out) != "prefix" {
				t.Fatalf("refused line left %q in dst", out)
			}
			return
		}
		got := string(out[len("prefix"):])
		if !strings.Contains(got, `{worker="http://h:1"`) || strings.ContainsAny(got, "\n") {
			t.Fatalf("%q relabeled as %q", line, got)
		}
		again, ok := AppendRelabeled(nil, []byte(got), "v")
		if !ok || !strings.Contains(string(again), `exported_worker="http://h:1"`) {
			t.Fatalf("relabeled line %q does not parse again: %q", got, again)
		}
		m := Merger{MaxSeries: DefaultMaxSeries}
		m.Add("u", []byte(line))
		var buf bytes.Buffer
		m.WriteTo(&buf)
	})
}
