package kvevents

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
	"github.com/smg-go/smg/kvevents/kvindex"
)

// RegisterMetrics publishes one worker's consumer counters on set, read from stats at scrape
// time (nothing is counted twice): smg_kv_events_{received,applied,dropped,gaps,replayed,
// cleared,reconnects}_total{worker="url"}. The returned function removes the series; call it
// when the worker goes, so per-worker series live as long as the worker.
func RegisterMetrics(set *metrics.Set, worker string, stats func() Stats) (unregister func()) {
	label := `{worker=` + promlabel.Quote(worker) + `}`
	series := []struct {
		name string
		get  func(Stats) uint64
	}{
		{"smg_kv_events_received_total", func(s Stats) uint64 { return s.Received }},
		{"smg_kv_events_applied_total", func(s Stats) uint64 { return s.Applied }},
		{"smg_kv_events_dropped_total", func(s Stats) uint64 { return s.Dropped }},
		{"smg_kv_events_gaps_total", func(s Stats) uint64 { return s.Gaps }},
		{"smg_kv_events_replayed_total", func(s Stats) uint64 { return s.Replayed }},
		{"smg_kv_events_cleared_total", func(s Stats) uint64 { return s.Cleared }},
		{"smg_kv_events_reconnects_total", func(s Stats) uint64 { return s.Reconnects }},
	}
	names := make([]string, 0, len(series))
	for _, s := range series {
		get := s.get
		name := s.name + label
		set.NewGauge(name, func() float64 { return float64(get(stats())) })
		names = append(names, name)
	}
	return func() {
		for _, n := range names {
			set.UnregisterMetric(n)
		}
	}
}

// RegisterIndexMetrics publishes a model's index size on set: smg_kv_index_blocks{model} (the
// (worker, block) pairs held), smg_kv_index_bytes{model} (its tables), and
// smg_kv_index_evicted_total and smg_kv_index_ignored_total{model}.
func RegisterIndexMetrics(set *metrics.Set, model string, x *kvindex.Index) (unregister func()) {
	label := `{model=` + promlabel.Quote(model) + `}`
	names := []string{"smg_kv_index_blocks" + label, "smg_kv_index_bytes" + label, "smg_kv_index_evicted_total" + label, "smg_kv_index_ignored_total" + label}
	set.NewGauge(names[0], func() float64 { return float64(x.Stats().Blocks) })
	set.NewGauge(names[1], func() float64 { return float64(x.Stats().Bytes) })
	set.NewGauge(names[2], func() float64 { return float64(x.Stats().Evicted) })
	set.NewGauge(names[3], func() float64 { return float64(x.Stats().Ignored) })
	return func() {
		for _, n := range names {
			set.UnregisterMetric(n)
		}
	}
}
