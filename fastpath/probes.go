package fastpath

import (
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/worker"
)

func (s *Server) serveLiveness(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		s.methodNotAllowed(ctx, routeProbe, "GET")
		return
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("OK")
	s.observe(routeProbe, fasthttp.StatusOK, s.bridgedStart(ctx))
}

// serveReadiness answers 200 while the gateway can route (not draining, at least one healthy
// worker; in PD mode at least one healthy prefill and one healthy decode worker, in EPD mode
// also an encode worker), else 503 with the reason.
func (s *Server) serveReadiness(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		s.methodNotAllowed(ctx, routeProbe, "GET")
		return
	}
	// The workers counted are those the route table requests are served from routes to, not
	// the registry's latest snapshot nor the table's snapshot with live statuses: a worker
	// turns ready before the router has built the table that routes to it, and a probe
	// answering "ready" in between sent a client's first requests to a table without the
	// worker (404 model_not_found, 503 no_available_workers).
	tab := s.router.Current()
	snap := tab.Snapshot
	healthy, encode, prefill, decode := 0, 0, 0, 0
	for _, w := range tab.RoutedWorkers() {
		if w.Routable() {
			healthy++
			switch w.Type() {
			case worker.TypePrefill:
				prefill++
			case worker.TypeDecode:
				decode++
			case worker.TypeEncode:
				encode++
			}
		}
	}
	pd, epd := tab.PD, tab.EPD
	body := map[string]any{"status": "ready", "healthy_workers": healthy, "total_workers": len(snap.Workers)}
	if pd {
		body["healthy_prefill_workers"], body["healthy_decode_workers"] = prefill, decode
	}
	if epd {
		body["healthy_encode_workers"] = encode
	}
	status := fasthttp.StatusOK
	notReady := func(reason string) {
		status, body["status"], body["reason"] = fasthttp.StatusServiceUnavailable, "not ready", reason
	}
	switch {
	case s.Draining():
		notReady("draining")
	case pd && prefill == 0:
		notReady("no healthy prefill workers")
	case pd && decode == 0:
		notReady("no healthy decode workers")
	case epd && encode == 0:
		notReady("no healthy encode workers")
	case healthy == 0:
		notReady("no healthy workers")
	}
	writeJSON(ctx, status, body)
	s.observe(routeProbe, status, s.bridgedStart(ctx))
}

type modelView struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// serveModels lists the models the workers declare, OpenAI style.
func (s *Server) serveModels(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		s.methodNotAllowed(ctx, routeModels, "GET")
		return
	}
	models := s.reg.Current().Models()
	data := make([]modelView, 0, len(models))
	for _, m := range models {
		data = append(data, modelView{ID: m, Object: "model", Created: s.started.Unix(), OwnedBy: "smg"})
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"object": "list", "data": data})
	s.observe(routeModels, fasthttp.StatusOK, s.bridgedStart(ctx))
}
