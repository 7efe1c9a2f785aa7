package fastpath

import (
	"encoding/json"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/worker"
)

// The admin routes and the worker API: the fan-outs are bounded in
// concurrency (the time bound is TestGetLoadsReportsEveryWorkerAndTheirFailures), and every
// new parser is fuzzed.

// TestFanOutAsksAtMostConcurrencyWorkersAtOnce: GET /get_loads over 12 engines with
// FanOut.Concurrency 3. Each engine holds its answer until 3 of the pass's calls are open (or a
// second passes, should a wave ever be short), so a fan-out without the bound would have all 12
// open at once; with it the engines see exactly 3 at a time: bounded, and still concurrent.
func TestFanOutAsksAtMostConcurrencyWorkersAtOnce(t *testing.T) {
	const engines, limit = 12, 3
	var open, most atomic.Int64
	fakes := make([]*fakeWorker, engines)
	for i := range fakes {
		fakes[i] = newEngineFake(t, func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) != "/v1/loads" {
				ctx.SetStatusCode(404)
				return
			}
			n := open.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			for wait := time.Now().Add(time.Second); open.Load() < limit && time.Now().Before(wait); {
				time.Sleep(time.Millisecond)
			}
			open.Add(-1)
			ctx.SetBodyString(`{"loads":[{"dp_rank":0,"num_used_tokens":7}]}`)
		})
	}
	g := newGateway(t, "round_robin", Config{FanOut: FanOutConfig{Concurrency: limit, Timeout: 30 * time.Second}}, fakes...)
	resp := g.do("GET", "/get_loads", "")
	var body struct {
		Workers []struct {
			Load  int64
			Error string
		}
	}
	decodeBody(t, resp.Body(), &body)
	if resp.StatusCode() != 200 || len(body.Workers) != engines {
		t.Fatalf("GET /get_loads: %d %s", resp.StatusCode(), resp.Body())
	}
	for i, w := range body.Workers {
		if w.Load != 7 || w.Error != "" {
			t.Errorf("worker %d: %+v", i, w)
		}
	}
	if m := most.Load(); m != limit {
		t.Fatalf("the engines saw at most %d calls of the pass at once, want %d (FanOut.Concurrency)", m, limit)
	}
}

// FuzzUsedTokens: GET /get_loads sums num_used_tokens over an engine's DP ranks from whatever
// the engine answers. It never panics, refuses what is not JSON, and a load it reports is
// never negative (a huge or negative count must not wrap or subtract).
func FuzzUsedTokens(f *testing.F) {
	for _, seed := range []string{
		`{"dp_rank_count":2,"loads":[{"dp_rank":0,"num_used_tokens":40},{"dp_rank":1,"num_used_tokens":1}]}`,
		`{"loads":[]}`,
		`{"loads":[{"num_used_tokens":-5},{"num_used_tokens":3.7}]}`,
		`{"loads":[{"num_used_tokens":1e300},{"num_used_tokens":1e19}]}`,
		`{"loads":[{"num_used_tokens":9223372036854775807},{"num_used_tokens":9223372036854775807}]}`,
		`{"loads":[{"num_used_tokens":null},{}]}`,
		`{"loads":{"num_used_tokens":1}}`,
		`{"loads":[{"num_used_tokens":"12"}]}`,
		`not json`, ``, `[]`, `null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := usedTokens(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("usedTokens(%q) = %d, accepted input that is not JSON", body, n)
		}
		if n < 0 {
			t.Fatalf("usedTokens(%q) = %d: a load is never negative", body, n)
		}
	})
}

// FuzzWorkerUpdate: the bodies of PATCH /workers/{id} and PUT /workers/{id} (and POST
// /workers) go through decodeStrict, a patch through apply. Whatever the body: no panic; a
// body decodeStrict accepts is one JSON value with only known fields; apply changes exactly
// the fields the patch names (labels merged, health overrides merged field by field) and
// never writes into the spec it was given a copy of (the registry hands it a clone, and
// readers of the current snapshot share the original's maps and pointers).
func FuzzWorkerUpdate(f *testing.F) {
	for _, seed := range []string{
		`{"priority":80,"labels":{"tier":"gold"},"health":{"check_interval_secs":5}}`,
		`{"cost":0.5,"api_key":"k","health":{"disable_health_check":true,"endpoint":"/h"}}`,
		`{"labels":{"a":"1","a":"2"}}`,
		`{"priorty":1}`,
		`{"priority":1} {"priority":2}`,
		`{"url":"http://10.0.0.1:8000","worker_type":"prefill","labels":{"sglang.ai/bootstrap-port":"8998"}}`,
		`{"url":"http://[::1]:8000","models":[{"id":"m"},"n"],"runtime_type":"vllm"}`,
		`{"health":null,"labels":null,"priority":null}`,
		`{"labels":{"keep":null,"new":"x"},"priority":-1}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec worker.Spec
		if err := decodeStrict(body, &spec); err == nil {
			if !json.Valid(body) {
				t.Fatalf("decodeStrict accepted %q, which is not one JSON value", body)
			}
			_ = spec.Normalize()
		}

		var p workerPatch
		if err := decodeStrict(body, &p); err != nil {
			return
		}
		one, interval := 1, 30
		base := worker.Spec{URL: "http://10.0.0.1:8000", Priority: &one, Labels: map[string]string{"keep": "v", "tier": "silver"},
			Health: &worker.HealthOverride{IntervalSecs: &interval}}
		baseLabels := maps.Clone(base.Labels)
		given := base
		given.Labels = maps.Clone(base.Labels) // what the registry does before calling the change
		next := p.apply(given)

		if !maps.Equal(base.Labels, baseLabels) || *base.Priority != 1 || *base.Health.IntervalSecs != 30 || base.Health.TimeoutSecs != nil {
			t.Fatalf("apply(%q) wrote into the current spec: %+v %+v", body, base, *base.Health)
		}
		if p.Priority != nil && *next.Priority != *p.Priority || p.Priority == nil && *next.Priority != 1 {
			t.Fatalf("apply(%q): priority %v", body, *next.Priority)
		}
		for k, v := range p.Labels {
			got, ok := next.Labels[k]
			if v == nil && ok || v != nil && got != *v {
				t.Fatalf("apply(%q): label %q = %q (present %v), want %v", body, k, got, ok, v)
			}
		}
		for k, v := range baseLabels {
			if _, named := p.Labels[k]; !named && next.Labels[k] != v {
				t.Fatalf("apply(%q): label %q not named by the patch changed to %q", body, k, next.Labels[k])
			}
		}
		if p.Health != nil && p.Health.IntervalSecs == nil && (next.Health.IntervalSecs == nil || *next.Health.IntervalSecs != 30) {
			t.Fatalf("apply(%q): a health patch without check_interval_secs dropped the worker's", body)
		}
		if p.APIKey != nil && next.APIKey != *p.APIKey || p.APIKey == nil && next.APIKey != "" {
			t.Fatalf("apply(%q): api_key %q", body, next.APIKey)
		}
		_ = next.Normalize()
	})
}
