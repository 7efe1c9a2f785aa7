#!/bin/bash
# CPU per request of smg in front of one TLS worker (mockworker --server fasthttp over TLS):
# base (91c5d04: TLS workers bridged to the fasthttp handler on the evloop plane), new native
# TLS on the loops, the fasthttp plane (smg-fasthttp, built from 338cee7, the last commit that
# had --data-plane fasthttp; the row is left out without it), and new evloop to a plain
# worker (reference).
# smg alone on core 0 (GOMAXPROCS=1); mocks and loadgen on core 1. Rows alternate, ROUNDS rounds.
# D holds the binaries (smg-base built from 91c5d04, smg-new, mockworker, loadgen) and a CA
# (ca.pem) with a worker certificate for IP 127.0.0.1 (cert.pem, key.pem); see
# docs/benchmarks.md, "Event-loop data plane". Run it under the bench lock:
#   flock /tmp/smg-bench.lock env D=/tmp/evtls DUR=8s ROUNDS=3 hack/tls-cpu.sh
set -u
D=${D:-/tmp/evtls}
DUR=${DUR:-8s}; CONC=${CONC:-16}; ROUNDS=${ROUNDS:-3}; STREAM=${STREAM:-false}
cleanup() { for p in $(jobs -p); do kill $p 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
taskset -c 1 $D/mockworker --host 127.0.0.1 --port 18443 --count 1 --server fasthttp --tls-cert $D/cert.pem --tls-key $D/key.pem > $D/mock-tls.log 2>&1 &
taskset -c 1 $D/mockworker --host 127.0.0.1 --port 18080 --count 1 --server fasthttp > $D/mock-plain.log 2>&1 &
sleep 1
row() { # name port binary env args...
  local name=$1 port=$2 bin=$3 envs=$4; shift 4
  env GOMAXPROCS=1 $envs taskset -c 0 $bin launch --host 127.0.0.1 --port $port --prometheus-port $((port+1000)) --prometheus-host 127.0.0.1 --log-level warn "$@" > $D/smg-$name.log 2>&1 &
  local pid=$!
  for i in $(seq 100); do curl -sf http://127.0.0.1:$port/readiness >/dev/null && break; sleep 0.1; done
  # warm-up (handshakes, pools) then measure
  taskset -c 1 $D/loadgen run --base-url http://127.0.0.1:$port/v1 --model mock-model --workload raw --stream=$STREAM --max-concurrency $CONC --duration 1s --progress off --output /dev/null >/dev/null 2>&1
  local t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  taskset -c 1 $D/loadgen run --base-url http://127.0.0.1:$port/v1 --model mock-model --workload raw --stream=$STREAM --max-concurrency $CONC --duration $DUR --progress off --output $D/out-$name.json >/dev/null 2>&1
  local t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null
  python3 - "$name" "$t0" "$t1" $D/out-$name.json <<'PY'
import json,sys
name,t0,t1,f=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),sys.argv[4]
r=json.load(open(f)); c=r.get("completed") or r.get("Completed"); fail=r.get("failed",0)
thr=r.get("request_throughput")
print(f"{name:16s} completed {c:7d} failed {fail} req/s {thr:9.1f} smg CPU {(t1-t0)/100:6.2f} s  {(t1-t0)*1e4/c:7.2f} us/request")
PY
}
for r in $(seq $ROUNDS); do
  echo "round $r (stream=$STREAM, $CONC clients, $DUR)"
  row base-bridged 30100 $D/smg-base "SSL_CERT_FILE=$D/ca.pem" --worker-urls https://127.0.0.1:18443
  row new-native   30200 $D/smg-new  "" --worker-urls https://127.0.0.1:18443 --worker-ca-file $D/ca.pem
  if [ -x $D/smg-fasthttp ]; then
    row fasthttp   30300 $D/smg-fasthttp "" --worker-urls https://127.0.0.1:18443 --worker-ca-file $D/ca.pem --data-plane fasthttp
  fi
  row new-plain    30400 $D/smg-new  "" --worker-urls http://127.0.0.1:18080
done
