package mockworker

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/commonpb"
)

// The parts of the gRPC engine both dialects (SGLang's scheduler, vLLM's engine) share: each
// dialect's service only maps its messages onto these.

// samplingParams is what the mock reads of either dialect's SamplingParams; their getters
// read a nil message as the defaults.
type samplingParams interface {
	GetIgnoreEos() bool
	GetStopTokenIds() []uint32
	GetStop() []string
	GetN() uint32
}

// generateRequest reads a Generate request of either dialect: tokenized says whether it
// carries token ids (the mock cannot run text), maxTokens is the dialect's optional token
// limit, named maxName in the error that refuses 0.
func generateRequest(id string, tokenized bool, ids []uint32, stream bool, sp samplingParams, maxTokens *uint32, maxName string) (*rpcRequest, error) {
	if !tokenized {
		return nil, status.Error(codes.InvalidArgument, "tokenized is missing: the mock runs token ids (text input needs the engine's tokenizer)")
	}
	r := &rpcRequest{id: id, ids: ids, stream: stream,
		ignoreEOS: sp.GetIgnoreEos(), stopIDs: sp.GetStopTokenIds(), stops: sp.GetStop(), n: int(sp.GetN())}
	if maxTokens != nil {
		if *maxTokens == 0 {
			return nil, status.Error(codes.InvalidArgument, maxName+" 0: the mock generates at least 1 token")
		}
		r.maxTokens = int(*maxTokens)
	}
	return r, nil
}

// health is what HealthCheck answers in either dialect: the admin health state now, as
// /health tells it.
func (w *Worker) health() (healthy bool, message string) {
	if !w.healthyNow() {
		return false, "unhealthy"
	}
	return true, "OK"
}

// subscribeKVEvents streams the worker's KV-cache events (Config.KVEvents) from sequence
// number start; without them the worker answers Unimplemented, as an engine started without
// KV events.
func (w *Worker) subscribeKVEvents(ctx context.Context, start uint64, send func(*commonpb.KvEventBatch) error) error {
	if w.kvpub == nil {
		return status.Error(codes.Unimplemented, "this worker publishes no KV events: start mockworker with --mode engine --kv-events-port")
	}
	return w.kvpub.subscribe(ctx, start, w.done, send)
}

// tokenizerPath is the tokenizer_path reported: the directory given, else the model name.
func (w *Worker) tokenizerPath() string {
	if w.rpc.vocab.dir != "" {
		return w.rpc.vocab.dir
	}
	return w.cfg.Model
}

func eosInt32(ids []uint32) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// flushCache empties the prefix cache once no request runs, as SGLang does: with timeout 0 it
// fails at once while requests run, else it waits up to timeout for them to drain.
func (w *Worker) flushCache(ctx context.Context, timeout time.Duration) (bool, string) {
	if w.engine == nil {
		return true, "Cache flushed."
	}
	deadline := time.Now().Add(timeout)
	for {
		if w.engine.flush() {
			return true, "Cache flushed."
		}
		if !time.Now().Before(deadline) {
			return false, "Cache not flushed: requests are running"
		}
		if !sleepUntilOr(w.done, ctx.Done(), time.Now().Add(10*time.Millisecond)) {
			return false, "Cache not flushed: cancelled"
		}
	}
}

// tokenizerChunk is the size of GetTokenizer's pieces.
const tokenizerChunk = 64 << 10

// sendTokenizer streams a zip of the tokenizer directory's regular files, sha256 (hex) on the
// last piece; without --tokenizer-path there is nothing to send.
func (w *Worker) sendTokenizer(stream grpc.ServerStreamingServer[commonpb.GetTokenizerChunk]) error {
	dir := w.rpc.vocab.dir
	if dir == "" {
		return status.Error(codes.Unimplemented, "mockworker serves a tokenizer only with --tokenizer-path")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		f, err := zw.Create(e.Name())
		if err == nil {
			_, err = f.Write(data)
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	if err := zw.Close(); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	archive := buf.Bytes()
	sum := sha256.Sum256(archive)
	for len(archive) > 0 {
		n := min(len(archive), tokenizerChunk)
		c := &commonpb.GetTokenizerChunk{Data: archive[:n]}
		if n == len(archive) {
			c.Sha256 = hex.EncodeToString(sum[:])
		}
		if err := stream.Send(c); err != nil {
			return err
		}
		archive = archive[n:]
	}
	return nil
}
