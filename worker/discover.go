package worker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
)

// errNoModelID marks an answer that names no model: the next route is asked.
var errNoModelID = errors.New("no model id in the answer")

// DiscoverModels asks the worker at url which models it serves, for a spec that names none,
// as the spec's registration does (Capability query): SGLang's GET /model_info, then the
// deprecated GET /get_model_info, then the OpenAI GET /v1/models, which every engine serves
// (vLLM has neither of the first two). A route that answers 404, another error status, or a
// document without a model id passes to the next; a transport error ends the query. It runs
// on the control plane, bounded by ctx and 5 s in all.
func DiscoverModels(ctx context.Context, url, apiKey string) ([]string, error) {
	return discoverModels(ctx, fasthttp.DoDeadline, url, apiKey)
}

// ModelDiscoverer is DiscoverModels for https workers verified with tlsConfig (ClientOptions.TLS,
// --worker-ca-file); nil keeps the system's roots (DiscoverModels itself).
func ModelDiscoverer(tlsConfig *tls.Config) func(ctx context.Context, url, apiKey string) ([]string, error) {
	if tlsConfig == nil {
		return DiscoverModels
	}
	c := &fasthttp.Client{TLSConfig: tlsConfig, NoDefaultUserAgentHeader: true}
	return func(ctx context.Context, url, apiKey string) ([]string, error) {
		return discoverModels(ctx, c.DoDeadline, url, apiKey)
	}
}

func discoverModels(ctx context.Context, do doFunc, url, apiKey string) ([]string, error) {
	deadline := time.Now().Add(5 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var tried []string
	for _, route := range [...]struct {
		path  string
		parse func([]byte) ([]string, error)
	}{{"/model_info", parseModelInfo}, {"/get_model_info", parseModelInfo}, {"/v1/models", parseModelList}} {
		status, body, err := get(do, url+route.path, apiKey, deadline)
		if err != nil {
			return nil, fmt.Errorf("cannot ask %s for its models: %w", url, err)
		}
		if status == fasthttp.StatusOK {
			ids, err := route.parse(body)
			if err == nil && len(ids) > 0 {
				return ids, nil
			}
			if err == nil {
				err = errNoModelID
			}
			tried = append(tried, fmt.Sprintf("GET %s: %v", route.path, err))
			continue
		}
		tried = append(tried, fmt.Sprintf("GET %s answered %d", route.path, status))
	}
	return nil, fmt.Errorf("cannot learn the models of %s: %v", url, tried)
}

// doFunc sends a request (fasthttp.DoDeadline, or a Client's with the workers' TLS roots).
type doFunc func(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error

func get(do doFunc, uri, apiKey string, deadline time.Time) (int, []byte, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(uri)
	// No keep-alive: fasthttp's default client would keep the connection idle, with a
	// cleaner goroutine, for every worker ever registered.
	req.SetConnectionClose()
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if err := do(req, resp, deadline); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

// parseModelInfo reads SGLang's /model_info: the served model name when the engine gives it,
// else model_path (which SGLang also serves the model as by default).
func parseModelInfo(body []byte) ([]string, error) {
	var info struct {
		Served    string `json:"served_model_name"`
		ModelPath string `json:"model_path"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, err
	}
	for _, id := range []string{info.Served, info.ModelPath} {
		if id != "" {
			return []string{id}, nil
		}
	}
	return nil, nil
}

// parseModelList reads the OpenAI model list of /v1/models.
func parseModelList(body []byte) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}
