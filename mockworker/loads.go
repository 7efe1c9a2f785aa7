package mockworker

import (
	"strconv"
	"time"
)

// loadReport is one data-parallel rank's load, the fields of SGLang's /v1/loads.
type loadReport struct {
	running, waiting    int
	usedTokens          int
	maxTotalTokens      int
	genThroughput       float64 // output tokens per second
	cacheHitRate        float64 // 0..1
	maxRunning          int
	waitingUncachedToks int
}

// appendLoads writes the /v1/loads document (see doc.go for the shape).
func (w *Worker) appendLoads(dst []byte, now time.Time) []byte {
	l := w.load()
	if w.engine != nil && w.engine.log != nil {
		w.engine.log.load(w.index, now, l)
	}
	usage := float64(l.usedTokens) / float64(l.maxTotalTokens)
	util := float64(l.running) / float64(l.maxRunning)
	dst = append(dst, `{"timestamp":"`...)
	dst = now.UTC().AppendFormat(dst, time.RFC3339)
	dst = appendKeyInt(dst, `","version":"mock","dp_rank_count":1,"loads":[{"dp_rank":0,"num_running_reqs":`, int64(l.running))
	dst = appendKeyInt(dst, `,"num_waiting_reqs":`, int64(l.waiting))
	dst = appendKeyInt(dst, `,"num_total_reqs":`, int64(l.running+l.waiting))
	dst = appendKeyInt(dst, `,"num_used_tokens":`, int64(l.usedTokens))
	dst = appendKeyInt(dst, `,"max_total_num_tokens":`, int64(l.maxTotalTokens))
	dst = appendKeyFloat(dst, `,"token_usage":`, usage)
	dst = appendKeyFloat(dst, `,"gen_throughput":`, l.genThroughput)
	dst = appendKeyFloat(dst, `,"cache_hit_rate":`, l.cacheHitRate)
	dst = appendKeyFloat(dst, `,"utilization":`, util)
	dst = appendKeyInt(dst, `,"max_running_requests":`, int64(l.maxRunning))
	dst = appendKeyInt(dst, `,"num_waiting_uncached_tokens":`, int64(l.waitingUncachedToks))
	dst = appendKeyInt(dst, `}],"aggregate":{"total_running_reqs":`, int64(l.running))
	dst = appendKeyInt(dst, `,"total_waiting_reqs":`, int64(l.waiting))
	dst = appendKeyInt(dst, `,"total_reqs":`, int64(l.running+l.waiting))
	dst = appendKeyFloat(dst, `,"avg_token_usage":`, usage)
	dst = appendKeyFloat(dst, `,"avg_throughput":`, l.genThroughput)
	dst = appendKeyFloat(dst, `,"avg_utilization":`, util)
	return append(dst, `}}`...)
}

func appendFloat(dst []byte, f float64) []byte { return strconv.AppendFloat(dst, f, 'f', -1, 64) }

// appendKeyInt appends key, the JSON text that leads up to a number (a member's key with
// its punctuation, such as `,"run":`), and v.
func appendKeyInt(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(dst, key...), v, 10)
}

// appendKeyFloat appends key, as appendKeyInt does, and f as appendFloat does.
func appendKeyFloat(dst []byte, key string, f float64) []byte {
	return appendFloat(append(dst, key...), f)
}
