package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
)

// DiscoverModels asks the worker at url which models it serves (GET /v1/models), for a spec
// that names none. It runs on the control plane, bounded by ctx and 5 s.
func DiscoverModels(ctx context.Context, url, apiKey string) ([]string, error) {
	deadline := time.Now().Add(5 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url + "/v1/models")
	// No keep-alive: fasthttp's default client would keep the connection idle, with a
	// cleaner goroutine, for every worker ever registered (issue 17).
	req.SetConnectionClose()
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if err := fasthttp.DoDeadline(req, resp, deadline); err != nil {
		return nil, fmt.Errorf("cannot list models of %s: %w", url, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("cannot list models of %s: GET /v1/models answered %d", url, resp.StatusCode())
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body(), &list); err != nil {
		return nil, fmt.Errorf("cannot list models of %s: %w", url, err)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}
