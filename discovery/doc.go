// Package discovery keeps the worker registry in step with Kubernetes pods (spec:
// service-discovery.md). It holds everything that is plain Go: the pod → desired-workers
// mapping (selectors, readiness, multi-port and PD annotations), the reconcile diff with its
// ownership rules, the bounded job queue, the Reconciler that drives passes, the router
// pod → mesh membership mapping, the Config and its flags. discovery/k8s feeds it from a
// client-go informer; nothing here imports client-go, so every rule is table-tested with
// plain structs.
//
// # Level-triggered reconcile
//
// A full pass reads the whole pod cache (PodSource), maps it to the desired workers, compares
// them with the workers this reconciler registered that the registry still holds, and submits
// AddWorker and RemoveWorker jobs for the difference. It never replays events, so a missed
// delete, a failed registration or a registration that finished after its pod left all
// converge on a later pass. Full passes run at start, every Resync (60 s), and one Debounce
// (1 s) after a Trigger (a failed job).
//
// An informer event names the pod's old and new IP (Changed), and an address pass runs at
// once for each: the same mapping and diff over the pods at that IP (PodsAt, an index of the
// cache) and the owned workers there. Workers are matched by address, so this is all a full
// pass could change there, at a cost that does not grow with the fleet. A job that succeeded
// is followed by an address pass at its address (a removal may free it for a replacement), a
// failed one by a debounced full pass. A full pass leaves alone the addresses that changed
// after it read the cache, since their address passes saw newer pods.
//
// # Ownership
//
// The reconciler only ever removes workers it added itself: it keeps their ids, and a worker
// registered by --worker-urls, the worker API or a mesh peer is never in that set even when
// it carries the smg.ai/pod-uid label. It also never adds over an address someone else
// registered. The labels smg.ai/pod-name, smg.ai/pod-uid, smg.ai/pod-namespace and
// smg.ai/discovered=true mark discovered workers for operators; the PD metadata
// (sglang.ai/bootstrap-port, smg.ai/kv-connector, smg.ai/kv-engine-id) rides in labels too.
//
// # Concurrency model
//
// Run is one goroutine for the address passes and the timers, plus one for the full passes, so
// that an address pass never waits for a full pass to read the cache; full passes are
// serialised, and submitting is serialised by a mutex, so a Pass called beside Run waits. Jobs
// run on the JobQueue's fixed pool of JobQueueConcurrency goroutines; at most one job per
// worker address is pending or running, and Submit blocks while JobQueueCapacity jobs wait.
// The owned-id set is guarded by a mutex shared by the pass and the jobs. Every wait (debounce,
// resync, startup probes, drain settle) goes through the injected Clock.
//
// # Ownership of buffers
//
// Pods handed in by a PodSource are read, never kept or modified. Desired values and Plans
// are fresh copies owned by the caller.
package discovery
