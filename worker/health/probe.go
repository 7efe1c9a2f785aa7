package health

import (
	"fmt"

	"github.com/valyala/fasthttp"
)

// probe GETs the worker's health endpoint on its probe connection (worker.Worker.Probe: kept
// between probes), with its Authorization if it has an API key, and the worker's timeout. Any 2xx answer is healthy; anything else, or no
// answer within the timeout, is an error that says why.
func probe(e *entry) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(e.uri)
	req.Header.SetMethod(fasthttp.MethodGet)
	if auth := e.w.AuthHeader(); len(auth) > 0 {
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, auth)
	}
	if err := e.w.Probe(req, resp, e.set.Timeout); err != nil {
		return fmt.Errorf("cannot probe %s: %w", e.uri, err)
	}
	if code := resp.StatusCode(); code < 200 || code > 299 {
		return fmt.Errorf("%s answered %d", e.uri, code)
	}
	return nil
}
