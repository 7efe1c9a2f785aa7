// Package fastpath is the gateway's request hot path on fasthttp: routing by path,
// extraction of routing fields from the request, pick, forward, relay, error envelopes,
// the worker admin API and the health probes.
package fastpath
