package main

import (
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/telemetry"
)

// registerTelemetryFlags registers the access log's flag into o.
func registerTelemetryFlags(fs *cli.FlagSet, o *options) {
	o.telemetry = telemetry.DefaultConfig()
	fs.Bool("disable-access-log", &o.disableAccessLog, !o.telemetry.AccessLog,
		"Do not log a line per request at info level (error answers are still logged, at warn and error)")
}

// startTelemetry starts the sink that turns finished requests into the per-model metrics,
// the access log and the error lines. Drain stops it after the last request, before the
// final log line.
func (g *gateway) startTelemetry() error {
	tc := g.o.telemetry
	tc.Metrics, tc.Logger, tc.AccessLog = g.set, g.log, !g.o.disableAccessLog
	adm := g.o.gateway.Admission
	tc.AdmissionLimits = adm.MaxConcurrent > 0 || adm.RatePerSecond > 0
	tracer, err := g.startTracer()
	if err != nil {
		return err
	}
	if tracer != nil { // started first, so that it is stopped after the sink handed it the last records
		tc.Exporters = append(tc.Exporters, tracer)
	}
	sink, err := telemetry.New(tc)
	if err != nil {
		return err
	}
	sink.Start()
	g.telemetry = sink
	g.onClose(sink.Close)
	g.background = append(g.background, sink.Close)
	return nil
}
