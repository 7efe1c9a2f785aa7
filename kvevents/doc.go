// Package kvevents consumes the KV-cache events of the engines, so that cache_aware can route
// on what each engine really holds (kvindex is the index they feed).
//
// # Sources
//
//   - ZMQ (vLLM and SGLang started with KV events on): a SUB socket per worker and DP rank
//     (rank r on the endpoint's port + r, as the engines bind), frames [topic, 8-byte
//     big-endian sequence, msgpack batch]. A gap in the sequence is filled from the engine's
//     ROUTER replay socket (request: the first missing sequence as 8 big-endian bytes; answer:
//     [sequence, payload] frames ending with sequence -1); a publisher that restarts its
//     sequence has restarted its cache, and the worker's blocks are cleared. A dead or silent
//     publisher is dropped after an idle timeout and dialled again with backoff.
//   - gRPC (SGLang's and vLLM's gRPC servers): the SubscribeKvEvents stream. A gap resubscribes
//     from the last applied sequence; OutOfRange or DataLoss (the engine cannot replay) clears
//     the worker's blocks and subscribes from the engine's current state; Unimplemented means
//     the worker publishes no events and the consumer stops.
//
// Decoder reads both msgpack encodings of the batches (tagged arrays and tagged maps), with
// block hashes as integers or bytes; it trusts no length beyond the bytes that remain, skips
// unknown fields to a bounded depth, and is fuzzed (FuzzDecode).
//
// # Assembly
//
// Manager owns the consumers of a gateway's workers and one kvindex.Index per model: cmd/smg
// adds a worker with its source (AddZMQ with its endpoints, AddGRPC with its engine client)
// and removes it with the worker; the worker's blocks and metrics (RegisterMetrics,
// RegisterIndexMetrics) go with it. cache_aware reads an index through the EventIndex it
// declares (policy/cacheaware), which *kvindex.Index satisfies.
//
// # Concurrency and ownership
//
// Each consumer is one goroutine per worker (and DP rank) that owns its socket or stream, its
// Decoder and one reused Batch. It hands every batch, in sequence order, to its Sink and
// reuses the Batch when Apply returns, so a Sink copies what it keeps. Nothing here runs on the
// request path: a Sink that applies to a kvindex.Index holds its write lock for one batch.
// Frames above Config.MaxMessageBytes close the connection before they are read, so a
// flooding or garbage publisher costs a bounded amount of memory.
package kvevents
