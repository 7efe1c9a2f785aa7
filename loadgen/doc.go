// Package loadgen drives load against OpenAI-compatible endpoints and reports serving statistics.
package loadgen
