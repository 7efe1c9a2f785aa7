package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// SGLang's published result for its cache-aware router against round robin (the SGLang v0.4
// release blog, "Cache-Aware Load Balancer"): up to 1.9× throughput and 3.8× cache hit rate.
const (
	SGLangThroughputRatio = 1.9
	SGLangHitRateRatio    = 3.8
)

// ratio is a / b, and false when b is not positive (no ratio to report).
func ratio(a, b float64) (float64, bool) {
	if !(b > 0) {
		return 0, false
	}
	return a / b, true
}

// find returns the row of policy (and repeat, for load rows), or nil.
func findRow(rows []QualityRow, policy string, repeat int) *QualityRow {
	for i := range rows {
		if rows[i].Policy == policy && rows[i].Repeat == repeat {
			return &rows[i]
		}
	}
	return nil
}

// loadPolicies returns the load rows' policies in first-seen order, and the repeats seen.
func loadPolicies(rows []QualityRow) (policies []string, repeats int) {
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Policy] {
			seen[r.Policy] = true
			policies = append(policies, r.Policy)
		}
		repeats = max(repeats, r.Repeat)
	}
	return policies, repeats
}

// metrics adds the suite's named values to m (docs/benchmarks.md, "The gate"). Per case c and
// policy p, against round robin measured the same way in the same run:
//
//	quality.<c>.sat.capacity.<p>                               requests/s of model time
//	quality.<c>.sat.capacity_ratio.<p>/round_robin
//	quality.<c>.sat.cache_hit_ratio.<p>/round_robin
//	quality.<c>.sat.ttft_p99_ratio.<p>/round_robin
//	quality.<c>.sat.busiest_share.<p>
//	quality.<c>.load.ttft_p99_ratio.<p>/round_robin.r<k>      repeat k against repeat k
//	quality.<c>.load.ttft_p99_ratio_max.<p>/round_robin       the worst repeat
//	quality.<c>.load.ttft_p99_ratio_median.<p>/round_robin    the median repeat (robust to one stall)
//	quality.<c>.load.ttft_p50_ratio_max.<p>/round_robin
//	quality.<c>.load.cache_hit_ratio_min.<p>/round_robin
//	quality.<c>.load.throughput_ratio_min.<p>/round_robin      completed requests/s
//	quality.<c>.load.completed_of_offered_min                  the least any load row completed ÷ its offered rate
//
// the same ratios of EventsPolicy against cache_aware (event mode against the approximate
// tree) where a case has both, and for the rows that foretell hits (EventsPolicy, and
// cache_aware's on gRPC engines)
//
//	quality.<c>.sat.hit_gap_pp.<p>                             |predicted − engine-reported hit|, points
//	quality.<c>.load.hit_gap_pp_max.<p>                        the worst repeat
//
// and quality.max_cpu_cores, the most CPU any row's own processes used (the machine check).
func (q *QualityResult) metrics(m map[string]float64) {
	most := 0.0
	for _, c := range q.Cases {
		pre := "quality." + c.Case.Name + "."
		for i := range c.Saturation {
			p := &c.Saturation[i]
			most = max(most, p.CPUCores)
			m[pre+"sat.capacity."+p.Policy] = p.Capacity
			m[pre+"sat.busiest_share."+p.Policy] = p.BusiestShare
			if p.foretells() {
				m[pre+"sat.hit_gap_pp."+p.Policy] = p.hitGapPoints()
			}
			satRatios(m, pre, c.Saturation, p, referencePolicy)
			if p.Policy == EventsPolicy {
				satRatios(m, pre, c.Saturation, p, "cache_aware")
			}
		}
		policies, repeats := loadPolicies(c.Load)
		reached := math.Inf(1)
		gaps := map[string]float64{}
		for _, r := range c.Load {
			most = max(most, r.CPUCores)
			if v, ok := ratio(r.Capacity, r.OfferedRate); ok {
				reached = min(reached, v)
			}
			if r.foretells() {
				gaps[r.Policy] = max(gaps[r.Policy], r.hitGapPoints())
			}
		}
		// Did the case run at the load it offered? Run L1's heterogeneous rows reported 0.81.
		if !math.IsInf(reached, 1) {
			m[pre+"load.completed_of_offered_min"] = reached
		}
		for p, gap := range gaps {
			m[pre+"load.hit_gap_pp_max."+p] = gap
		}
		for _, policy := range policies {
			if policy == referencePolicy {
				continue
			}
			loadRatios(m, pre, c.Load, policy, referencePolicy, repeats)
			if policy == EventsPolicy {
				loadRatios(m, pre, c.Load, policy, "cache_aware", repeats)
			}
		}
	}
	if len(q.Cases) > 0 {
		m["quality.max_cpu_cores"] = most
	}
}

// foretells reports whether the row has the hit its gateways foretold: event mode's, or the
// token tree's on gRPC engines (readHits).
func (row *QualityRow) foretells() bool {
	return row.Policy == EventsPolicy || row.PredictedHitRate > 0
}

// hitGapPoints is the distance between the hit the gateways foretold and the engines' own, in
// percentage points.
func (row *QualityRow) hitGapPoints() float64 {
	return math.Abs(row.PredictedHitRate-row.EngineHitRate) * 100
}

// satRatios adds saturation row p's ratios to the saturation row of ref, when there is one.
func satRatios(m map[string]float64, pre string, rows []QualityRow, p *QualityRow, ref string) {
	r := findRow(rows, ref, 0)
	if r == nil || p.Policy == ref {
		return
	}
	suffix := "." + p.Policy + "/" + ref
	for _, x := range []struct {
		name string
		a, b float64
	}{
		{"capacity_ratio", p.Capacity, r.Capacity},
		{"cache_hit_ratio", p.CacheHitRate, r.CacheHitRate},
		{"ttft_p99_ratio", p.TTFTP99MS, r.TTFTP99MS},
	} {
		if v, ok := ratio(x.a, x.b); ok {
			m[pre+"sat."+x.name+suffix] = v
		}
	}
}

// loadRatios adds the load rows' ratios of policy to ref, repeat against repeat.
func loadRatios(m map[string]float64, pre string, rows []QualityRow, policy, ref string, repeats int) {
	suffix := "." + policy + "/" + ref
	type agg struct {
		name  string
		worst func(a, b float64) float64
		of    func(*QualityRow) float64
		v     float64
		n     int
	}
	hi := func(a, b float64) float64 { return max(a, b) }
	lo := func(a, b float64) float64 { return min(a, b) }
	aggs := []*agg{
		{name: "ttft_p99_ratio_max", worst: hi, of: func(r *QualityRow) float64 { return r.TTFTP99MS }},
		{name: "ttft_p50_ratio_max", worst: hi, of: func(r *QualityRow) float64 { return r.TTFTP50MS }},
		{name: "cache_hit_ratio_min", worst: lo, of: func(r *QualityRow) float64 { return r.CacheHitRate }},
		{name: "throughput_ratio_min", worst: lo, of: func(r *QualityRow) float64 { return r.Capacity }},
	}
	var p99s []float64
	for rep := 1; rep <= repeats; rep++ {
		p, r := findRow(rows, policy, rep), findRow(rows, ref, rep)
		if p == nil || r == nil {
			continue
		}
		if v, ok := ratio(p.TTFTP99MS, r.TTFTP99MS); ok {
			m[fmt.Sprintf("%sload.ttft_p99_ratio%s.r%d", pre, suffix, rep)] = v
			p99s = append(p99s, v)
		}
		for _, a := range aggs {
			if v, ok := ratio(a.of(p), a.of(r)); ok {
				if a.n == 0 {
					a.v = v
				}
				a.v = a.worst(a.v, v)
				a.n++
			}
		}
	}
	for _, a := range aggs {
		if a.n > 0 {
			m[pre+"load."+a.name+suffix] = a.v
		}
	}
	if len(p99s) > 0 {
		m[pre+"load.ttft_p99_ratio_median"+suffix] = median(p99s)
	}
}

// Table renders the suite as Markdown: per case the saturation rows, the load rows and their
// ratios to round robin; then cache_aware beside SGLang's published ratios.
func (q *QualityResult) Table() string {
	c := q.Config
	var sb strings.Builder
	fmt.Fprintf(&sb, "## 3. Routing quality (engine-mode mocks)\n\n%d engine-mode mock workers (KV %d tokens each) behind smg, a fresh fleet and gateway per row; "+
		"rates, TTFT and TPOT in model time (wall clock × the row's time scale); the gateway polls loads every %g s of model time. "+
		"Saturation: a closed loop, capacity = completed requests per second over the last %.0f%% of each %v run. "+
		"Load: an open loop (Poisson) at %.0f%% of round robin's capacity, %v per row, %d repeat(s), each after %g s (model) of warm-up at the same rate; "+
		"completed requests per second over the same steady part of the run, sent = started over the whole run. "+
		"CPU: cores the row's mocks, gateway and loadgen used (the whole machine's busy cores and the hypervisor's steal in brackets).\n\n",
		c.Workers, c.KVTokens, c.LoadReportSeconds, (1-c.SatRampFraction)*100, c.SatDuration, c.LoadFraction*100, c.LoadDuration, c.Repeats, c.WarmupSeconds)
	m := map[string]float64{}
	q.metrics(m)
	for _, cr := range q.Cases {
		fmt.Fprintf(&sb, "### %s\n\n%s.\n\n", cr.Case.Name, cr.Case.About)
		if len(cr.Saturation) > 0 {
			sb.WriteString(saturationTable(cr))
		}
		if len(cr.Load) > 0 {
			sb.WriteString(loadTable(cr, c.LoadFraction))
		}
		sb.WriteString(eventsTable(cr, m))
	}
	if hit, ok := m["quality.shared-prefix.sat.cache_hit_ratio.cache_aware/round_robin"]; ok {
		sb.WriteString("| cache_aware / round_robin, shared-prefix at saturation | ours | SGLang (published, up to) |\n|---|---|---|\n")
		fmt.Fprintf(&sb, "| capacity (requests/s) | %.2f× | %.1f× |\n", m["quality.shared-prefix.sat.capacity_ratio.cache_aware/round_robin"], SGLangThroughputRatio)
		fmt.Fprintf(&sb, "| cache hit rate | %.2f× | %.1f× |\n\n", hit, SGLangHitRateRatio)
	}
	return sb.String()
}

// saturationTable renders a case's saturation rows with their ratios to round robin.
// eventsTable compares event mode with the approximate tree where the case has both: the
// issue's targets beside the measured ratios, and the predicted hit beside the engines'.
func eventsTable(cr QualityCaseResult, m map[string]float64) string {
	pre := "quality." + cr.Case.Name + "."
	suffix := "." + EventsPolicy + "/cache_aware"
	if _, ok := m[pre+"sat.capacity_ratio"+suffix]; !ok {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("| event mode / approximate tree | measured | target |\n|---|---|---|\n")
	row := func(name, key, target string) {
		if v, ok := m[key]; ok {
			fmt.Fprintf(&sb, "| %s | %.2f | %s |\n", name, v, target)
		}
	}
	row("capacity at saturation", pre+"sat.capacity_ratio"+suffix, "≥ 1.2")
	row("TTFT p99 at saturation", pre+"sat.ttft_p99_ratio"+suffix, "≤ 0.8")
	row("TTFT p99 at load (median repeat)", pre+"load.ttft_p99_ratio_median"+suffix, "≤ 0.8")
	row("TTFT p50 at load (worst repeat)", pre+"load.ttft_p50_ratio_max"+suffix, "–")
	row("predicted vs engine hit, points apart, saturation", pre+"sat.hit_gap_pp."+EventsPolicy, "≤ 5")
	row("predicted vs engine hit, points apart, load (worst repeat)", pre+"load.hit_gap_pp_max."+EventsPolicy, "≤ 5")
	row("the tree's predicted vs engine hit, points apart, saturation", pre+"sat.hit_gap_pp.cache_aware", "–")
	row("the tree's predicted vs engine hit, points apart, load (worst repeat)", pre+"load.hit_gap_pp_max.cache_aware", "–")
	for _, p := range []string{EventsPolicy, "cache_aware"} {
		if r := findRow(cr.Saturation, p, 0); r != nil && r.foretells() {
			fmt.Fprintf(&sb, "\n%s at saturation: predicted hit %.3f, engines' hit %.3f (the gateways' counters, warm-up included).\n", p, r.PredictedHitRate, r.EngineHitRate)
		}
	}
	sb.WriteString("\n")
	return sb.String()
}

func saturationTable(cr QualityCaseResult) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Saturation (closed loop, %d clients):\n\n", cr.Saturation[0].Clients)
	sb.WriteString("| policy | capacity req/s | × RR | cache hit rate | × RR | TTFT p50 ms | TTFT p99 ms | × RR | TPOT p50 ms | busiest worker × fair share | completed | failed | time scale | events/s wall | CPU cores |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	rr := findRow(cr.Saturation, referencePolicy, 0)
	var notes []string
	for _, r := range cr.Saturation {
		capX, hitX, p99X := "–", "–", "–"
		if rr != nil && r.Policy != referencePolicy {
			capX, hitX, p99X = times(r.Capacity, rr.Capacity), times(r.CacheHitRate, rr.CacheHitRate), times(r.TTFTP99MS, rr.TTFTP99MS)
		}
		p50, p99, tpot := fmt.Sprintf("%.0f", r.TTFTP50MS), fmt.Sprintf("%.0f", r.TTFTP99MS), fmt.Sprintf("%.1f", r.TPOTP50MS)
		if r.NoStream {
			p50, p99, tpot = "–", "–", "–"
		}
		fmt.Fprintf(&sb, "| %s | %.1f | %s | %.3f | %s | %s | %s | %s | %s | %.2f | %d | %d | %g | %.0f | %.2f (%.2f, %.0f%%) |\n",
			r.Policy, r.Capacity, capX, r.CacheHitRate, hitX, p50, p99, p99X, tpot, r.BusiestShare, r.Completed, r.Failed,
			r.TimeScale, r.wallEvents(), r.CPUCores, r.MachineBusy, r.StealPercent)
		for _, x := range r.Rejected {
			notes = append(notes, fmt.Sprintf("%s first measured %.1f req/s at time scale %g (%.0f events/s wall, over the budget)", r.Policy, x.Capacity, x.TimeScale, x.WallEvents))
		}
	}
	if len(notes) > 0 {
		sb.WriteString("\nMeasured again at a lower time scale: " + strings.Join(notes, "; ") + ".\n")
	}
	if cr.Case.SatSettle > 0 {
		fmt.Fprintf(&sb, "\nEach closed loop ran %v before its measured run, to settle (its capacity counts only the measured run).\n", cr.Case.SatSettle)
	}
	if cr.Case.SatNoStream {
		sb.WriteString("\nNot streamed (one response per request, counted as one event): no TTFT or TPOT at saturation.\n")
	}
	sb.WriteString("\n")
	return sb.String()
}

// loadTable renders a case's load rows: per policy its repeats side by side, each TTFT p99
// against round robin's of the same repeat, and the worst.
func loadTable(cr QualityCaseResult, fraction float64) string {
	var sb strings.Builder
	policies, repeats := loadPolicies(cr.Load)
	first := cr.Load[0]
	fmt.Fprintf(&sb, "At %.0f%% of round robin's capacity (%.1f of %.1f req/s of model time; %.0f req/s wall at time scale %g), %d repeat(s):\n\n",
		fraction*100, cr.LoadRate, cr.Capacity, cr.LoadRate*first.TimeScale, first.TimeScale, repeats)
	sb.WriteString("| policy | TTFT p99 ms per repeat | × RR per repeat | worst × RR | median × RR | TTFT p50 ms per repeat | cache hit rate | completed (sent) req/s | busiest worker × fair share | CPU cores | arrival lag p99 ms |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, policy := range policies {
		var p99s, xs, p50s, hits, rates, busiest, cpus, lags []string
		var vs []float64
		worst := 0.0
		for rep := 1; rep <= repeats; rep++ {
			r := findRow(cr.Load, policy, rep)
			if r == nil {
				continue
			}
			p99s = append(p99s, fmt.Sprintf("%.0f", r.TTFTP99MS))
			p50s = append(p50s, fmt.Sprintf("%.0f", r.TTFTP50MS))
			hits = append(hits, fmt.Sprintf("%.3f", r.CacheHitRate))
			rates = append(rates, fmt.Sprintf("%.1f (%.1f)", r.Capacity, r.SentRate))
			busiest = append(busiest, fmt.Sprintf("%.2f", r.BusiestShare))
			cpus = append(cpus, fmt.Sprintf("%.2f (%.2f, %.0f%%)", r.CPUCores, r.MachineBusy, r.StealPercent))
			lags = append(lags, fmt.Sprintf("%.1f", r.ArrivalLagP99MS))
			if ref := findRow(cr.Load, referencePolicy, rep); ref != nil && policy != referencePolicy {
				if v, ok := ratio(r.TTFTP99MS, ref.TTFTP99MS); ok {
					xs = append(xs, fmt.Sprintf("%.2f", v))
					vs = append(vs, v)
					worst = max(worst, v)
				}
			}
		}
		worstS, medianS := "–", "–"
		if len(xs) > 0 {
			worstS, medianS = fmt.Sprintf("**%.2f**", worst), fmt.Sprintf("%.2f", median(vs))
		} else {
			xs = []string{"–"}
		}
		j := func(v []string) string { return strings.Join(v, ", ") }
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", policy, j(p99s), j(xs), worstS, medianS, j(p50s), j(hits), j(rates), j(busiest), j(cpus), j(lags))
	}
	sb.WriteString("\n")
	return sb.String()
}

// median is the middle value of xs (the mean of the middle two for an even count); xs is
// sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// times renders a / b as "1.23×", or "–" without a ratio.
func times(a, b float64) string {
	if v, ok := ratio(a, b); ok {
		return fmt.Sprintf("%.2f×", v)
	}
	return "–"
}
