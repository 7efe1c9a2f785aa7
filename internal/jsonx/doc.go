// Package jsonx holds the JSON helpers the gateway, the mock engines, the load generator and
// the benchmarks share: allocation-free appends for hand-built JSON bodies, and one reader of
// JSON files whose errors name the file.
package jsonx
