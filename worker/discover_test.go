package worker

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// engine serves the given routes (path → body); others answer 404.
func engine(t *testing.T, routes map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if b, ok := routes[string(ctx.Path())]; ok {
			ctx.SetBodyString(b)
			return
		}
		ctx.SetStatusCode(404)
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func TestDiscoverModelsAsksModelInfoThenGetModelInfoThenV1Models(t *testing.T) {
	list := `{"object":"list","data":[{"id":"a"},{"id":"b"}]}`
	cases := []struct {
		name   string
		routes map[string]string
		want   []string
	}{
		{"sglang", map[string]string{"/model_info": `{"model_path":"meta/llama","is_generation":true}`, "/v1/models": list}, []string{"meta/llama"}},
		{"served name", map[string]string{"/model_info": `{"model_path":"/models/x","served_model_name":"x"}`}, []string{"x"}},
		{"deprecated route", map[string]string{"/get_model_info": `{"model_path":"old"}`, "/v1/models": list}, []string{"old"}},
		{"vllm", map[string]string{"/v1/models": list}, []string{"a", "b"}},
		{"model_info without an id", map[string]string{"/model_info": `{"is_generation":true}`, "/v1/models": list}, []string{"a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DiscoverModels(context.Background(), engine(t, c.routes), "")
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
	_, err := DiscoverModels(context.Background(), engine(t, map[string]string{"/model_info": "not json"}), "")
	if err == nil || !strings.Contains(err.Error(), "/v1/models answered 404") || !strings.Contains(err.Error(), "/model_info") {
		t.Fatalf("an engine that names no model: %v", err)
	}
}

func FuzzParseModelAnswers(f *testing.F) {
	f.Add([]byte(`{"model_path":"m","served_model_name":"s"}`))
	f.Add([]byte(`{"data":[{"id":"a"},{"id":""},{}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, parse := range []func([]byte) ([]string, error){parseModelInfo, parseModelList} {
			ids, err := parse(body)
			if err != nil && ids != nil {
				t.Fatalf("ids %v with error %v", ids, err)
			}
			if slices.Contains(ids, "") {
				t.Fatalf("an empty model id from %q", body)
			}
		}
	})
}
