// Package mesh makes several SMG routers act as one cluster (spec: High Availability): SWIM
// membership with memberlist's incarnation semantics, a CRDT store that replicates the
// workers each router registered, and best-effort cache-tree deltas with paged repair, all
// over gRPC on --mesh-port. The mesh only gives hints: routing never waits on it, and a
// partitioned router routes on what it has.
//
// # Membership
//
// Node runs the protocol; Tick is one gossip round (1 s). Each round a node probes one peer,
// carrying its whole membership table: a SUSPECTED peer first (the one suspected longest),
// then an ALIVE peer whose sync stream broke (a killed process resets its connections), and
// otherwise the next of a shuffled round-robin over ALIVE and SUSPECTED peers (memberlist's
// order: every peer is probed within N-1 rounds, which random choice does not bound). A
// direct probe that fails, or is unanswered within ProbeTimeout (500 ms), is tried through up
// to 3 ALIVE peers at once (PingReq). The probe fails when nothing reached the target within
// the round (memberlist's probe interval), not the spec's 10 s request timeout, which still
// bounds the sync exchanges: a frozen router, whose connections stay open, is found as fast
// as one that refuses them. When no probe reaches the target it goes ALIVE → SUSPECTED →
// DOWN, and the change is broadcast. So a killed router is DOWN everywhere about a round
// after its streams break, where the round-robin alone leaves a dead router unprobed for a
// round with probability about 1/e.
// Beyond the spec's product:
//
//   - Every member carries an incarnation number that only it raises. A router that hears
//     itself called SUSPECTED, DOWN or LEAVING at its incarnation or above answers with a
//     higher one, and the higher incarnation overrides the claim everywhere. So a falsely
//     suspected router refutes, and a router restarted under the same name is ALIVE again
//     as soon as it reaches one peer (its bootstrap peer's answer carries the DOWN claim it
//     refutes). A claim that arrives in a peer's call is refuted to every peer at once, not
//     in the next round, since the peers that heard the claim probe the suspect first.
//   - A SUSPECTED member that does not refute within 5 s is DOWN (suspicion timeout), and
//     every 10 rounds one DOWN member is probed again, so the sides of a healed partition
//     find each other (Serf's reconnect).
//   - Every --mesh-peer-urls entry is dialled with backoff (1 s doubling to 60 s) until first
//     contact, and again whenever the node has no live peer left.
//   - Leave announces LEAVING before the router drains.
//   - A DOWN or LEAVING member whose address an ALIVE member (or this router) now holds is
//     forgotten, with its per-peer metric series: a router restarted there under another
//     name. The membership table is logged ("Status: ...") at INFO in the rounds it changed
//     and at DEBUG in the others.
//
// # Worker state (CRDT)
//
// Store is a last-writer-wins map ordered by (Lamport timestamp, replica); its merge is
// commutative, associative and idempotent (property-tested). Each worker is one key,
// "worker:<owner>:<url>", written only by its owner (node names cannot contain ':'), so two
// routers registering the same URL never overwrite each other. Each round a node sends every
// open stream the entries its peer has not acknowledged, so entries are resent until
// acknowledged and relayed through intermediate peers. An owner that receives an older or
// newer write of its own key than it holds (a leftover from before a restart) rewrites its
// current intent with a newer timestamp: the CRDT counterpart of refutation. WorkerSync
// bridges the store and the worker registry.
//
// # Tombstone collection
//
// A removed worker leaves a tombstone; with discovery churning pods for weeks, tombstones
// would grow the store, and every sync that ranges over it, without bound. The spec says
// nothing of them; we collect them under per-owner floors. An owner's floor F, the entry
// "floor:<owner>" with Lamport timestamp F, stands for a tombstone of every key of that owner
// at F: every store drops that owner's entries at or below F and refuses them on arrival.
// The owner keeps one invariant: none of its current writes is at or below its floor. So
// whatever the floor removes or refuses is a removed worker or a superseded copy, never a
// current write, and no copy held anywhere (by a router partitioned or DOWN for any length
// of time) can come back: its timestamp is below the tombstone's, so below the floor.
//
//   - Phase 1: when some of its tombstones are older than Config.TombstoneHorizon (an hour;
//     see DefaultTombstoneHorizon), the owner picks F, the newest of their timestamps, and
//     rewrites ("re-stamps") its live keys at or below F with new timestamps.
//   - Phase 2: once every ALIVE or SUSPECTED peer has acknowledged the re-stamped keys and the
//     tombstones at or below F on its direct stream, the owner publishes the floor. This wait
//     is not what makes collection safe; it keeps a live peer from seeing the floor (relayed)
//     before a re-stamped key's new write, which would drop and re-import a worker.
//   - The floor is replicated like any entry (resent until acknowledged, relayed), is never
//     collected (one key per owner), and only rises: Lamport order is the floor's order. A
//     router that returns with a stale copy either hears of the floor first and drops the
//     copy, or sends it first and every router holding the floor refuses it (and
//     acknowledges it, so it is not resent). A router that holds neither the floor nor the
//     tombstone (a fresh one) can take the stale copy until the floor reaches it, exactly as
//     it could take it before the tombstone without collection.
//   - A restarted owner starts its Lamport clock at 0, so its first writes can be at or below
//     its old floor and refused. A peer sends it its floor (its new streams have acknowledged
//     nothing); the owner adopts it and re-stamps its keys above it: the counterpart of
//     refutation. A collected key can be written again (the same URL registered again): the
//     owner's clock is above its floor.
//   - The state is still a join: a key's value is its newest write above its owner's floor
//     (property-tested with floors). The owner also forgets its collected intents, and every
//     stream forgets the acknowledgements of collected keys.
//
// smg_mesh_tombstones_collected_total counts tombstones a floor removed from this router's
// store; smg_mesh_stale_entries_total counts live entries at or below a floor, dropped or
// refused (a returning router's copies of removed workers, and superseded copies of
// re-stamped ones). Both are ours, not the spec's. GET /mesh/status reports crdt_tombstones.
//
// # Sync streams
//
// One bidirectional stream per pair, opened by the router whose name sorts first after a
// successful ping between the two, whichever sent it (a probe, a bootstrap contact, a
// broadcast): a stream waits for neither side's round-robin, so a fresh 50-router mesh
// relays a worker key to every router within 2 rounds. The opener sends a keep-alive after 20 s without traffic, so
// only a dead stream reaches the 60 s idle timeout that closes it.
//
// # Cache trees
//
// PublishTree queues one routing decision (model, tree kind, path, worker URL); once per
// round the queued deltas, each (path, worker) once, go to every connected peer. Unlike the
// spec's product, a delta carries the path as well as its hash, so a peer can apply every
// delta; a path it did not know before (Trees.Apply reports it) starts a repair of that
// model's tree from a random ALIVE peer, once per model and tree kind after start-up or after
// a peer rejoins: pages of about 2 MiB, retried after 5 s without progress (with another
// peer, from the start, when one is left), at most 3 times; unknown paths arriving meanwhile
// are folded into the repair in flight. RadixTrees implements Trees over the cache_aware
// policy's radix trees.
//
// # Transport and wire format
//
// The gRPC transport (grpc.go) serves one service, smg.mesh.v1.Mesh, with Ping, PingReq and
// the bidirectional Sync stream. protoc is not available to this project, so the messages
// are encoded by package wire's hand-written codec (see its doc), and the service descriptor
// that protoc would generate is written out in grpc.go; both are small and fuzzed. Malformed
// and oversized messages are rejected, counted in smg_mesh_rejected_messages_total, and never
// reach the protocol. With mutual TLS, a handshake the server refuses (a certificate another
// CA signed, no certificate, no TLS) is counted in
// smg_mesh_rejected_connections_total{reason="tls"} (ours) and logged at warn with the remote
// address and the reason, at most once per remote IP per minute with the count of refusals
// not logged since (a refused router redials for ever); gRPC would only tell its own logger.
//
// # Concurrency
//
// A Node's state is guarded by one mutex, never held across I/O: a round takes the lock to
// decide what to send, releases it to send, and takes it again to apply answers. Inbound calls
// (HandlePing, HandlePingReq, StreamMessage) may run on any goroutine. In production a round
// runs every second on its own goroutine (a round stuck on a dead peer's 5 s connect timeout
// does not delay the next); tests drive Tick on a fake clock over an in-memory transport, with
// Deps.Spawn running broadcasts inline, so that every run is deterministic.
//
// # Ownership
//
// Messages handed to a Transport belong to it; decoded messages own their memory (they do
// not alias gRPC's buffers). PublishTree copies the path into a pooled buffer (no allocation
// in steady state); the round that takes the delta copies the round's paths into one arena of
// its own, shared by the messages to every stream (each stream's writer encodes it later), and
// returns the buffers to the pool. The Store copies what it merges.
package mesh
