#!/usr/bin/env bash
# make demo: three mock SGLang workers and the gateway on loopback, a ten-second load through
# the gateway, a one-screen summary, then everything stops. Only processes started here are
# stopped, by PID.
set -euo pipefail
BIN=${1:-bin}
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

"$BIN/mockworker" --host 127.0.0.1 --port 0 --count 3 --model demo-model --output-tokens 32 --token-interval-ms 2 >"$TMP/mocks.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ "$(grep -c 'listening on' "$TMP/mocks.log")" -ge 3 ] && break; sleep 0.05; done
WORKERS=$(grep -o 'http://[0-9.:]*' "$TMP/mocks.log" | tr '\n' ' ')
PORT=$(free_port); PROM=$(free_port)

"$BIN/smg" launch --host 127.0.0.1 --port "$PORT" --prometheus-host 127.0.0.1 --prometheus-port "$PROM" \
  --worker-urls $WORKERS >"$TMP/smg.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.05; done

echo "== SMG-Go demo: gateway http://127.0.0.1:$PORT in front of: $WORKERS"
echo
echo "== GET /workers"
curl -s "http://127.0.0.1:$PORT/workers" | grep -o '"url":"[^"]*","model_id":"[^"]*"\|"status":"[^"]*"' | paste -d' ' - - || true
echo
echo "== 10 s of streamed chat load (16 clients) through the gateway"
"$BIN/loadgen" run --base-url "http://127.0.0.1:$PORT/v1" --model demo-model --workload random \
  --random-input-len 256 --random-output-len 32 --max-concurrency 16 --duration 10s --progress off --seed 1 | grep -v -E '^(Mean|P90|Total|Input|Benchmark|Workload|Concurrency|loadgen)' 
echo
echo "== gateway metrics"
curl -s "http://127.0.0.1:$PROM/metrics" | grep -E '^smg_(worker_requests_active|router_upstream_responses_total\{.*2xx|worker_pool_size|http_requests_total\{path="/v1/chat/completions",status_code="200"\})' || true
