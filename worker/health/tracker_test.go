package health

import (
	"testing"

	"github.com/smg-go/smg/worker"
)

const (
	pending  = worker.StatusPending
	ready    = worker.StatusReady
	notReady = worker.StatusNotReady
	failed   = worker.StatusFailed
	draining = worker.StatusDraining
)

// TestTrackerTransitions walks every status through every probe result at the boundaries of
// the thresholds: one short of each, at it, and past it.
func TestTrackerTransitions(t *testing.T) {
	th := Thresholds{Success: 2, Failure: 3} // failed after 12
	for _, tc := range []struct {
		name     string
		from     worker.Status
		priorOK  int // successes in a row before this probe
		priorBad int // failures in a row before this probe
		ok       bool
		want     worker.Status
	}{
		{"pending first success", pending, 0, 0, true, ready},
		{"pending success after failures", pending, 0, 11, true, ready},
		{"pending failure", pending, 0, 0, false, pending},
		{"pending one short of failed", pending, 0, 10, false, pending},
		{"pending failed", pending, 0, 11, false, failed},

		{"ready success", ready, 5, 0, true, ready},
		{"ready first failure", ready, 0, 0, false, ready},
		{"ready one short of not_ready", ready, 0, 1, false, ready},
		{"ready not_ready", ready, 0, 2, false, notReady},
		{"ready past not_ready (status change was dropped)", ready, 0, 5, false, notReady},
		{"ready with failed-many failures (nudged back by a peer)", ready, 0, 11, false, failed},
		{"ready failure after successes", ready, 9, 0, false, ready},

		{"not_ready first success", notReady, 0, 4, true, notReady},
		{"not_ready recovered", notReady, 1, 0, true, ready},
		{"not_ready failure", notReady, 0, 3, false, notReady},
		{"not_ready one short of failed", notReady, 0, 10, false, notReady},
		{"not_ready failed", notReady, 0, 11, false, failed},
		{"not_ready success then failure restarts the run", notReady, 1, 0, false, notReady},

		{"failed first success", failed, 0, 20, true, failed},
		{"failed recovered", failed, 1, 0, true, ready},
		{"failed failure", failed, 0, 20, false, failed},

		{"draining success", draining, 0, 0, true, draining},
		{"draining failure", draining, 0, 50, false, draining},
	} {
		tr := Tracker{successes: tc.priorOK, failures: tc.priorBad}
		if got := tr.Observe(tc.from, tc.ok, th); got != tc.want {
			t.Errorf("%s: %v after %d ok / %d bad, probe ok=%v: got %v, want %v",
				tc.name, tc.from, tc.priorOK, tc.priorBad, tc.ok, got, tc.want)
		}
	}
}

func TestTrackerCountsRuns(t *testing.T) {
	var tr Tracker
	th := Thresholds{Success: 2, Failure: 3}
	tr.Observe(ready, false, th)
	tr.Observe(ready, false, th)
	if tr.Failures() != 2 || tr.Successes() != 0 {
		t.Fatalf("after two failures: %d failures, %d successes", tr.Failures(), tr.Successes())
	}
	tr.Observe(ready, true, th)
	if tr.Failures() != 0 || tr.Successes() != 1 {
		t.Fatalf("a success must end the failure run: %d failures, %d successes", tr.Failures(), tr.Successes())
	}
}

// TestTrackerLifecycle feeds a whole story through the machine, applying each status it asks
// for, at the spec's defaults: the failed threshold is 12 probes, ~12 minutes at 60 s.
func TestTrackerLifecycle(t *testing.T) {
	th := Thresholds{Success: DefaultSuccessThreshold, Failure: DefaultFailureThreshold}
	if th.FailedAfter() != 12 {
		t.Fatalf("failed after %d probes at the defaults, want 12", th.FailedAfter())
	}
	var tr Tracker
	status := pending
	step := func(ok bool, want worker.Status) {
		t.Helper()
		status = tr.Observe(status, ok, th)
		if status != want {
			t.Fatalf("probe ok=%v: %v, want %v (runs %d ok / %d bad)", ok, status, want, tr.Successes(), tr.Failures())
		}
	}
	step(true, ready)
	step(false, ready)
	step(false, ready)
	step(false, notReady) // 3
	step(true, notReady)
	step(true, ready) // 2 successes
	for range 2 {
		step(false, ready)
	}
	for range 9 {
		step(false, notReady) // failures 3..11
	}
	step(false, failed) // 12
	step(false, failed)
	step(true, failed)
	step(true, ready)
}
