package fastpath

import (
	"context"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/worker"
)

// TestReadinessFollowsTheRouteTable: the registry publishes a snapshot before the router has
// built the table from it; readiness must not say "ready" for workers requests cannot reach
// yet (a client's first requests then met 404 model_not_found).
func TestReadinessFollowsTheRouteTable(t *testing.T) {
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	pc := all.DefaultConfig()
	pc.Logger = testutil.Quiet
	builders, err := all.NewBuilderFunc(pc)
	if err != nil {
		t.Fatal(err)
	}
	router, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: "round_robin", NewBuilder: builders, Logger: testutil.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(withDefaults(Config{Logger: testutil.Quiet}), reg, router) // not subscribed: the table lags
	if err != nil {
		t.Fatal(err)
	}
	spec := worker.Spec{URL: "http://10.0.0.1:8000", ModelID: "m1"}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Add(context.Background(), spec, worker.StatusReady); err != nil {
		t.Fatal(err)
	}
	readiness := func() (int, string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		srv.serveReadiness(&ctx)
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	if code, body := readiness(); code != 503 || !strings.Contains(body, `"healthy_workers":0`) {
		t.Fatalf("readiness before the table has the worker: %d %s, want 503", code, body)
	}
	router.Update(reg.Current())
	if code, body := readiness(); code != 200 || !strings.Contains(body, `"healthy_workers":1`) {
		t.Fatalf("readiness once the table has the worker: %d %s, want 200", code, body)
	}
}
