package fastpath

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/worker"
)

// The worker API (spec product: /workers). It runs on the control plane: it may allocate and
// block its own connection, never the hot path.

// workerView is a worker as GET /workers shows it; the API key never appears.
type workerView struct {
	ID         string            `json:"id"`
	URL        string            `json:"url"`
	ModelID    string            `json:"model_id"`
	Models     []string          `json:"models,omitempty"`
	WorkerType string            `json:"worker_type"`
	Labels     map[string]string `json:"labels"`
	Priority   int               `json:"priority"`
	Cost       float64           `json:"cost"`
	IsHealthy  bool              `json:"is_healthy"`
	Status     string            `json:"status"`
	Load       int64             `json:"load"`
}

func viewOf(w *worker.Worker) workerView {
	spec := w.Spec()
	v := workerView{
		ID: w.ID, URL: w.URL, Models: w.Models, WorkerType: spec.WorkerType, Labels: spec.Labels,
		Priority: *spec.Priority, Cost: *spec.Cost, IsHealthy: w.Routable(), Status: w.Status().String(),
		Load: w.InFlight.Load(),
	}
	if len(w.Models) > 0 {
		v.ModelID = w.Models[0]
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	return v
}

func workerIDFromPath(path []byte) (string, bool) {
	id, ok := bytes.CutPrefix(path, []byte("/workers/"))
	if !ok || len(id) == 0 || bytes.IndexByte(id, '/') >= 0 {
		return "", false
	}
	return string(id), true
}

// authorized enforces --api-key on the worker API.
func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	got := ctx.Request.Header.Peek("Authorization")
	want := "Bearer " + s.cfg.APIKey
	if subtle.ConstantTimeCompare(got, []byte(want)) == 1 {
		return true
	}
	writeAPIError(ctx, fasthttp.StatusUnauthorized, "UNAUTHORIZED", "the worker API needs the header 'Authorization: Bearer <--api-key>'")
	return false
}

func (s *Server) serveWorkers(ctx *fasthttp.RequestCtx) {
	defer func() { s.m.observe(routeWorkers, ctx.Response.StatusCode(), ctx.Time()) }()
	if !s.authorized(ctx) {
		return
	}
	switch {
	case ctx.IsGet():
		s.listWorkers(ctx)
	case ctx.IsPost():
		s.addWorker(ctx)
	default:
		writeAPIError(ctx, fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET or POST on /workers")
		ctx.Response.Header.Set("Allow", "GET, POST")
	}
}

func (s *Server) serveWorker(ctx *fasthttp.RequestCtx, id string) {
	defer func() { s.m.observe(routeWorkers, ctx.Response.StatusCode(), ctx.Time()) }()
	if !s.authorized(ctx) {
		return
	}
	switch {
	case ctx.IsGet():
		w := s.reg.Current().ByID(id)
		if w == nil {
			writeAPIError(ctx, fasthttp.StatusNotFound, "WORKER_NOT_FOUND", "no worker has id "+id)
			return
		}
		writeJSON(ctx, fasthttp.StatusOK, viewOf(w))
	case ctx.IsDelete():
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w, err := s.removeWorker(c, id)
		if errors.Is(err, worker.ErrNotFound) {
			writeAPIError(ctx, fasthttp.StatusNotFound, "WORKER_NOT_FOUND", "no worker has id "+id)
			return
		}
		if err != nil {
			writeAPIError(ctx, fasthttp.StatusServiceUnavailable, "REGISTRY_UNAVAILABLE", err.Error())
			return
		}
		writeJSON(ctx, fasthttp.StatusAccepted, map[string]string{
			"status": "accepted", "worker_id": w.ID, "url": w.URL, "message": "Worker removal queued",
		})
	default:
		writeAPIError(ctx, fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET or DELETE on /workers/{id}")
		ctx.Response.Header.Set("Allow", "GET, DELETE")
	}
}

// removeWorker drains a Ready worker for --drain-settle-secs (it gets no new requests, those
// it has finish) and then removes it; a worker that is not Ready leaves at once (spec:
// Removal Flow).
func (s *Server) removeWorker(ctx context.Context, id string) (*worker.Worker, error) {
	w := s.reg.Current().ByID(id)
	if w == nil {
		return nil, fmt.Errorf("%w: no worker has id %q", worker.ErrNotFound, id)
	}
	if s.cfg.DrainSettle <= 0 || !w.Ready() {
		return s.reg.Remove(ctx, id)
	}
	if _, err := s.reg.Drain(ctx, id); err != nil {
		return nil, err
	}
	s.log.Info("Draining worker", "worker_id", id, "url", w.URL, "settle", s.cfg.DrainSettle)
	time.AfterFunc(s.cfg.DrainSettle, func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.reg.Remove(c, id); err != nil && !errors.Is(err, worker.ErrNotFound) {
			s.log.Error("Cannot remove drained worker", "worker_id", id, "error", err)
		}
	})
	return w, nil
}

func (s *Server) listWorkers(ctx *fasthttp.RequestCtx) {
	snap := s.reg.Current()
	model := string(ctx.QueryArgs().Peek("model"))
	views := []workerView{}
	stats := map[string]int{"total_workers": 0, "healthy_workers": 0, "total_load": 0}
	byType := map[string]int{worker.TypeRegular: 0, worker.TypePrefill: 0, worker.TypeDecode: 0}
	for _, w := range snap.Workers {
		if model != "" && !serves(w, model) {
			continue
		}
		v := viewOf(w)
		views = append(views, v)
		stats["total_workers"]++
		if v.IsHealthy {
			stats["healthy_workers"]++
		}
		stats["total_load"] += int(v.Load)
		byType[v.WorkerType]++
	}
	for t, n := range byType {
		stats[t+"_workers"] = n
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"workers": views, "total": len(views), "stats": stats})
}

func serves(w *worker.Worker, model string) bool {
	for _, m := range w.Models {
		if m == model {
			return true
		}
	}
	return false
}

func (s *Server) addWorker(ctx *fasthttp.RequestCtx) {
	var spec worker.Spec
	dec := json.NewDecoder(bytes.NewReader(ctx.PostBody()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", "invalid worker spec: "+err.Error()+`; send {"url":"http://host:port", ...}`)
		return
	}
	if err := spec.Normalize(); err != nil {
		code := "INVALID_REQUEST"
		if errors.Is(err, worker.ErrInvalidURL) {
			code = "INVALID_URL"
		}
		writeAPIError(ctx, fasthttp.StatusBadRequest, code, err.Error())
		return
	}
	if s.cfg.ValidateSpec != nil {
		if err := s.cfg.ValidateSpec(&spec); err != nil {
			writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", err.Error())
			return
		}
	}
	if w := s.reg.Current().ByURL(spec.URL); w != nil {
		writeAPIError(ctx, fasthttp.StatusConflict, "WORKER_ALREADY_EXISTS", "worker "+spec.URL+" is already registered as "+w.ID)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.isOwnAddress(c, spec.URL) {
		writeAPIError(ctx, fasthttp.StatusBadRequest, "WORKER_IS_GATEWAY", "worker "+spec.URL+" is this gateway's own address: requests sent to it would come back here")
		return
	}
	if spec.ModelID == "" && len(spec.Models) == 0 && s.DiscoverModels != nil {
		if models, err := s.DiscoverModels(c, spec.URL, spec.APIKey); err == nil && len(models) > 0 {
			spec.ModelID, spec.Models = models[0], models[1:]
		} else if err != nil {
			s.log.Warn("Cannot discover the worker's models; it will serve requests for any model", "url", spec.URL, "error", err)
		}
	}
	status := worker.StatusReady
	if s.cfg.InitialStatus != nil {
		status = s.cfg.InitialStatus(&spec)
	}
	w, err := s.reg.Add(c, spec, status)
	if errors.Is(err, worker.ErrAlreadyExists) {
		writeAPIError(ctx, fasthttp.StatusConflict, "WORKER_ALREADY_EXISTS", err.Error())
		return
	}
	if errors.Is(err, worker.ErrTooManyWorkers) {
		writeAPIError(ctx, fasthttp.StatusConflict, "WORKER_LIMIT_REACHED", err.Error())
		return
	}
	if err != nil {
		writeAPIError(ctx, fasthttp.StatusServiceUnavailable, "REGISTRY_UNAVAILABLE", err.Error())
		return
	}
	ctx.Response.Header.Set("Location", "/workers/"+w.ID)
	writeJSON(ctx, fasthttp.StatusAccepted, map[string]string{
		"status": "accepted", "worker_id": w.ID, "url": w.URL, "location": "/workers/" + w.ID,
		"message": "Worker addition queued",
	})
}

// writeAPIError answers in the worker API's envelope {"error","code"}.
func writeAPIError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	writeJSON(ctx, status, map[string]string{"error": msg, "code": code})
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = fasthttp.StatusInternalServerError, []byte(`{"error":"cannot encode response","code":"INTERNAL"}`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
