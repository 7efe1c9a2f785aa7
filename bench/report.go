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
	Routes   *RoutesResult   `json:"routes,omitempty"`
	// Tokenizer is our tokenizer against Hugging Face's, per family and prompt size.
	Tokenizer []TokenizerRow `json:"tokenizer,omitempty"`
	// GRPC is the token-aware path against the engine alone and the HTTP text path.
	GRPC *GRPCResult `json:"grpc,omitempty"`
}

// peerKeys are the references a gateway row is divided by.
var peerKeys = []string{"bare", "nginx", "haproxy"}

// Metrics flattens the report into named values, the names baseline gates refer to. Ratios
// are of two runs of the same smgbench invocation.
func (r *Report) Metrics() map[string]float64 { return r.Measured().Values }

// Measured is Metrics with, for every overhead metric, the hypervisor steal of the rows it
// was computed from (the most stolen of them): the gate does not judge a timing the host
// disturbed (gate.go).
func (r *Report) Measured() Measured {
	s := metricSink{Measured{Values: map[string]float64{}, Steal: map[string]float64{}}}
	m := s.Values
	if o := r.Overhead; o != nil {
		for _, kind := range []struct {
			name string
			ms   []Measurement
			cost func(*Measurement) float64
		}{
			{"json", o.JSON, func(x *Measurement) float64 { return x.CPUPerRequestUS }},
			{"sse", o.SSE, func(x *Measurement) float64 { return x.CPUPerEventUS }},
			{"sse_paced", o.SSEPaced, func(x *Measurement) float64 { return x.CPUPerEventUS }},
			{"json_open", o.JSONOpen, func(x *Measurement) float64 { return x.CPUPerRequestUS }},
		} {
			unit := map[string]string{"json": "cpu_us_per_request", "sse": "cpu_us_per_event", "sse_paced": "cpu_us_per_event", "json_open": "cpu_us_per_request"}[kind.name]
			direct := find(kind.ms, "direct")
			for i := range kind.ms {
				x := &kind.ms[i]
				if x.NotInstalled != "" || x.Key == "direct" {
					continue
				}
				s.put("overhead."+kind.name+"."+unit+"."+x.Key, kind.cost(x), x)
				if !strings.HasPrefix(x.Key, "smg-") {
					continue
				}
				for _, peer := range peerKeys {
					if p := find(kind.ms, peer); p != nil && kind.cost(p) > 0 {
						s.put("overhead."+kind.name+".cpu_ratio."+x.Key+"/"+peer, kind.cost(x)/kind.cost(p), x, p)
					}
				}
				if direct != nil && direct.RPS > 0 {
					s.put("overhead."+kind.name+".rps_ratio."+x.Key+"/direct", x.RPS/direct.RPS, x, direct)
				}
				// Against round robin on the same data plane (cache_aware ≤ 1.1×).
				if i := strings.LastIndexByte(x.Key, '-'); !strings.HasSuffix(x.Key, "-round_robin") {
					if rr := find(kind.ms, x.Key[:i]+"-round_robin"); rr != nil && kind.cost(rr) > 0 {
						s.put("overhead."+kind.name+".cpu_ratio."+x.Key+"/"+rr.Key, kind.cost(x)/kind.cost(rr), x, rr)
					}
				}
			}
			if o.PD != nil && (kind.name == "json" || kind.name == "sse") {
				pdMetrics(s, kind.name, unit, o.PD.rows(kind.name), kind.ms, kind.cost)
			}
		}
		latencyMetrics(s, "json_open", "p50", o.JSONOpen, func(x *Measurement) float64 { return x.P50MS })
		latencyMetrics(s, "sse_unloaded", "ttft_p50", o.SSEUnloaded, func(x *Measurement) float64 { return x.TTFTP50MS })
		if sc := o.Syscalls; sc != nil {
			syscallMetrics(s, "json", "per_request", sc.JSON, func(x *Measurement) float64 { return x.SyscallsPerRequest })
			syscallMetrics(s, "sse_paced", "per_event", sc.SSEPaced, func(x *Measurement) float64 { return x.SyscallsPerEvent })
		}
		scalingMetrics(s, o.Scaling)
		tracingMetrics(s, o.Tracing)
	}
	if r.Quality != nil {
		r.Quality.metrics(m)
	}
	if r.Routes != nil {
		r.Routes.metrics(m)
	}
	for _, t := range r.Tokenizer {
		m[fmt.Sprintf("tokenizer.encode.speed_ratio.%s.%dk", t.Family, t.PromptBytes>>10)] = t.Ratio
		m["tokenizer.encode.max_allocs_per_encode"] = max(m["tokenizer.encode.max_allocs_per_encode"], t.AllocsPerEncode)
	}
	if g := r.GRPC; g != nil {
		g.metrics(m)
	}
	if len(r.Micro) > 0 {
		most := 0.0
		for _, x := range r.Micro {
			most = max(most, x.AllocsPerOp)
		}
		m["micro.max_allocs_per_op"] = most
	}
	return s.Measured
}

// metricSink collects the overhead metrics, each with the steal of the rows it came from.
type metricSink struct{ Measured }

// put records metric name = v, computed from rows.
func (s metricSink) put(name string, v float64, rows ...*Measurement) {
	s.Values[name] = v
	steal := 0.0
	for _, r := range rows {
		steal = max(steal, r.StealPct)
	}
	s.Steal[name] = steal
}

// latencyMetrics adds overhead.<kind>.added_<name>_ms.<key> (a proxy's latency over the
// direct run's) and overhead.<kind>.<name>_ratio.<smg key>/<peer> (the whole latency through
// smg over the peer's: ≤ 1 exactly when smg adds no more than the peer).
func latencyMetrics(s metricSink, kind, name string, ms []Measurement, lat func(*Measurement) float64) {
	direct := find(ms, "direct")
	for i := range ms {
		x := &ms[i]
		if x.NotInstalled != "" || x.Key == "direct" {
			continue
		}
		if direct != nil {
			s.put("overhead."+kind+".added_"+name+"_ms."+x.Key, lat(x)-lat(direct), x, direct)
		}
		if !strings.HasPrefix(x.Key, "smg-") {
			continue
		}
		for _, peer := range peerKeys {
			if p := find(ms, peer); p != nil && lat(p) > 0 {
				s.put("overhead."+kind+"."+name+"_ratio."+x.Key+"/"+peer, lat(x)/lat(p), x, p)
			}
		}
	}
}

// syscallMetrics adds overhead.syscalls.<kind>.<unit>.<key> and
// overhead.syscalls.<kind>.ratio.<smg key>/<peer>.
func syscallMetrics(s metricSink, kind, unit string, ms []Measurement, per func(*Measurement) float64) {
	for i := range ms {
		x := &ms[i]
		if x.NotInstalled != "" || per(x) == 0 {
			continue
		}
		s.put("overhead.syscalls."+kind+"."+unit+"."+x.Key, per(x), x)
		if !strings.HasPrefix(x.Key, "smg-") {
			continue
		}
		for _, peer := range peerKeys {
			if p := find(ms, peer); p != nil && per(p) > 0 {
				s.put("overhead.syscalls."+kind+".ratio."+x.Key+"/"+peer, per(x)/per(p), x, p)
			}
		}
	}
}

// scalingRows pairs each proxy's 1-core and 2-core rows, in the order measured.
func scalingRows(ms []Measurement) (keys []string, one, two map[string]*Measurement) {
	one, two = map[string]*Measurement{}, map[string]*Measurement{}
	for i := range ms {
		x := &ms[i]
		if x.NotInstalled != "" {
			continue
		}
		if x.Cores == 1 {
			if one[x.Key] == nil {
				keys = append(keys, x.Key)
			}
			one[x.Key] = x
		} else if x.Cores == 2 {
			two[x.Key] = x
		}
	}
	return keys, one, two
}

// scalingMetrics adds overhead.scaling.rps_ratio.<key> (requests/s on two cores over one)
// and overhead.scaling.cpu_ratio.<key> (CPU per request on two cores over one).
func scalingMetrics(s metricSink, ms []Measurement) {
	keys, one, two := scalingRows(ms)
	for _, k := range keys {
		a, b := one[k], two[k]
		if b == nil {
			continue
		}
		if a.RPS > 0 {
			s.put("overhead.scaling.rps_ratio."+k, b.RPS/a.RPS, a, b)
		}
		if a.CPUPerRequestUS > 0 {
			s.put("overhead.scaling.cpu_ratio."+k, b.CPUPerRequestUS/a.CPUPerRequestUS, a, b)
		}
	}
}

// tracingPairs pairs each untraced gateway row of ms with its traced row.
func tracingPairs(ms []Measurement) (off, on []*Measurement) {
	for i := range ms {
		x := &ms[i]
		if x.NotInstalled != "" || strings.HasSuffix(x.Key, tracedSuffix) {
			continue
		}
		if t := find(ms, x.Key+tracedSuffix); t != nil {
			off, on = append(off, x), append(on, t)
		}
	}
	return off, on
}

// tracingMetrics adds overhead.tracing.cpu_ratio.<key> (CPU per request traced over
// untraced) and overhead.tracing.rps_ratio.<key>.
func tracingMetrics(s metricSink, ms []Measurement) {
	off, on := tracingPairs(ms)
	for i, a := range off {
		b := on[i]
		if a.CPUPerRequestUS > 0 {
			s.put("overhead.tracing.cpu_ratio."+a.Key, b.CPUPerRequestUS/a.CPUPerRequestUS, a, b)
		}
		if a.RPS > 0 {
			s.put("overhead.tracing.rps_ratio."+a.Key, b.RPS/a.RPS, a, b)
		}
	}
}

// tracingTable renders the tracing rows: each gateway untraced and traced.
func tracingTable(ms []Measurement) string {
	var sb strings.Builder
	sb.WriteString("| gateway | req/s off | req/s traced | × | CPU µs/req off | CPU µs/req traced | × |\n|---|---|---|---|---|---|---|\n")
	off, on := tracingPairs(ms)
	for i, a := range off {
		b := on[i]
		fmt.Fprintf(&sb, "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f |\n", a.Name, a.RPS, b.RPS, b.RPS/a.RPS, a.CPUPerRequestUS, b.CPUPerRequestUS, b.CPUPerRequestUS/a.CPUPerRequestUS)
	}
	return sb.String()
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
func pdMetrics(s metricSink, kind, unit string, pd, regular []Measurement, cost func(*Measurement) float64) {
	direct := find(pd, "direct")
	for i := range pd {
		x := &pd[i]
		if x.Key == "direct" {
			continue
		}
		prefix := "overhead.pd." + kind + "."
		s.put(prefix+unit+"."+x.Key, cost(x), x)
		if direct != nil && direct.RPS > 0 {
			s.put(prefix+"rps_ratio."+x.Key+"/direct", x.RPS/direct.RPS, x, direct)
		}
		for j := range regular {
			r := &regular[j]
			if strings.HasPrefix(r.Key, "smg-") && r.NotInstalled == "" && cost(r) > 0 {
				s.put(prefix+"cpu_ratio."+x.Key+"/regular-"+r.Key, cost(x)/cost(r), x, r)
			}
		}
	}
}

// regularSMG is the regular smg row a PD row (key smg-<policy>) is compared with in the
// table: the same policy if it was measured (smg-evloop-<policy>), else the first smg row.
func regularSMG(regular []Measurement, key string) *Measurement {
	if r := find(regular, "smg-evloop-"+strings.TrimPrefix(key, "smg-")); r != nil {
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
				policy := strings.TrimPrefix(strings.TrimPrefix(r.Key, "smg-"), "evloop-")
				reg = fmt.Sprintf("%.1f (%s)", b, policy)
				if stream {
					reg = fmt.Sprintf("%.2f (%s)", b, policy)
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
	if r.Overhead != nil {
		sb.WriteString(r.Overhead.Table())
	}
	if len(r.Micro) > 0 {
		sb.WriteString(microTable(r.Micro))
	}
	if r.Quality != nil {
		sb.WriteString(r.Quality.Table())
	}
	if r.Routes != nil {
		sb.WriteString(r.Routes.Table())
	}
	if r.GRPC != nil {
		sb.WriteString(r.GRPC.Table())
	}
	if len(r.Tokenizer) > 0 {
		sb.WriteString(tokenizerTable(r.Tokenizer))
	}
	return sb.String()
}

// Table renders the overhead suite's section of the report: one table per kind of run.
func (o *OverheadResult) Table() string {
	var sb strings.Builder
	c := o.Config
	fmt.Fprintf(&sb, "## 1. Overhead (null backend)\n\n%d mock workers (instant, gnet) and loadgen on core %d; each proxy alone on core %d "+
		"(taskset, GOMAXPROCS=1 / one worker process); closed loop, %d connections, %v per run after %d warm-up requests; "+
		"%d rounds with the proxies alternating, the round with the least proxy CPU kept. Proxy CPU from /proc/<pid>/task/*/schedstat (ns), warm-up included.\n\n",
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
	if len(o.JSONOpen) > 0 {
		fmt.Fprintf(&sb, "\n### Open loop (%g req/s, evenly spaced, %v per run; %d round(s), the least proxy CPU kept)\n\n", c.OpenLoopRate, c.OpenLoopDuration, c.OpenLoopRounds)
		sb.WriteString(overheadJSONTable(o.JSONOpen))
	}
	if len(o.SSEUnloaded) > 0 {
		fmt.Fprintf(&sb, "\n### Unloaded paced stream (one stream at a time, %d events %g ms apart; %v per run, %d round(s), the lowest TTFT p50 kept)\n\n",
			c.UnloadedTokens, c.PacedIntervalMS, c.UnloadedDuration, c.UnloadedRounds)
		sb.WriteString(overheadSSETable(o.SSEUnloaded, true))
	}
	if sc := o.Syscalls; sc != nil {
		sb.WriteString("\n### System calls (perf stat -e raw_syscalls:sys_enter on the proxy for the whole load, warm-up included)\n\n")
		sb.WriteString(syscallTable(sc))
	}
	if len(o.Scaling) > 0 {
		fmt.Fprintf(&sb, "\n### Scaling: one core against two (JSON closed loop, %d connections; the second core is the load core, shared with loadgen and the mocks)\n\n", c.Connections)
		sb.WriteString(scalingTable(o.Scaling))
	}
	if len(o.Tracing) > 0 {
		fmt.Fprintf(&sb, "\n### Tracing: smg with `--enable-trace --trace-sample-ratio 1` against without (JSON closed loop, %d connections; spans exported over OTLP/gRPC to a receiver in smgbench)\n\n", c.Connections)
		sb.WriteString(tracingTable(o.Tracing))
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
	sb.WriteString(stealNote(o))
	sb.WriteString("\n")
	return sb.String()
}

// microTable renders the hot-path benchmarks' section.
func microTable(micro []MicroResult) string {
	var sb strings.Builder
	sb.WriteString("## 2. Micro (hot path; any allocs/op > 0 fails the gate)\n\n| package | benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|---|\n")
	for _, x := range micro {
		allocs := "missing"
		if x.HasAllocs {
			allocs = fmt.Sprintf("%g", x.AllocsPerOp)
		}
		fmt.Fprintf(&sb, "| %s | %s | %.1f | %g | %s |\n", strings.TrimPrefix(x.Package, "github.com/smg-go/smg/"), x.Name, x.NsPerOp, x.BytesPerOp, allocs)
	}
	sb.WriteString("\n")
	return sb.String()
}

// tokenizerTable renders the tokenizer's section: ours against Hugging Face's.
func tokenizerTable(rows []TokenizerRow) string {
	var sb strings.Builder
	sb.WriteString("## Tokenizer (encode MB per CPU-second, ours against Hugging Face tokenizers on the same prompts)\n\n" +
		"| family | prompt | prompts | ours | Hugging Face | ratio | allocs/encode |\n|---|---|---|---|---|---|---|\n")
	for _, t := range rows {
		fmt.Fprintf(&sb, "| %s | %d KB | %d | %.2f | %.2f (%s) | %.2fx | %g |\n",
			t.Family, t.PromptBytes>>10, t.Prompts, t.OursMBPerS, t.HFMBPerS, t.HFMode, t.Ratio, t.AllocsPerEncode)
	}
	sb.WriteString("\n")
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

// syscallTable renders the system-call rows: per JSON request and per paced SSE event.
func syscallTable(sc *SyscallRows) string {
	var sb strings.Builder
	sb.WriteString("| proxy | calls / JSON request | vs nginx | calls / paced SSE event | vs nginx |\n|---|---|---|---|---|\n")
	ratio := func(ms []Measurement, x *Measurement, per func(*Measurement) float64) string {
		if p := find(ms, "nginx"); p != nil && per(p) > 0 && x != nil && per(x) > 0 && strings.HasPrefix(x.Key, "smg-") {
			return fmt.Sprintf("%.2f", per(x)/per(p))
		}
		return "–"
	}
	cell := func(ms []Measurement, key string, per func(*Measurement) float64) (string, *Measurement) {
		for i := range ms {
			if ms[i].Key == key {
				if ms[i].NotInstalled != "" {
					return ms[i].NotInstalled, nil
				}
				return fmt.Sprintf("%.2f", per(&ms[i])), &ms[i]
			}
		}
		return "–", nil
	}
	perReq := func(x *Measurement) float64 { return x.SyscallsPerRequest }
	perEvent := func(x *Measurement) float64 { return x.SyscallsPerEvent }
	for _, x := range sc.JSON {
		j, jx := cell(sc.JSON, x.Key, perReq)
		e, ex := cell(sc.SSEPaced, x.Key, perEvent)
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", x.Name, j, ratio(sc.JSON, jx, perReq), e, ratio(sc.SSEPaced, ex, perEvent))
	}
	return sb.String()
}

// scalingTable renders the scaling rows: each proxy on one core and on two.
func scalingTable(ms []Measurement) string {
	var sb strings.Builder
	sb.WriteString("| proxy | req/s, 1 core | req/s, 2 cores | ×  | CPU µs/req, 1 core | CPU µs/req, 2 cores | × |\n|---|---|---|---|---|---|---|\n")
	keys, one, two := scalingRows(ms)
	for _, k := range keys {
		a, b := one[k], two[k]
		if b == nil {
			fmt.Fprintf(&sb, "| %s | %.0f | – | – | %.1f | – | – |\n", a.Name, a.RPS, a.CPUPerRequestUS)
			continue
		}
		fmt.Fprintf(&sb, "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f |\n", a.Name, a.RPS, b.RPS, b.RPS/a.RPS, a.CPUPerRequestUS, b.CPUPerRequestUS, b.CPUPerRequestUS/a.CPUPerRequestUS)
	}
	for _, x := range ms {
		if x.NotInstalled != "" && x.Cores == 1 {
			fmt.Fprintf(&sb, "| %s | %s | | | | | |\n", x.Name, x.NotInstalled)
		}
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

// stealNote says how much time the hypervisor stole from the measured cores during the
// rows kept, and names the rows past stealLimit: their ratios measured the machine.
func stealNote(o *OverheadResult) string {
	var rows []string
	worst := 0.0
	add := func(table string, ms []Measurement) {
		for _, m := range ms {
			if m.NotInstalled != "" {
				continue
			}
			worst = max(worst, m.StealPct)
			if m.StealPct > stealLimit {
				rows = append(rows, fmt.Sprintf("%s: %s %.0f%%", table, m.Name, m.StealPct))
			}
		}
	}
	add("JSON", o.JSON)
	add("SSE", o.SSE)
	add("paced SSE", o.SSEPaced)
	add("open loop", o.JSONOpen)
	add("unloaded", o.SSEUnloaded)
	add("scaling", o.Scaling)
	add("tracing", o.Tracing)
	if sc := o.Syscalls; sc != nil {
		add("syscalls JSON", sc.JSON)
		add("syscalls paced SSE", sc.SSEPaced)
	}
	if pd := o.PD; pd != nil {
		add("PD JSON", pd.JSON)
		add("PD SSE", pd.SSE)
	}
	note := fmt.Sprintf("\nHypervisor steal on the proxy and load cores (/proc/stat) during the rows kept: at most %.1f%%.", worst)
	if len(rows) > 0 {
		note += fmt.Sprintf(" Rows past %d%%, whose timings measured the machine rather than the proxy: %s.", stealLimit, strings.Join(rows, "; "))
	}
	return note + "\n"
}
