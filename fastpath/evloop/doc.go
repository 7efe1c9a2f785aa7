// Package evloop is the gateway's generation data plane (the only one: --data-plane accepts evloop alone):
// HTTP/1.1 served from epoll event loops, with the connections to the workers driven by the
// same loops, plain or over TLS (Target.TLS): a worker connection's TLS handshake runs once
// on a goroutine of its own, then the loop runs the record layer over memory (tls.go).
//
// # Why an event loop
//
// Go's netpoller reads a socket until EAGAIN before it parks a goroutine, on the client and
// on the worker side, and a goroutine-per-connection server pays a wake-up per read: per
// proxied request the fasthttp data plane makes 4 reads and 2 writes where nginx makes 2 and
// 2 (docs/benchmarks-history.md). A loop here waits for readiness first and then reads once: one
// read per readiness event, one write per connection and wake-up, however many worker reads
// fed it (flushes are coalesced per wake-up, never corked: the bytes go out before the loop
// sleeps again).
//
// Sockets are registered edge-triggered (EPOLLET), as nginx registers them: level-triggered
// epoll polls every socket it reported once more in the next epoll_wait, which made the empty
// poll before a park cost a socket poll per event of the wake-up before. A read that filled
// its buffer, or one after the peer's FIN was reported, is followed by one more before the
// loop waits (loop.readAgain): what level-triggered epoll would have reported next.
//
// The loops are built on golang.org/x/sys/unix's epoll, not on gnet/v2's engine, for two
// reasons found reading gnet v2.9.7: gnet cannot stop reading one connection (its read
// handler always drains the socket into an unbounded buffer), so it cannot give a slow
// client bounded buffering, and it has no timers per connection. The loop here is a few
// hundred lines with both.
//
// A loop blocks in its own epoll_pwait2, the next timer as the timeout, as nginx does: one
// system call per wake-up, and no pass through Go's scheduler or netpoller. It is an ordinary
// system call (the scheduler knows the goroutine is in the kernel); the process runs with a P
// per loop and one more (SchedulerProcs: cmd/smg raises GOMAXPROCS itself), so the runtime's
// sysmon, finding an idle P, leaves a waiting loop its P, and a loop goes through the
// scheduler every 8-9 ms (runtime.Gosched) so that sysmon never preempts it (wait.go). Parking in
// Go's netpoller instead would cost per wake-up from idle an empty epoll_wait, the runtime's
// netpoll calls and a scheduler pass (docs/benchmarks-history.md). A process that gives its loops no P to spare
// (GOMAXPROCS at most the loops, as under testing.AllocsPerRun) still gets that park: a loop
// blocked in the kernel there would hold the P its own clients' goroutines wait for. The
// reads, writes, epoll_ctl and zero-timeout epoll_wait calls are raw system calls
// (rawsys.go): none can block, and entersyscall would wake a sleeping sysmon.
//
// # Concurrency model
//
// Loops (Config.Loops, default GOMAXPROCS; run the process with SchedulerProcs(Loops) Ps)
// each own an epoll instance, their client connections, their pools of worker connections
// (per address), their timers (a heap) and everything reachable from an Exchange. Accepted connections are dealt to the loops in turn;
// a request's worker connection is taken from its own loop's pool, so one request never
// crosses loops. Other goroutines talk to a loop only by posting tasks (a mutex-guarded
// queue and an eventfd). Handler and Forwarder callbacks run on the loop and must not
// block; a handler with blocking work detaches the exchange (Detach) and writes the answer
// from its goroutine through a Stream.
//
// # Buffers
//
// A worker connection over TLS also owns its ciphertext: what was read and not yet decrypted
// (whole records are handed to crypto/tls one at a time), and the sealed records not yet
// written (tls.go).
//
// A client connection owns its read buffer (the Request's views point into it until the
// exchange ends) and its output buffer. A worker connection owns its read buffer; the bytes
// of a relayed answer are framed into the client's output buffer as they are decoded. When a
// client's unsent output passes Config.OutputLimit, its worker connection stops being read
// (EPOLLIN off) until the client has taken half of it: memory per connection is bounded.
//
// A request body past Config.StreamBodyOver that Config.StreamBody accepts is not read whole:
// the request is served once that much of it is in, and its forward relays the rest to the
// worker as it arrives, the client read only while the worker's unsent bytes stay under
// OutputLimit (stream.go).
//
// # Exchanges
//
// The handler answers a request (Respond), or forwards it (Forward) with a Forwarder that
// decides at the response head whether the answer is relayed as it arrives (a stream) or
// held whole (so that it can be retried or replaced), and hears when the attempt ends. A
// client that hangs up ends its exchange at once: the worker connection is closed, so the
// engine sees the request cancelled, and the Forwarder gets ErrClientGone.
//
// # Calls
//
// A handler may send requests of its own beside the forward (Exchange.Call: a PD request's
// prefill leg goes out with the decode request, or before it), each on a worker connection
// of the same loop, its answer read whole and handed to a CallHandler. A call belongs to the
// loop, not to the exchange: it may finish after the exchange has ended (a prefill that
// outlives a relayed decode answer). An exchange can wait for one (Await, then Resume),
// answer with one (DeliverCall), or give its forward up when one failed (CancelForward);
// Release cancels a call still running (its connection closed).
//
// # Parking
//
// An exchange can wait for another goroutine without one of its own: Park, then the other
// side's Unparker wakes it on its loop (or the park's timeout does). The gateway's admission
// queue parks its waiters this way.
package evloop
