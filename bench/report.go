package bench

import (
	"fmt"
	"strings"
)

// Report is everything one smgbench run measured; any suite may be absent.
type Report struct {
	Overhead *OverheadResult `json:"overhead,omitempty"`
	Micro    []MicroResult   `json:"micro,omitempty"`
	Quality  *QualityResult  `json:"quality,omitempty"`
}

// peerKeys are the references a gateway row is divided by.
var peerKeys = []string{"bare", "nginx", "haproxy"}

// Metrics flattens the report into named values, the names baseline gates refer to. Ratios
// are of two runs of the same smgbench invocation.
func (r *Report) Metrics() map[string]float64 {
	m := map[string]float64{}
	if o := r.Overhead; o != nil {
		for _, kind := range []struct {
			name string
			ms   []Measurement
			cost func(*Measurement) float64
		}{
			{"json", o.JSON, func(x *Measurement) float64 { return x.CPUPerRequestUS }},
			{"sse", o.SSE, func(x *Measurement) float64 { return x.CPUPerEventUS }},
			{"sse_paced", o.SSEPaced, func(x *Measurement) float64 { return x.CPUPerEventUS }},
		} {
			unit := map[string]string{"json": "cpu_us_per_request", "sse": "cpu_us_per_event", "sse_paced": "cpu_us_per_event"}[kind.name]
			direct := find(kind.ms, "direct")
			for i := range kind.ms {
				x := &kind.ms[i]
				if x.NotInstalled != "" || x.Key == "direct" {
					continue
				}
				m["overhead."+kind.name+"."+unit+"."+x.Key] = kind.cost(x)
				if !strings.HasPrefix(x.Key, "smg-") {
					continue
				}
				for _, peer := range peerKeys {
					if p := find(kind.ms, peer); p != nil && kind.cost(p) > 0 {
						m["overhead."+kind.name+".cpu_ratio."+x.Key+"/"+peer] = kind.cost(x) / kind.cost(p)
					}
				}
				if direct != nil && direct.RPS > 0 {
					m["overhead."+kind.name+".rps_ratio."+x.Key+"/direct"] = x.RPS / direct.RPS
				}
			}
			if o.PD != nil && kind.name != "sse_paced" {
				pdMetrics(m, kind.name, unit, o.PD.rows(kind.name), kind.ms, kind.cost)
			}
		}
	}
	if r.Quality != nil {
		r.Quality.metrics(m)
	}
	if len(r.Micro) > 0 {
		most := 0.0
		for _, x := range r.Micro {
			most = max(most, x.AllocsPerOp)
		}
		m["micro.max_allocs_per_op"] = most
	}
	return m
}

// rows returns the PD measurements of kind "json" or "sse".
func (p *PDOverhead) rows(kind string) []Measurement {
	if kind == "sse" {
		return p.SSE
	}
	return p.JSON
}

// pdMetrics adds the PD rows' metrics: overhead.pd.<kind>.<unit>.<key> (the gateway's CPU),
// overhead.pd.<kind>.rps_ratio.<key>/direct (against loadgen straight to the PD mocks) and
// overhead.pd.<kind>.cpu_ratio.<key>/regular-<smg key> (against each regular smg row of the
// same run: a PD request is two upstream requests, so about 2× is the expectation).
func pdMetrics(m map[string]float64, kind, unit string, pd, regular []Measurement, cost func(*Measurement) float64) {
	direct := find(pd, "direct")
	for i := range pd {
		x := &pd[i]
		if x.Key == "direct" {
			continue
		}
		prefix := "overhead.pd." + kind + "."
		m[prefix+unit+"."+x.Key] = cost(x)
		if direct != nil && direct.RPS > 0 {
			m[prefix+"rps_ratio."+x.Key+"/direct"] = x.RPS / direct.RPS
		}
		for j := range regular {
			r := &regular[j]
			if strings.HasPrefix(r.Key, "smg-") && r.NotInstalled == "" && cost(r) > 0 {
				m[prefix+"cpu_ratio."+x.Key+"/regular-"+r.Key] = cost(x) / cost(r)
			}
		}
	}
}

// regularSMG is the regular smg row a PD row is compared with in the table: the same
// policy if it was measured, else the first smg row.
func regularSMG(regular []Measurement, key string) *Measurement {
	if r := find(regular, key); r != nil {
		return r
	}
	for i := range regular {
		if strings.HasPrefix(regular[i].Key, "smg-") && regular[i].NotInstalled == "" {
			return &regular[i]
		}
	}
	return nil
}

// pdTable renders the PD rows of one kind, each gateway row beside the regular smg row.
func pdTable(pd, regular []Measurement, stream bool) string {
	var sb strings.Builder
	if stream {
		sb.WriteString("| run | streams/s | TTFT p50 ms | added TTFT p50 ms | e2e p99 ms | proxy CPU µs/stream | proxy CPU µs/event | regular smg µs/event | PD ÷ regular |\n|---|---|---|---|---|---|---|---|---|\n")
	} else {
		sb.WriteString("| run | req/s | p50 ms | p99 ms | added p50 ms | added p99 ms | proxy CPU µs/req | regular smg µs/req | PD ÷ regular |\n|---|---|---|---|---|---|---|---|---|\n")
	}
	direct := find(pd, "direct")
	for i := range pd {
		x := &pd[i]
		cpu, perEvent, reg, ratio := "–", "–", "–", "–"
		addP50, addP99 := "–", "–"
		if x.Key != "direct" {
			cpu, perEvent = fmt.Sprintf("%.1f", x.CPUPerRequestUS), fmt.Sprintf("%.2f", x.CPUPerEventUS)
			if direct != nil {
				addP50, addP99 = fmt.Sprintf("%+.3f", x.P50MS-direct.P50MS), fmt.Sprintf("%+.3f", x.P99MS-direct.P99MS)
				if stream {
					addP50 = fmt.Sprintf("%+.3f", x.TTFTP50MS-direct.TTFTP50MS)
				}
			}
			if r := regularSMG(regular, x.Key); r != nil {
				a, b := x.CPUPerRequestUS, r.CPUPerRequestUS
				if stream {
					a, b = x.CPUPerEventUS, r.CPUPerEventUS
				}
				reg = fmt.Sprintf("%.1f (%s)", b, strings.TrimPrefix(r.Key, "smg-"))
				if stream {
					reg = fmt.Sprintf("%.2f (%s)", b, strings.TrimPrefix(r.Key, "smg-"))
				}
				if b > 0 {
					ratio = fmt.Sprintf("%.2f", a/b)
				}
			}
		}
		if stream {
			fmt.Fprintf(&sb, "| %s | %.0f | %.3f | %s | %.3f | %s | %s | %s | %s |\n", x.Name, x.RPS, x.TTFTP50MS, addP50, x.P99MS, cpu, perEvent, reg, ratio)
		} else {
			fmt.Fprintf(&sb, "| %s | %.0f | %.3f | %.3f | %s | %s | %s | %s | %s |\n", x.Name, x.RPS, x.P50MS, x.P99MS, addP50, addP99, cpu, reg, ratio)
		}
	}
	return sb.String()
}

// Table renders every suite that ran as Markdown: the `make bench` table.
func (r *Report) Table() string {
	var sb strings.Builder
	if o := r.Overhead; o != nil {
		c := o.Config
		fmt.Fprintf(&sb, "## 1. Overhead (null backend)\n\n%d mock workers (instant, gnet) and loadgen on core %d; each proxy alone on core %d "+
			"(taskset, GOMAXPROCS=1 / one worker process); closed loop, %d connections, %v per run after %d warm-up requests; "+
			"%d rounds with the proxies alternating, the round with the least proxy CPU kept. Proxy CPU from /proc/<pid>/stat, warm-up included.\n\n",
			c.Workers, c.LoadCore, c.ProxyCore, c.Connections, c.Duration, c.Warmup, c.Rounds)
		sb.WriteString("### Small JSON answer (raw workload, non-streamed)\n\n")
		sb.WriteString(overheadJSONTable(o.JSON))
		if len(o.SSE) > 0 {
			fmt.Fprintf(&sb, "\n### SSE relay (%d events per stream, %g ms apart at the mock)\n\n", c.StreamTokens, c.StreamIntervalMS)
			sb.WriteString(overheadSSETable(o.SSE, false))
		}
		if len(o.SSEPaced) > 0 {
			fmt.Fprintf(&sb, "\n### SSE relay with paced tokens (%d events per stream, %g ms apart at the mock)\n\n"+
				"A fleet of its own writing token i at start + i × %g ms, as an engine's inter-token latency spaces them; closed loop, %d connections, "+
				"%v per run after %d warm-up streams, %d round(s), the least proxy CPU kept. The direct row's TTFT and ITL near %g ms show that the "+
				"load core kept pace.\n\n",
				c.StreamTokens, c.PacedIntervalMS, c.PacedIntervalMS, c.PacedConnections, c.PacedDuration, c.PacedWarmup, c.PacedRounds, c.PacedIntervalMS)
			sb.WriteString(overheadSSETable(o.SSEPaced, true))
		}
		if pd := o.PD; pd != nil && (len(pd.JSON) > 0 || len(pd.SSE) > 0) {
			fmt.Fprintf(&sb, "\n### PD disaggregation (SGLang bootstrap; 1 prefill + 1 decode mock; %d round(s))\n\n"+
				"loadgen straight to both mocks (`--pd-prefill`, `--pd-decode`), then through `smg --pd-disaggregation --policy %s`. "+
				"Each PD request is two upstream requests for smg: compare its CPU with the regular smg row of this run.\n\n", c.PDRounds, c.PDPolicy)
			if len(pd.JSON) > 0 {
				sb.WriteString("Small JSON answer:\n\n")
				sb.WriteString(pdTable(pd.JSON, o.JSON, false))
			}
			if len(pd.SSE) > 0 {
				fmt.Fprintf(&sb, "\nSSE (%d events per stream from the decode):\n\n", c.StreamTokens)
				sb.WriteString(pdTable(pd.SSE, o.SSE, true))
			}
		}
		sb.WriteString("\n")
	}
	if len(r.Micro) > 0 {
		sb.WriteString("## 2. Micro (hot path; any allocs/op > 0 fails the gate)\n\n| package | benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|---|\n")
		for _, x := range r.Micro {
			allocs := "missing"
			if x.HasAllocs {
				allocs = fmt.Sprintf("%g", x.AllocsPerOp)
			}
			fmt.Fprintf(&sb, "| %s | %s | %.1f | %g | %s |\n", strings.TrimPrefix(x.Package, "github.com/smg-go/smg/"), x.Name, x.NsPerOp, x.BytesPerOp, allocs)
		}
		sb.WriteString("\n")
	}
	if r.Quality != nil {
		sb.WriteString(r.Quality.Table())
	}
	return sb.String()
}

func overheadJSONTable(ms []Measurement) string {
	var sb strings.Builder
	sb.WriteString("| run | req/s | p50 ms | p99 ms | added p50 ms | added p99 ms | proxy CPU µs/req | CPU s / 10k req | vs bare | vs nginx | vs HAProxy |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	direct := find(ms, "direct")
	for i := range ms {
		x := &ms[i]
		if x.NotInstalled != "" {
			fmt.Fprintf(&sb, "| %s | %s | | | | | | | | | |\n", x.Name, x.NotInstalled)
			continue
		}
		addP50, addP99, cpu, per10k := "–", "–", "–", "–"
		if x.Key != "direct" {
			if direct != nil {
				addP50, addP99 = fmt.Sprintf("%+.3f", x.P50MS-direct.P50MS), fmt.Sprintf("%+.3f", x.P99MS-direct.P99MS)
			}
			cpu, per10k = fmt.Sprintf("%.1f", x.CPUPerRequestUS), fmt.Sprintf("%.3f", x.CPUPerRequestUS/100)
		}
		fmt.Fprintf(&sb, "| %s | %.0f | %.3f | %.3f | %s | %s | %s | %s | %s |\n", x.Name, x.RPS, x.P50MS, x.P99MS, addP50, addP99, cpu, per10k,
			strings.Join(peerRatios(ms, x, func(m *Measurement) float64 { return m.CPUPerRequestUS }), " | "))
	}
	return sb.String()
}

// overheadSSETable renders the SSE rows. The paced rows also show the inter-token latency
// loadgen saw, and compare with the streaming peers only (the bare proxy does not stream).
func overheadSSETable(ms []Measurement, paced bool) string {
	var sb strings.Builder
	itlHead, itlSep, peers, columns := "", "", []string(nil), 10
	if paced {
		itlHead, itlSep, peers, columns = " ITL p50 ms | ITL p99 ms |", "---|---|", []string{"nginx", "haproxy"}, 11
	}
	sb.WriteString("| run | streams/s | TTFT p50 ms | added TTFT p50 ms |" + itlHead + " e2e p99 ms | proxy CPU µs/stream | proxy CPU µs/event |")
	if !paced {
		sb.WriteString(" vs bare |")
	}
	sb.WriteString(" vs nginx | vs HAProxy |\n|---|---|---|---|" + itlSep + "---|---|---|---|---|")
	if !paced {
		sb.WriteString("---|")
	}
	sb.WriteString("\n")
	direct := find(ms, "direct")
	for i := range ms {
		x := &ms[i]
		if x.NotInstalled != "" {
			fmt.Fprintf(&sb, "| %s | %s |%s\n", x.Name, x.NotInstalled, strings.Repeat(" |", columns-2))
			continue
		}
		added, perStream, perEvent := "–", "–", "–"
		if x.Key != "direct" {
			if direct != nil {
				added = fmt.Sprintf("%+.3f", x.TTFTP50MS-direct.TTFTP50MS)
			}
			perStream, perEvent = fmt.Sprintf("%.1f", x.CPUPerRequestUS), fmt.Sprintf("%.2f", x.CPUPerEventUS)
		}
		itl := ""
		if paced {
			itl = fmt.Sprintf(" %.3f | %.3f |", x.ITLP50MS, x.ITLP99MS)
		}
		fmt.Fprintf(&sb, "| %s | %.0f | %.3f | %s |%s %.3f | %s | %s | %s |\n", x.Name, x.RPS, x.TTFTP50MS, added, itl, x.P99MS, perStream, perEvent,
			strings.Join(peerRatios(ms, x, func(m *Measurement) float64 { return m.CPUPerEventUS }, peers...), " | "))
	}
	return sb.String()
}

// peerRatios is x's cost over each peer's (default peerKeys), "–" where either is missing or
// x is not a gateway.
func peerRatios(ms []Measurement, x *Measurement, cost func(*Measurement) float64, peers ...string) []string {
	if len(peers) == 0 {
		peers = peerKeys
	}
	out := make([]string, len(peers))
	for i, peer := range peers {
		out[i] = "–"
		if !strings.HasPrefix(x.Key, "smg-") {
			continue
		}
		if p := find(ms, peer); p != nil && cost(p) > 0 {
			out[i] = fmt.Sprintf("%.2f", cost(x)/cost(p))
		}
	}
	return out
}

// MetricsList renders the metrics, one per line, sorted: the names a baseline can gate.
func MetricsList(m map[string]float64) string {
	var sb strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&sb, "%s = %.4f\n", k, m[k])
	}
	return sb.String()
}
