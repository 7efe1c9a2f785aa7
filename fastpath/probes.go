package fastpath

import (
	"github.com/valyala/fasthttp"
)

func (s *Server) serveLiveness(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		s.methodNotAllowed(ctx, routeProbe, "GET")
		return
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("OK")
	s.m.observe(routeProbe, fasthttp.StatusOK, ctx.Time())
}

// serveReadiness answers 200 while the gateway can route (not draining, at least one healthy
// worker), else 503 with the reason.
func (s *Server) serveReadiness(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() && !ctx.IsHead() {
		s.methodNotAllowed(ctx, routeProbe, "GET")
		return
	}
	snap := s.reg.Current()
	healthy := 0
	for _, w := range snap.Workers {
		if w.Routable() {
			healthy++
		}
	}
	total := len(snap.Workers)
	switch {
	case s.Draining():
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": "draining", "healthy_workers": healthy, "total_workers": total})
	case healthy == 0:
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": "no healthy workers", "healthy_workers": healthy, "total_workers": total})
	default:
		writeJSON(ctx, fasthttp.StatusOK, map[string]any{"status": "ready", "healthy_workers": healthy, "total_workers": total})
	}
	s.m.observe(routeProbe, ctx.Response.StatusCode(), ctx.Time())
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
	s.m.observe(routeModels, fasthttp.StatusOK, ctx.Time())
}
