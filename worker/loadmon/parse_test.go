package loadmon

import (
	"errors"
	"math"
	"testing"
	"unsafe"

	"github.com/smg-go/smg/worker"
	"github.com/valyala/fastjson"
)

// mockLoads is the document mockworker serves (one DP rank).
const mockLoads = `{"timestamp":"2025-01-01T00:00:00Z","version":"mock","dp_rank_count":1,"loads":[{"dp_rank":0,"num_running_reqs":3,"num_waiting_reqs":2,"num_total_reqs":5,"num_used_tokens":900,"max_total_num_tokens":1000,"token_usage":0.9,"gen_throughput":812.5,"cache_hit_rate":0.4,"utilization":0.1,"max_running_requests":64,"num_waiting_uncached_tokens":3072}],"aggregate":{"total_running_reqs":3,"total_waiting_reqs":2,"total_reqs":5,"avg_token_usage":0.9,"avg_throughput":812.5,"avg_utilization":0.1}}`

const twoRanks = `{"loads":[
 {"dp_rank":0,"num_running_reqs":1,"num_waiting_reqs":4,"token_usage":0.2,"gen_throughput":100,"num_waiting_uncached_tokens":10,"max_total_num_tokens":4096},
 {"dp_rank":1,"num_running_reqs":2,"num_waiting_reqs":6,"token_usage":0.6,"gen_throughput":300,"num_waiting_uncached_tokens":30,"max_total_num_tokens":4096}]}`

func TestParseLoads(t *testing.T) {
	var p fastjson.Parser
	cases := []struct {
		name string
		body string
		want worker.LoadReport
	}{
		{"mockworker", mockLoads, worker.LoadReport{WaitingRequests: 2, RunningRequests: 3, WaitingTokens: 3072, TokenUsage: 0.9, GenThroughput: 812.5, KVCapacityTokens: 1000}},
		{"summed and averaged across DP ranks", twoRanks, worker.LoadReport{WaitingRequests: 10, RunningRequests: 3, WaitingTokens: 40, TokenUsage: 0.4, GenThroughput: 400, KVCapacityTokens: 8192}},
		{"no token count", `{"loads":[{"num_waiting_reqs":1,"token_usage":0.5}]}`, worker.LoadReport{WaitingRequests: 1, WaitingTokens: -1, TokenUsage: 0.5}},
		{"garbage values are clamped", `{"loads":[{"num_waiting_reqs":-4,"token_usage":7,"gen_throughput":-1}]}`, worker.LoadReport{WaitingTokens: -1, TokenUsage: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r worker.LoadReport
			if err := ParseLoads(&p, []byte(c.body), &r); err != nil {
				t.Fatal(err)
			}
			if !same(r, c.want) {
				t.Fatalf("got %+v, want %+v", r, c.want)
			}
		})
	}
	for _, bad := range []string{``, `{}`, `{"loads":[]}`, `{"loads":[1]}`, `<html>404</html>`, `{"loads":`} {
		var r worker.LoadReport
		if err := ParseLoads(&p, []byte(bad), &r); err == nil {
			t.Errorf("ParseLoads(%q) accepted", bad)
		}
	}
}

const sglangMetrics = `# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",engine_type="unified"} 7.0
sglang:num_running_reqs{model_name="m",engine_type="unified"} 12.0
sglang:token_usage{model_name="m",engine_type="unified"} 0.25
sglang:gen_throughput{model_name="m",engine_type="unified"} 1500.5
sglang:cache_hit_rate{model_name="m"} 0.9
`

const vllmMetrics = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 4
vllm:num_requests_running{engine="1",model_name="m"} 5
vllm:num_requests_waiting{engine="0",model_name="m"} 1 1700000000000
vllm:num_requests_waiting{engine="1",model_name="m"} 2
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m\"}"} 0.7
vllm:generation_tokens_total{model_name="m"} 123456
`

func TestParseMetrics(t *testing.T) {
	cases := []struct {
		name, body string
		want       worker.LoadReport
	}{
		{"sglang", sglangMetrics, worker.LoadReport{WaitingRequests: 7, RunningRequests: 12, WaitingTokens: -1, TokenUsage: 0.25, GenThroughput: 1500.5}},
		{"vllm, two engines, a timestamp and a quoted brace", vllmMetrics, worker.LoadReport{WaitingRequests: 3, RunningRequests: 9, WaitingTokens: -1, TokenUsage: 0.6}},
		{"older vllm gauge name", "vllm:gpu_cache_usage_perc 0.3\r\nvllm:num_requests_waiting 1\n", worker.LoadReport{WaitingRequests: 1, WaitingTokens: -1, TokenUsage: 0.3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r worker.LoadReport
			if err := ParseMetrics([]byte(c.body), &r); err != nil {
				t.Fatal(err)
			}
			if !same(r, c.want) {
				t.Fatalf("got %+v, want %+v", r, c.want)
			}
		})
	}
	var r worker.LoadReport
	if err := ParseMetrics([]byte("# nothing\nprocess_cpu_seconds_total 3\nsglang:num_queue_reqs{ 4\n"), &r); !errors.Is(err, ErrNoMetrics) {
		t.Fatalf("err = %v, want ErrNoMetrics", err)
	}
}

func same(a, b worker.LoadReport) bool {
	return a.WaitingRequests == b.WaitingRequests && a.RunningRequests == b.RunningRequests &&
		a.WaitingTokens == b.WaitingTokens && math.Abs(a.TokenUsage-b.TokenUsage) < 1e-9 &&
		math.Abs(a.GenThroughput-b.GenThroughput) < 1e-9 && a.KVCapacityTokens == b.KVCapacityTokens
}

func sane(t *testing.T, r worker.LoadReport) {
	t.Helper()
	if r.WaitingRequests < 0 || r.RunningRequests < 0 || r.WaitingTokens < -1 ||
		!(r.TokenUsage >= 0 && r.TokenUsage <= 1) || !(r.GenThroughput >= 0) || math.IsInf(r.GenThroughput, 0) {
		t.Fatalf("insane report %+v", r)
	}
}

func FuzzParseLoads(f *testing.F) {
	for _, s := range []string{mockLoads, twoRanks, `{"loads":[{}]}`, `{"loads":[{"token_usage":"x"}]}`, `[]`} {
		f.Add([]byte(s))
	}
	var p fastjson.Parser
	f.Fuzz(func(t *testing.T, body []byte) {
		var r worker.LoadReport
		if ParseLoads(&p, body, &r) == nil {
			sane(t, r)
		}
	})
}

func FuzzParseMetrics(f *testing.F) {
	for _, s := range []string{sglangMetrics, vllmMetrics, "sglang:token_usage NaN\n", "vllm:num_requests_waiting{a=\"\\\"}\"} +Inf\n", "x{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r worker.LoadReport
		if ParseMetrics(body, &r) == nil {
			sane(t, r)
		}
	})
}

// TestReportFitsItsSizeClass guards worker.LoadReport's layout: the scored fields share one
// cache line only while the report is exactly 128 bytes (on 64-bit platforms).
func TestReportFitsItsSizeClass(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 && unsafe.Sizeof(worker.LoadReport{}) != 128 {
		t.Fatalf("worker.LoadReport is %d bytes: adjust its padding back to 128", unsafe.Sizeof(worker.LoadReport{}))
	}
}
