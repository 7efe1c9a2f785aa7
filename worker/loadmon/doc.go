// Package loadmon polls each worker's load off the hot path and publishes it on the worker as
// an atomic pointer (Worker.SetLoad), where least_load, power_of_two and cache_aware read it.
//
// Every --load-monitor-interval seconds (default 10) each registered worker is asked for
// SGLang's GET /v1/loads, whatever the engine, and falls back to the engine's Prometheus
// /metrics (SGLang's sglang:* or vLLM's vllm:* gauges) when that route does not answer with a
// report. The route that answered is remembered per worker and asked first next time. A
// worker that stops answering keeps its last report for MaxReportAge (default three
// intervals), after which the report is dropped and policies fall back to the in-flight count.
// --disable-load-monitoring stops polling unless a load-aware policy needs the reports.
//
// # Concurrency
//
// Run owns one goroutine. It polls every worker at once when it starts, then ticks every
// interval ÷ worker.PhaseSlices and polls the workers of one phase per tick
// (worker.Worker.Phase: dense indexes spread any fleet evenly), so each worker is polled once
// per interval and a fleet of 10,000 never in one burst. Each tick polls with at most
// Concurrency goroutines that exit when it ends, each poll bounded by Timeout, so a slow
// worker delays only its own report.
// Polls go over the worker's probe connection (worker.Worker.Probe), kept open between polls
// and shared with the health checker: one connection per worker, no goroutine per connection.
// Publishing is one atomic store per worker; a new report also resets the worker's
// since-report dispatch counters, whose work it now includes.
//
// # Ownership
//
// Responses are read into pooled fasthttp buffers and parsed with pooled fastjson parsers; a
// published LoadReport is a fresh allocation, immutable once stored. Nothing of a response body
// is retained.
package loadmon
