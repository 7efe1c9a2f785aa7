package discovery

import (
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Source is the value of the metrics' source label.
const Source = "kubernetes"

// discoveryMetrics are the spec's smg_discovery_* series (service-discovery.md: Metrics).
type discoveryMetrics struct {
	discovered      atomic.Int64
	registered      *metrics.Counter
	registerFailed  *metrics.Counter
	deregistrations *metrics.Counter
	syncDuration    *metrics.PrometheusHistogram
}

func newDiscoveryMetrics(set *metrics.Set) *discoveryMetrics {
	m := &discoveryMetrics{
		registered:      set.GetOrCreateCounter(`smg_discovery_registrations_total{source="kubernetes",result="success"}`),
		registerFailed:  set.GetOrCreateCounter(`smg_discovery_registrations_total{source="kubernetes",result="failed"}`),
		deregistrations: set.GetOrCreateCounter(`smg_discovery_deregistrations_total{source="kubernetes",reason="reconciled"}`),
		syncDuration:    set.GetOrCreatePrometheusHistogram(`smg_discovery_sync_duration_seconds{source="kubernetes"}`),
	}
	set.GetOrCreateGauge(`smg_discovery_workers_discovered{source="kubernetes"}`, func() float64 {
		return float64(m.discovered.Load())
	})
	return m
}
