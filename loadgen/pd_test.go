package loadgen

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/smg-go/smg/loadgen/loadgentest"
	"github.com/valyala/fasthttp"
)

// pdSeen is a request body as a PD worker saw it.
type pdSeen struct {
	worker string
	path   string
	Host   string `json:"bootstrap_host"`
	Port   *int   `json:"bootstrap_port"`
	Room   *uint64
	Model  string `json:"model"`
	raw    map[string]json.RawMessage
}

// pdRecorder records every request of the fake PD workers.
type pdRecorder struct {
	mu   sync.Mutex
	seen []pdSeen
}

func (r *pdRecorder) hook(t *testing.T, worker string) func(*fasthttp.Request) {
	return func(req *fasthttp.Request) {
		var s pdSeen
		if err := json.Unmarshal(req.Body(), &s.raw); err != nil {
			t.Errorf("%s: body is not JSON: %v: %s", worker, err, req.Body())
			return
		}
		if err := json.Unmarshal(req.Body(), &s); err != nil {
			t.Errorf("%s: %v", worker, err)
		}
		var room uint64
		if err := json.Unmarshal(s.raw["bootstrap_room"], &room); err == nil {
			s.Room = &room
		}
		s.worker, s.path = worker, string(req.URI().Path())
		r.mu.Lock()
		r.seen = append(r.seen, s)
		r.mu.Unlock()
	}
}

// startPD starts nPrefill fake prefill and nDecode fake decode workers.
func startPD(t *testing.T, rec *pdRecorder, nPrefill, nDecode int, prefillOpts loadgentest.Options) (prefill, decode []string) {
	t.Helper()
	for i := range nPrefill {
		o := prefillOpts
		o.WorkerID = "p" + string(rune('0'+i))
		o.Record = rec.hook(t, o.WorkerID)
		prefill = append(prefill, strings.TrimSuffix(startServer(t, o).BaseURL, "/v1"))
	}
	for i := range nDecode {
		id := "d" + string(rune('0'+i))
		decode = append(decode, startServer(t, loadgentest.Options{WorkerID: id, Record: rec.hook(t, id)}).BaseURL) // with /v1: accepted
	}
	return prefill, decode
}

func TestPDSendsOneBodyToAPrefillAndADecodeWorker(t *testing.T) {
	for _, ep := range []Endpoint{EndpointChat, EndpointCompletions, EndpointGenerate} {
		for _, stream := range []bool{false, true} {
			t.Run(string(ep)+map[bool]string{false: "/json", true: "/sse"}[stream], func(t *testing.T) {
				rec := &pdRecorder{}
				prefill, decode := startPD(t, rec, 2, 2, loadgentest.Options{})
				cfg := smallRandom("")
				cfg.Endpoint, cfg.Stream, cfg.NumRequests = ep, stream, 20
				cfg.PD = PDConfig{Prefill: prefill, Decode: decode, BootstrapPort: 8998}
				res, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if res.Completed != 20 || res.Failed != 0 {
					t.Fatalf("completed %d failed %d (%v), want 20 and 0", res.Completed, res.Failed, res.ErrorExamples)
				}
				// The decode's answers are the measured ones: only decode workers are counted.
				if res.Workers["d0"] != 10 || res.Workers["d1"] != 10 || len(res.Workers) != 2 {
					t.Errorf("workers %v, want d0 and d1 10 each (round robin)", res.Workers)
				}
				if res.TotalOutputTokens == 0 || res.E2E.Count != 20 {
					t.Errorf("output tokens %d, e2e samples %d", res.TotalOutputTokens, res.E2E.Count)
				}
				checkPDPairs(t, rec, prefill, 20, 8998)
			})
		}
	}
}

// checkPDPairs checks that each of n rooms went to one prefill and one decode, with the
// same body and the prefill's own host, and that prefills were used round robin.
func checkPDPairs(t *testing.T, rec *pdRecorder, prefill []string, n, port int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	type pair struct{ prefill, decode *pdSeen }
	rooms := map[uint64]*pair{}
	perPrefill := map[string]int{}
	for i := range rec.seen {
		s := &rec.seen[i]
		if s.Room == nil {
			t.Fatalf("%s got no integer bootstrap_room: %v", s.worker, s.raw)
		}
		if *s.Room >= 1<<63 {
			t.Errorf("room %d is not a uint63", *s.Room)
		}
		if port == 0 {
			if string(s.raw["bootstrap_port"]) != "null" {
				t.Errorf("bootstrap_port %s, want null", s.raw["bootstrap_port"])
			}
		} else if s.Port == nil || *s.Port != port {
			t.Errorf("bootstrap_port %s, want %d", s.raw["bootstrap_port"], port)
		}
		p := rooms[*s.Room]
		if p == nil {
			p = &pair{}
			rooms[*s.Room] = p
		}
		if s.worker[0] == 'p' {
			if p.prefill != nil {
				t.Errorf("room %d sent to two prefills", *s.Room)
			}
			p.prefill = s
			perPrefill[s.worker]++
		} else {
			if p.decode != nil {
				t.Errorf("room %d sent to two decodes", *s.Room)
			}
			p.decode = s
		}
	}
	u, _ := url.Parse(prefill[0])
	for room, p := range rooms {
		if p.prefill == nil || p.decode == nil {
			t.Errorf("room %d: prefill %v, decode %v: want both", room, p.prefill != nil, p.decode != nil)
			continue
		}
		if p.prefill.Host != u.Hostname() || p.decode.Host != u.Hostname() {
			t.Errorf("room %d: bootstrap_host %q/%q, want %q", room, p.prefill.Host, p.decode.Host, u.Hostname())
		}
		if p.prefill.path != p.decode.path || len(p.prefill.raw) != len(p.decode.raw) {
			t.Errorf("room %d: prefill and decode requests differ: %s %v / %s %v", room, p.prefill.path, p.prefill.raw, p.decode.path, p.decode.raw)
		}
	}
	if len(rooms) != n {
		t.Errorf("%d rooms, want %d (one per request)", len(rooms), n)
	}
	for _, id := range []string{"p0", "p1"} {
		if len(prefill) == 2 && perPrefill[id] != n/2 {
			t.Errorf("prefill %s got %d requests, want %d (round robin)", id, perPrefill[id], n/2)
		}
	}
}

func TestPDNullBootstrapPort(t *testing.T) {
	rec := &pdRecorder{}
	prefill, decode := startPD(t, rec, 1, 1, loadgentest.Options{})
	cfg := smallRandom("")
	cfg.NumRequests = 6
	cfg.PD = PDConfig{Prefill: prefill, Decode: decode}
	res, err := Run(context.Background(), cfg)
	if err != nil || res.Completed != 6 {
		t.Fatalf("err %v, result %+v", err, res)
	}
	checkPDPairs(t, rec, prefill, 6, 0)
}

func TestPDFailedPrefillFailsTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   loadgentest.Options
		failed int64
		detail string
	}{
		{"status", loadgentest.Options{FailEvery: 2}, 5, "HTTP 503"},
		{"truncated stream", loadgentest.Options{OmitDone: true}, 10, "stream ended before data: [DONE]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &pdRecorder{}
			prefill, decode := startPD(t, rec, 1, 1, tc.opts)
			cfg := smallRandom("")
			cfg.NumRequests, cfg.MaxConcurrency = 10, 1
			cfg.PD = PDConfig{Prefill: prefill, Decode: decode}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed != tc.failed || res.Completed != 10-tc.failed || res.StatusCounts["prefill_error"] != tc.failed {
				t.Fatalf("completed %d failed %d %v, want %d prefill_error", res.Completed, res.Failed, res.StatusCounts, tc.failed)
			}
			if ex := res.ErrorExamples["prefill_error"]; !strings.Contains(ex, tc.detail) || !strings.Contains(ex, prefill[0]) {
				t.Errorf("example %q, want the prefill URL and %q", ex, tc.detail)
			}
		})
	}
}

func TestPDUnreachablePrefill(t *testing.T) {
	rec := &pdRecorder{}
	_, decode := startPD(t, rec, 0, 1, loadgentest.Options{})
	cfg := smallRandom("")
	cfg.NumRequests = 3
	cfg.PD = PDConfig{Prefill: []string{"http://127.0.0.1:1"}, Decode: decode}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 3 || res.StatusCounts["prefill_error"] != 3 {
		t.Fatalf("failed %d %v, want 3 prefill_error", res.Failed, res.StatusCounts)
	}
}

func TestPDValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string // "" = valid
	}{
		{"ok", func(c *Config) {}, ""},
		{"no decode", func(c *Config) { c.PD.Decode = nil }, "at least one prefill (--pd-prefill) and one decode"},
		{"base url too", func(c *Config) { c.BaseURL = "http://x/v1" }, "exclude each other"},
		{"bad url", func(c *Config) { c.PD.Prefill = []string{"127.0.0.1:80"} }, "is not an http:// or https:// URL"},
		{"bad port", func(c *Config) { c.PD.BootstrapPort = 70000 }, "is not a port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.Model = "m"
			c.PD = PDConfig{Prefill: []string{"http://127.0.0.1:30001"}, Decode: []string{"http://127.0.0.1:30002"}, BootstrapPort: 8998}
			tc.set(&c)
			err := c.Validate()
			if tc.want == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
