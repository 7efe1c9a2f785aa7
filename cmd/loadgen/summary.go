package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/smg-go/smg/loadgen"
)

// printSummary prints the result in bench_serving's layout.
func printSummary(w io.Writer, r *loadgen.Result) {
	line := func(name string, format string, v any) { fmt.Fprintf(w, "%-40s"+format+"\n", name+":", v) }
	fmt.Fprintln(w, "============ Serving Benchmark Result ============")
	line("Workload", "%s", r.Config.Workload)
	line("Successful requests", "%d", r.Completed)
	line("Failed requests", "%d", r.Failed)
	line("Benchmark duration (s)", "%.2f", r.DurationS)
	line("Total input tokens", "%d", r.TotalInputTokens)
	line("Total generated tokens", "%d", r.TotalOutputTokens)
	line("Request throughput (req/s)", "%.2f", r.RequestThroughput)
	line("Input token throughput (tok/s)", "%.2f", r.InputThroughput)
	line("Output token throughput (tok/s)", "%.2f", r.OutputThroughput)
	line("Prefix cache hit rate", "%.2f%%", 100*r.CacheHitRate)
	line("Concurrency", "%.2f", r.Concurrency)
	line("loadgen CPU per request (us)", "%.1f", r.ClientCPUPerRequestUS)
	for _, m := range []struct {
		title string
		s     loadgen.Summary
	}{
		{"Time to First Token", r.TTFT}, {"Time per Output Token (excl. 1st token)", r.TPOT},
		{"Inter-token Latency", r.ITL}, {"End-to-End Latency", r.E2E},
	} {
		if m.s.Count == 0 {
			continue
		}
		fmt.Fprintf(w, "%s\n", centered(m.title))
		line("Mean (ms)", "%.2f", m.s.Mean)
		line("Median (ms)", "%.2f", m.s.Median)
		line("P90 (ms)", "%.2f", m.s.P90)
		line("P99 (ms)", "%.2f", m.s.P99)
	}
	if r.ArrivalLag.Count > 0 {
		fmt.Fprintf(w, "%s\n", centered("Open-loop arrival lag"))
		line("Mean (ms)", "%.2f", r.ArrivalLag.Mean)
		line("P99 (ms)", "%.2f", r.ArrivalLag.P99)
		line("Max (ms)", "%.2f", r.ArrivalLag.Max)
	}
	fmt.Fprintf(w, "%s\n", centered("Requests by status"))
	for _, k := range slices.Sorted(maps.Keys(r.StatusCounts)) {
		line(k, "%d", r.StatusCounts[k])
	}
	if len(r.ErrorExamples) > 0 {
		fmt.Fprintf(w, "%s\n", centered("First error by status"))
		for _, k := range slices.Sorted(maps.Keys(r.ErrorExamples)) {
			fmt.Fprintf(w, "%s: %s\n", k, r.ErrorExamples[k])
		}
	}
	if len(r.Workers) > 0 {
		fmt.Fprintf(w, "%s\n", centered("Requests by worker"))
		for _, k := range slices.Sorted(maps.Keys(r.Workers)) {
			line(k, "%d", r.Workers[k])
		}
	}
	fmt.Fprintln(w, "==================================================")
}

func centered(title string) string {
	const width = 50
	pad := max(width-len(title)-2, 0)
	left := pad / 2
	return fmt.Sprintf("%s %s %s", dashes(left), title, dashes(pad-left))
}

func dashes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}
