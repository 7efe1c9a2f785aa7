// Package testutil holds the helpers every package's tests share: Eventually (poll until a
// condition holds), NewRand (a seeded, reproducible random source) and Logger (a slog.Logger
// writing into a concurrency-safe buffer the test reads, internal/syncbuf).
//
// It imports nothing of the gateway, so any package's tests may use it.
package testutil
