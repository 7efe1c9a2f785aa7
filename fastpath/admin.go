package fastpath

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	// RuntimeType is the spec product's field, shown when the registration gave it.
	RuntimeType string `json:"runtime_type,omitempty"`
	// KVEventsEndpoint and KVEventsReplayEndpoint are an HTTP engine's KV-event sockets.
	KVEventsEndpoint       string `json:"kv_events_endpoint,omitempty"`
	KVEventsReplayEndpoint string `json:"kv_events_replay_endpoint,omitempty"`
}

func viewOf(w *worker.Worker) workerView {
	spec := w.Spec()
	v := workerView{
		ID: w.ID, URL: w.URL, Models: w.Models, WorkerType: spec.WorkerType, Labels: spec.Labels,
		Priority: *spec.Priority, Cost: *spec.Cost, IsHealthy: w.Routable(), Status: w.Status().String(),
		Load: w.InFlight.Load(), RuntimeType: spec.RuntimeType,
		KVEventsEndpoint: spec.KVEventsEndpoint, KVEventsReplayEndpoint: spec.KVEventsReplayEndpoint,
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
	defer func() { s.observe(routeWorkers, ctx.Response.StatusCode(), s.bridgedStart(ctx)) }()
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
	defer func() { s.observe(routeWorkers, ctx.Response.StatusCode(), s.bridgedStart(ctx)) }()
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
	case ctx.IsPatch():
		s.patchWorker(ctx, id)
	case ctx.IsPut():
		s.replaceWorker(ctx, id)
	default:
		writeAPIError(ctx, fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET, PATCH, PUT or DELETE on /workers/{id}")
		ctx.Response.Header.Set("Allow", "GET, PATCH, PUT, DELETE")
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
	// The spec product's clients read <type>_count; <type>_workers are SMG-Go's older names,
	// kept beside them for existing dashboards (docs/compatibility.md).
	for t, n := range byType {
		stats[t+"_count"] = n
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

// decodeStrict decodes one JSON value from body into v, refusing unknown fields: a misspelt
// field ("priorty") must not be dropped silently (docs/compatibility.md, worker specs).
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Only JSON white space may follow (dec.More would let a stray "}" or "]" through, found by
	// FuzzWorkerUpdate).
	if rest := bytes.Trim(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return errors.New("data after the JSON object")
	}
	return nil
}

// maxSpecBody bounds a worker API body (POST, PUT, PATCH /workers): a spec at every field's
// bound (worker.MaxLabels labels of worker.MaxLabelValueBytes, worker.MaxModels models...) is
// under 1 MiB, and refusing a larger body before decoding it keeps a huge one from being
// decoded into the maps and strings it describes.
const maxSpecBody = 1 << 20

// oversizeBodyKey is the user value by which the event loops' bridge passes the length of a
// worker API body past maxSpecBody instead of the body.
const oversizeBodyKey = "smg.oversizeBody"

// specBodyFits answers 413 and returns false when the body is past maxSpecBody.
func specBodyFits(ctx *fasthttp.RequestCtx) bool {
	n := len(ctx.PostBody())
	if v, ok := ctx.UserValue(oversizeBodyKey).(int); ok {
		n = v
	}
	if n > maxSpecBody {
		writeAPIError(ctx, fasthttp.StatusRequestEntityTooLarge, "SPEC_TOO_LARGE",
			fmt.Sprintf("worker spec body is %d bytes, at most %d allowed", n, maxSpecBody))
		return false
	}
	return true
}

// readSpec decodes and checks a worker spec (POST /workers, PUT /workers/{id}); it answers
// the client itself and returns false when the spec is refused.
func (s *Server) readSpec(ctx *fasthttp.RequestCtx, spec *worker.Spec) bool {
	if !specBodyFits(ctx) {
		return false
	}
	if err := decodeStrict(ctx.PostBody(), spec); err != nil {
		writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", "invalid worker spec: "+err.Error()+`; send {"url":"http://host:port", ...}`)
		return false
	}
	if err := spec.Normalize(); err != nil {
		code := "INVALID_REQUEST"
		if errors.Is(err, worker.ErrInvalidURL) {
			code = "INVALID_URL"
		}
		writeAPIError(ctx, fasthttp.StatusBadRequest, code, err.Error())
		return false
	}
	if s.cfg.ValidateSpec != nil {
		if err := s.cfg.ValidateSpec(spec); err != nil {
			writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", err.Error())
			return false
		}
	}
	return true
}

// workerPatch is the body of PATCH /workers/{id}: the fields given change, the others stay.
// labels are merged into the worker's (a key given replaces its value, as in the spec
// product; a key given null removes the label, which the spec product cannot do: its labels
// are strings); health overrides are merged field by field.
type workerPatch struct {
	Priority *int                   `json:"priority"`
	Cost     *float64               `json:"cost"`
	Labels   map[string]*string     `json:"labels"`
	APIKey   *string                `json:"api_key"`
	Health   *worker.HealthOverride `json:"health"`
}

func (p *workerPatch) apply(spec worker.Spec) worker.Spec {
	if p.Priority != nil {
		spec.Priority = p.Priority
	}
	if p.Cost != nil {
		spec.Cost = p.Cost
	}
	if len(p.Labels) > 0 && spec.Labels == nil {
		spec.Labels = make(map[string]string, len(p.Labels))
	}
	for k, v := range p.Labels {
		if v == nil {
			delete(spec.Labels, k)
		} else {
			spec.Labels[k] = *v
		}
	}
	if p.APIKey != nil {
		spec.APIKey = *p.APIKey
	}
	if h := p.Health; h != nil {
		merged := worker.HealthOverride{}
		if spec.Health != nil {
			merged = *spec.Health
		}
		for _, f := range [...]struct{ dst, src **int }{
			{&merged.IntervalSecs, &h.IntervalSecs}, {&merged.TimeoutSecs, &h.TimeoutSecs},
			{&merged.FailureThreshold, &h.FailureThreshold}, {&merged.SuccessThreshold, &h.SuccessThreshold},
		} {
			if *f.src != nil {
				*f.dst = *f.src
			}
		}
		if h.Endpoint != nil {
			merged.Endpoint = h.Endpoint
		}
		if h.Disable != nil {
			merged.Disable = h.Disable
		}
		spec.Health = &merged
	}
	return spec
}

// patchWorker serves PATCH /workers/{id}: priority, cost, labels, api_key and health
// overrides, applied by the registry's writer and visible in the next snapshot (202).
func (s *Server) patchWorker(ctx *fasthttp.RequestCtx, id string) {
	var p workerPatch
	if !specBodyFits(ctx) {
		return
	}
	if err := decodeStrict(ctx.PostBody(), &p); err != nil {
		writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", "invalid worker update: "+err.Error()+
			"; PATCH takes priority, cost, labels, api_key and health (use PUT for the whole spec)")
		return
	}
	s.updateWorker(ctx, id, func(cur worker.Spec) (worker.Spec, error) {
		next := p.apply(cur)
		return next, s.validateUpdate(&next)
	})
}

// replaceWorker serves PUT /workers/{id}: the whole spec, whose URL must be the worker's.
// Fields left out take their defaults, as in a registration, except the models: a spec
// that names none keeps the worker's (a registration would ask the worker, and what a live
// worker serves cannot change under it).
func (s *Server) replaceWorker(ctx *fasthttp.RequestCtx, id string) {
	var spec worker.Spec
	if !s.readSpec(ctx, &spec) {
		return
	}
	s.updateWorker(ctx, id, func(cur worker.Spec) (worker.Spec, error) {
		next := spec
		if next.ModelID == "" && len(next.Models) == 0 {
			next.ModelID, next.Models = cur.ModelID, cur.Models
		}
		return next, nil
	})
}

func (s *Server) validateUpdate(spec *worker.Spec) error {
	if err := spec.Normalize(); err != nil {
		return err
	}
	if s.cfg.ValidateSpec != nil {
		return s.cfg.ValidateSpec(spec)
	}
	return nil
}

// errInvalidUpdate marks an update the change function refused: the client's mistake.
var errInvalidUpdate = errors.New("invalid worker update")

func (s *Server) updateWorker(ctx *fasthttp.RequestCtx, id string, change func(worker.Spec) (worker.Spec, error)) {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := s.reg.Update(c, id, func(cur worker.Spec) (worker.Spec, error) {
		next, err := change(cur)
		if err != nil {
			return next, fmt.Errorf("%w: %w", errInvalidUpdate, err)
		}
		return next, nil
	})
	switch {
	case errors.Is(err, worker.ErrNotFound):
		writeAPIError(ctx, fasthttp.StatusNotFound, "WORKER_NOT_FOUND", "no worker has id "+id)
	case errors.Is(err, worker.ErrImmutable):
		writeAPIError(ctx, fasthttp.StatusBadRequest, "IMMUTABLE_FIELD", err.Error())
	case errors.Is(err, errInvalidUpdate):
		writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", strings.TrimPrefix(err.Error(), errInvalidUpdate.Error()+": "))
	case err != nil && (errors.Is(err, worker.ErrClosed) || errors.Is(err, context.DeadlineExceeded)):
		writeAPIError(ctx, fasthttp.StatusServiceUnavailable, "REGISTRY_UNAVAILABLE", err.Error())
	case err != nil: // Normalize refused the merged spec
		writeAPIError(ctx, fasthttp.StatusBadRequest, "INVALID_REQUEST", err.Error())
	default:
		writeJSON(ctx, fasthttp.StatusAccepted, map[string]string{
			"status": "accepted", "worker_id": w.ID, "url": w.URL, "message": "Worker update applied",
		})
	}
}

func (s *Server) addWorker(ctx *fasthttp.RequestCtx) {
	var spec worker.Spec
	if !s.readSpec(ctx, &spec) {
		return
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
	if err := spec.CheckLimits(); err != nil { // the models the worker declared
		writeAPIError(ctx, fasthttp.StatusBadGateway, "INVALID_WORKER_MODELS", "the worker's model list: "+err.Error())
		return
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
