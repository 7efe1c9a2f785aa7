package health

import (
	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/promlabel"
	"github.com/smg-go/smg/worker"
)

// series are one worker's health metrics, named as the spec product names them:
//
//	smg_worker_health{worker}                        1 ready, 0 any other status
//	smg_worker_health_checks_total{worker,result}    result: success, failure
//
// They are created when the Checker first sees the worker and removed when the worker leaves
// the registry (or the Checker stops).
type series struct {
	health            string
	success, failure  *metrics.Counter
	successN, failedN string
}

func newSeries(set *metrics.Set, w *worker.Worker) *series {
	s := &series{
		health:   `smg_worker_health{worker=` + promlabel.Quote(w.URL) + `}`,
		successN: `smg_worker_health_checks_total{worker=` + promlabel.Quote(w.URL) + `,result="success"}`,
		failedN:  `smg_worker_health_checks_total{worker=` + promlabel.Quote(w.URL) + `,result="failure"}`,
	}
	set.GetOrCreateGauge(s.health, func() float64 {
		if w.Status() == worker.StatusReady {
			return 1
		}
		return 0
	})
	s.success = set.GetOrCreateCounter(s.successN)
	s.failure = set.GetOrCreateCounter(s.failedN)
	return s
}

func (s *series) count(ok bool) {
	if ok {
		s.success.Inc()
	} else {
		s.failure.Inc()
	}
}

func (s *series) unregister(set *metrics.Set) {
	set.UnregisterMetric(s.health)
	set.UnregisterMetric(s.successN)
	set.UnregisterMetric(s.failedN)
}
