package kvevents

import (
	"bytes"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/kvevents/kvindex"
)

func TestMetricsLiveWithTheWorker(t *testing.T) {
	set := metrics.NewSet()
	st := Stats{Received: 5, Applied: 4, Dropped: 1}
	un := RegisterMetrics(set, `http://w:1`, func() Stats { return st })
	idx, _ := kvindex.New(kvindex.DefaultConfig())
	unIdx := RegisterIndexMetrics(set, "m", idx)
	var out bytes.Buffer
	set.WritePrometheus(&out)
	for _, want := range []string{`smg_kv_events_received_total{worker="http://w:1"} 5`, `smg_kv_events_dropped_total{worker="http://w:1"} 1`, `smg_kv_index_blocks{model="m"} 0`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %s in\n%s", want, out.String())
		}
	}
	un()
	unIdx()
	out.Reset()
	set.WritePrometheus(&out)
	if out.Len() != 0 {
		t.Fatalf("series left after the worker went:\n%s", out.String())
	}
}
