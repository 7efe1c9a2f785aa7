// Package health probes each worker off the request hot path and drives its status through
// the registry: pending → ready → not_ready → failed (→ removed), and back to ready.
//
// # State machine
//
// Tracker is the pure per-worker machine, fed one probe result at a time:
//
//	pending   --1 success-------------------------------->  ready
//	ready     --FailureThreshold failures in a row------->  not_ready
//	not_ready --SuccessThreshold successes in a row------>  ready
//	failed    --SuccessThreshold successes in a row------>  ready   (when not removed)
//	pending, ready, not_ready
//	          --FailedFactor×FailureThreshold failures--->  failed  (12 probes, ~12 min at the defaults)
//	failed    --with RemoveUnhealthy--------------------->  removed from the registry
//	draining  never changes and is not probed
//
// A pending worker (it has never answered: an engine still loading, or started after the
// gateway) is also probed between the regular probes, after PendingBackoff (1 s), then twice
// as long each time up to the interval, jittered, so that it is used within about a second of
// answering; only those probes' successes count, so the time to failed is unchanged. A
// pending worker registered without models learns them at the probe that finds it up
// (Config.LearnModels).
//
// A probe succeeds when GET {url}{endpoint} answers 2xx within the timeout. Thresholds,
// endpoint, interval and timeout come from the flags, overridden per worker by the health
// section of its spec (Config.For). With health checks disabled (globally, or for one worker)
// a pending worker is made ready without a probe; InitialStatus tells registrars to register
// such workers ready in the first place.
//
// # Concurrency
//
// A worker is probed when it is registered, then once per interval in its phase
// (worker.Worker.Phase, one of worker.PhaseSlices slices of the interval): its second probe
// comes its phase's offset early, so a fleet registered together is probed in one slice of
// the interval after another, never in one burst, and rounds run at most once per slice.
//
// Start runs one goroutine. Each round it takes the workers that are due from a schedule
// ordered by due time, probes them with at most Concurrency goroutines that exit when the
// round ends, and applies the results: SetStatus (non-blocking; a dropped change is asked for
// again at the next probe, since the Tracker's counts carry on) or Remove. Rounds run when the
// earliest worker falls due on the injected Clock, and at once after every registry
// publication, so a newly registered worker is probed without waiting an interval; the
// publication's worker.Delta says which workers joined, left or changed settings, so a round
// costs what is due and what changed, never a walk of the fleet (a Checker that is not
// running compares the whole snapshot in each RunRound instead). One slow
// worker delays the round by at most its timeout. The hot path never waits on any of this:
// it reads the status the registry published.
//
// # Ownership
//
// The Checker owns its per-worker entries and their metric series; only the goroutine running
// a round touches them, and during a round each due entry belongs to one probe goroutine.
// Probe requests and responses are pooled fasthttp objects, released before the probe
// returns; nothing of a response is kept. Probes go over the worker's probe connection
// (worker.Worker.Probe), kept open between probes and shared with the load monitor.
package health
