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
	dst = append(dst, `","version":"mock","dp_rank_count":1,"loads":[{"dp_rank":0,"num_running_reqs":`...)
	dst = strconv.AppendInt(dst, int64(l.running), 10)
	dst = append(dst, `,"num_waiting_reqs":`...)
	dst = strconv.AppendInt(dst, int64(l.waiting), 10)
	dst = append(dst, `,"num_total_reqs":`...)
	dst = strconv.AppendInt(dst, int64(l.running+l.waiting), 10)
	dst = append(dst, `,"num_used_tokens":`...)
	dst = strconv.AppendInt(dst, int64(l.usedTokens), 10)
	dst = append(dst, `,"max_total_num_tokens":`...)
	dst = strconv.AppendInt(dst, int64(l.maxTotalTokens), 10)
	dst = append(dst, `,"token_usage":`...)
	dst = appendFloat(dst, usage)
	dst = append(dst, `,"gen_throughput":`...)
	dst = appendFloat(dst, l.genThroughput)
	dst = append(dst, `,"cache_hit_rate":`...)
	dst = appendFloat(dst, l.cacheHitRate)
	dst = append(dst, `,"utilization":`...)
	dst = appendFloat(dst, util)
	dst = append(dst, `,"max_running_requests":`...)
	dst = strconv.AppendInt(dst, int64(l.maxRunning), 10)
	dst = append(dst, `,"num_waiting_uncached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(l.waitingUncachedToks), 10)
	dst = append(dst, `}],"aggregate":{"total_running_reqs":`...)
	dst = strconv.AppendInt(dst, int64(l.running), 10)
	dst = append(dst, `,"total_waiting_reqs":`...)
	dst = strconv.AppendInt(dst, int64(l.waiting), 10)
	dst = append(dst, `,"total_reqs":`...)
	dst = strconv.AppendInt(dst, int64(l.running+l.waiting), 10)
	dst = append(dst, `,"avg_token_usage":`...)
	dst = appendFloat(dst, usage)
	dst = append(dst, `,"avg_throughput":`...)
	dst = appendFloat(dst, l.genThroughput)
	dst = append(dst, `,"avg_utilization":`...)
	dst = appendFloat(dst, util)
	return append(dst, `}}`...)
}

func appendFloat(dst []byte, f float64) []byte { return strconv.AppendFloat(dst, f, 'f', -1, 64) }
