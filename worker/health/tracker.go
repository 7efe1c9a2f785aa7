package health

import "github.com/smg-go/smg/worker"

// Thresholds drive one worker's state machine.
type Thresholds struct {
	// Success is how many probes in a row must succeed to make a not_ready or failed worker
	// ready.
	Success int
	// Failure is how many probes in a row must fail to make a ready worker not_ready;
	// FailedFactor × Failure make any probed worker failed.
	Failure int
}

// FailedAfter is the number of failed probes in a row that make a worker failed.
func (t Thresholds) FailedAfter() int { return FailedFactor * t.Failure }

// Tracker is the pure per-worker health state machine: it counts consecutive probe results
// and maps them, with the worker's current status, to its next status. It does no I/O and
// keeps no clock, so it is tested apart from probing.
//
// The current status is an input, not state of the Tracker: another writer (the admin API,
// a mesh peer's nudge) may change a worker's status, and a status change the Tracker asked
// for may be dropped by a full registry queue. The counts carry on either way, so the next
// probe corrects the status from wherever it is.
type Tracker struct {
	successes, failures int
}

// Successes and Failures return the current run of successful or failed probes.
func (t *Tracker) Successes() int { return t.successes }

// Failures returns the current run of failed probes.
func (t *Tracker) Failures() int { return t.failures }

// Observe records one probe result and returns the status the worker should have.
//
//	after a success: pending → ready (first success); not_ready, failed → ready after
//	                 th.Success in a row; ready stays ready.
//	after a failure: ready → not_ready after th.Failure in a row; pending, ready,
//	                 not_ready → failed after th.FailedAfter() in a row; failed stays failed.
//	draining never changes: the registry is removing the worker.
func (t *Tracker) Observe(cur worker.Status, ok bool, th Thresholds) worker.Status {
	if ok {
		t.successes++
		t.failures = 0
	} else {
		t.failures++
		t.successes = 0
	}
	switch cur {
	case worker.StatusDraining:
		return cur
	case worker.StatusPending:
		if ok {
			return worker.StatusReady
		}
	case worker.StatusNotReady, worker.StatusFailed:
		if ok && t.successes >= th.Success {
			return worker.StatusReady
		}
	case worker.StatusReady:
		if !ok && t.failures >= th.Failure && t.failures < th.FailedAfter() {
			return worker.StatusNotReady
		}
	}
	if !ok && t.failures >= th.FailedAfter() {
		return worker.StatusFailed
	}
	return cur
}
