package loadmon

import (
	"testing"

	"github.com/smg-go/smg/worker"
)

func TestOverloadVeto(t *testing.T) {
	o := OverloadConfig{Enabled: true, WaitingRequests: 10, TokenUsage: 0.9}
	for _, tc := range []struct {
		r    *worker.LoadReport
		veto bool
	}{
		{nil, false},
		{&worker.LoadReport{WaitingRequests: 9, TokenUsage: 0.89}, false},
		{&worker.LoadReport{WaitingRequests: 10}, true},
		{&worker.LoadReport{TokenUsage: 0.9}, true},
	} {
		if got := o.vetoes(tc.r); got != tc.veto {
			t.Errorf("%+v: veto %v", tc.r, got)
		}
	}
	o.Enabled = false
	if o.vetoes(&worker.LoadReport{WaitingRequests: 1000, TokenUsage: 1}) {
		t.Error("disabled protection vetoed")
	}
	o = OverloadConfig{Enabled: true}
	if o.vetoes(&worker.LoadReport{WaitingRequests: 1000, TokenUsage: 1}) {
		t.Error("zero limits mean no limit")
	}
}
