package loadmon

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"unsafe"

	"github.com/smg-go/smg/worker"
	"github.com/valyala/fastjson"
)

// Errors of the parsers; a worker whose /v1/loads answers with one of them is asked for
// /metrics instead.
var (
	ErrNoLoads   = errors.New("no load entries in /v1/loads response")
	ErrNoMetrics = errors.New("no SGLang or vLLM load metrics in /metrics response")
)

// ParseLoads parses SGLang's GET /v1/loads document into r (the caller sets r.At): waiting,
// running and waiting uncached tokens summed across DP ranks, KV usage the mean across ranks,
// generation throughput and KV capacity (max_total_num_tokens) summed (the worker's total).
// WaitingTokens is -1 when no rank reports
// num_waiting_uncached_tokens. p is reused between calls; nothing of body is retained.
func ParseLoads(p *fastjson.Parser, body []byte, r *worker.LoadReport) error {
	v, err := p.ParseBytes(body)
	if err != nil {
		return err
	}
	ranks := v.GetArray("loads")
	if len(ranks) == 0 {
		return ErrNoLoads
	}
	*r = worker.LoadReport{At: r.At, WaitingTokens: -1}
	var usage float64
	for _, rank := range ranks {
		if rank.Type() != fastjson.TypeObject {
			return ErrNoLoads
		}
		r.WaitingRequests += nonNegInt(rank.GetFloat64("num_waiting_reqs"))
		r.RunningRequests += nonNegInt(rank.GetFloat64("num_running_reqs"))
		if t := rank.Get("num_waiting_uncached_tokens"); t != nil {
			if r.WaitingTokens < 0 {
				r.WaitingTokens = 0
			}
			r.WaitingTokens += int64(nonNegInt(t.GetFloat64()))
		}
		usage += clamp01(rank.GetFloat64("token_usage"))
		r.KVCapacityTokens += int64(nonNegInt(rank.GetFloat64("max_total_num_tokens")))
		r.GenThroughput += nonNegFloat(rank.GetFloat64("gen_throughput"))
	}
	r.TokenUsage = usage / float64(len(ranks))
	return nil
}

// Prometheus metric names the monitor reads, by dialect.
var (
	sglWaiting    = []byte("sglang:num_queue_reqs")
	sglRunning    = []byte("sglang:num_running_reqs")
	sglUsage      = []byte("sglang:token_usage")
	sglThroughput = []byte("sglang:gen_throughput")
	vllmWaiting   = []byte("vllm:num_requests_waiting")
	vllmRunning   = []byte("vllm:num_requests_running")
	vllmKV        = []byte("vllm:kv_cache_usage_perc")
	vllmGPU       = []byte("vllm:gpu_cache_usage_perc") // older vLLM name of the same gauge
)

// ParseMetrics reads an engine's Prometheus text exposition into r (the caller sets r.At).
// Series of one metric with several label sets (DP ranks, engines) are summed, except KV
// usage, which is averaged. Prometheus carries queue depth but no token count, so WaitingTokens
// is -1 and the score estimates it at the mean prefill size. It allocates nothing.
func ParseMetrics(body []byte, r *worker.LoadReport) error {
	*r = worker.LoadReport{At: r.At, WaitingTokens: -1}
	var waiting, running, usage, throughput float64
	var nUsage int
	found := false
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		name, value, ok := sample(line)
		if !ok {
			continue
		}
		switch {
		case bytes.Equal(name, sglWaiting), bytes.Equal(name, vllmWaiting):
			waiting += nonNegFloat(value)
		case bytes.Equal(name, sglRunning), bytes.Equal(name, vllmRunning):
			running += nonNegFloat(value)
		case bytes.Equal(name, sglUsage), bytes.Equal(name, vllmKV), bytes.Equal(name, vllmGPU):
			usage += clamp01(value)
			nUsage++
		case bytes.Equal(name, sglThroughput):
			throughput += nonNegFloat(value)
		default:
			continue
		}
		found = true
	}
	if !found {
		return ErrNoMetrics
	}
	r.WaitingRequests = nonNegInt(waiting)
	r.RunningRequests = nonNegInt(running)
	r.GenThroughput = throughput
	if nUsage > 0 {
		r.TokenUsage = usage / float64(nUsage)
	}
	return nil
}

// sample splits one exposition line, `name{labels} value [timestamp]`, into its name and value.
func sample(line []byte) (name []byte, value float64, ok bool) {
	end := bytes.IndexAny(line, "{ \t")
	if end <= 0 {
		return nil, 0, false
	}
	name, rest := line[:end], line[end:]
	if rest[0] == '{' {
		// Label values may contain '}' inside quotes: skip quoted strings.
		i, quoted := 1, false
		for ; i < len(rest); i++ {
			switch c := rest[i]; {
			case quoted && c == '\\':
				i++
			case c == '"':
				quoted = !quoted
			case !quoted && c == '}':
				goto closed
			}
		}
		return nil, 0, false
	closed:
		rest = rest[i+1:]
	}
	rest = bytes.TrimLeft(rest, " \t")
	if j := bytes.IndexAny(rest, " \t"); j >= 0 {
		rest = rest[:j] // drop the timestamp
	}
	if len(rest) == 0 {
		return nil, 0, false
	}
	// The string view lives only during ParseFloat, which does not keep it.
	v, err := strconv.ParseFloat(unsafe.String(&rest[0], len(rest)), 64)
	if err != nil {
		return nil, 0, false
	}
	return name, v, true
}

func nonNegFloat(f float64) float64 {
	if !(f > 0) || math.IsInf(f, 1) {
		return 0
	}
	return f
}

func nonNegInt(f float64) int {
	f = nonNegFloat(f)
	if f > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(f)
}

func clamp01(f float64) float64 {
	switch {
	case !(f > 0):
		return 0
	case f > 1:
		return 1
	}
	return f
}
