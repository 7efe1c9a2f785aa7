// Package bench holds the end-to-end benchmark harness behind make bench.
package bench
