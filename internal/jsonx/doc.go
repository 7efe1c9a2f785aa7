// Package jsonx holds the one JSON string encoder the gateway, the mock engines and the load
// generator share: allocation-free appends for hand-built JSON bodies.
package jsonx
