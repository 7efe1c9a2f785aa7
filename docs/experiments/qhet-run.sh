#!/bin/bash
# One heterogeneous 70% load row by hand (bench/quality.go's load row: 8 engine mocks at time scale 1,
# --decode-factors 6=2,7=2 --max-running 32, kv 65536, seed 1; smg --load-monitor-interval 4;
# loadgen random 128-word prompts, 64 output tokens, 101.22 req/s, 1619 warm-up requests, 10 s),
# with the mocks' per-request log. Usage: run.sh NAME SMG_BINARY POLICY
set -e
name=$1; smgbin=$2; policy=$3; nurls=${4:-8}; d=/tmp/qhet-real; B=/tmp/qhet-bin
rm -f $d/$name.reqlog $d/$name.mock.out
$B/mockworker --host 127.0.0.1 --port 0 --count 8 --model mock-model --mode engine --time-scale 1 \
  --kv-tokens 65536 --seed 1 --decode-factors 6=2,7=2 --max-running 32 --request-log $d/$name.reqlog > $d/$name.mock.out 2>&1 &
mpid=$!
for i in $(seq 50); do [ "$(grep -c listening $d/$name.mock.out)" = 8 ] && break; sleep 0.1; done
urls=$(grep -o 'http://127.0.0.1:[0-9]*' $d/$name.mock.out | tr "\n" " " | cut -d" " -f1-$nurls)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
prom=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$smgbin launch --host 127.0.0.1 --port $port --prometheus-host 127.0.0.1 --prometheus-port $prom --log-level warn \
  --policy $policy --load-monitor-interval 4 --worker-urls $urls > $d/$name.smg.out 2>&1 &
gpid=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$port/health && break; sleep 0.1; done
$B/loadgen run --base-url http://127.0.0.1:$port/v1 --model mock-model --stream=true --duration 10s --seed 1 --progress off \
  --output $d/$name.json --workload random --random-input-len 128 --random-output-len 64 --random-range-ratio 1 \
  --random-num-prompts 4096 --request-rate 101.22 --max-concurrency 1024 --warmup 1619 > $d/$name.lg.out 2>&1 || true
kill $gpid; kill $mpid; wait $gpid $mpid 2>/dev/null || true
