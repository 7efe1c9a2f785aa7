package breaker

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/promlabel"
)

// The four transitions a breaker makes, in the order Metrics keeps their counters.
var transitionPairs = [...][2]State{
	{Closed, Open},
	{Open, HalfOpen},
	{HalfOpen, Closed},
	{HalfOpen, Open},
}

// Metrics exports one worker's breaker as the spec product does:
//
//	smg_worker_cb_state{worker}                  0 closed, 1 open, 2 half_open
//	smg_worker_cb_transitions_total{worker,from,to}
//
// Create it with the worker, pass OnTransition to Breaker.Init, and Unregister it when the
// worker is removed.
type Metrics struct {
	set   *metrics.Set
	names []string
	// counters is indexed like transitionPairs.
	counters [len(transitionPairs)]*metrics.Counter
}

// NewMetrics registers the series of the breaker b of the worker with URL worker in set;
// the state gauge reads b at its clock's time (Breaker.Now).
func NewMetrics(set *metrics.Set, worker string, b *Breaker) *Metrics {
	m := &Metrics{set: set}
	state := `smg_worker_cb_state{worker=` + promlabel.Quote(worker) + `}`
	set.GetOrCreateGauge(state, func() float64 { return float64(b.State(b.Now())) })
	m.names = append(m.names, state)
	for i, p := range transitionPairs {
		name := `smg_worker_cb_transitions_total{worker=` + promlabel.Quote(worker) + `,from=` + promlabel.Quote(p[0].String()) + `,to=` + promlabel.Quote(p[1].String()) + `}`
		m.counters[i] = set.GetOrCreateCounter(name)
		m.names = append(m.names, name)
	}
	return m
}

// OnTransition counts one transition; it is the hook to pass to Breaker.Init.
func (m *Metrics) OnTransition(from, to State) {
	for i, p := range transitionPairs {
		if p[0] == from && p[1] == to {
			m.counters[i].Inc()
			return
		}
	}
}

// Unregister removes the worker's series.
func (m *Metrics) Unregister() {
	for _, name := range m.names {
		m.set.UnregisterMetric(name)
	}
}
