// Package enginemetrics re-labels engines' Prometheus text expositions so that the series of
// many workers can be served side by side: every sample gets the label worker="<url>", and
// samples are grouped by metric family with one HELP and TYPE line each. The gateway serves
// the result on GET /engine_metrics (spec product: "Engine-level metrics snapshot").
//
// # Parsing
//
// The parser reads the text format line by line: "# HELP" and "# TYPE" lines open a family,
// other comments are dropped, and a sample line is `name{labels} value [timestamp]`. A line
// that is not a well-formed sample (bad name, unterminated label value, missing value) is
// skipped and counted, never an error: one engine's odd line must not hide the others.
// A label named worker that the engine set itself is kept as exported_worker, as Prometheus
// does with honor_labels false.
//
// # Bounds
//
// A Merger keeps at most MaxSeries samples; the rest are dropped and counted, so an engine
// with a label explosion cannot make the gateway's answer unbounded.
//
// # Concurrency and ownership
//
// A Merger is used by one goroutine. Add copies what it keeps; the body passed to it may be
// reused as soon as Add returns.
package enginemetrics
