//go:build !race

package loadmon

import (
	"testing"

	"github.com/smg-go/smg/worker"
	"github.com/valyala/fastjson"
)

func TestParsersAllocateNothing(t *testing.T) {
	var p fastjson.Parser
	var r worker.LoadReport
	loads, metrics := []byte(mockLoads), []byte(vllmMetrics)
	if n := testing.AllocsPerRun(200, func() {
		if err := ParseLoads(&p, loads, &r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ParseLoads allocates %v times per call with a reused parser", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := ParseMetrics(metrics, &r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ParseMetrics allocates %v times per call", n)
	}
}
