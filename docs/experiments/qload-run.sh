#!/bin/bash
# run.sh NAME POLICY [FIRST_N_WORKERS] [SMG] -- one heterogeneous 70% row by hand (qhet's run.sh) with
# instrumented mock and loadgen (first-token publish/write/sent times; loadgen per-request lines).
set -e
name=$1; policy=$2; nurls=${3:-8}; smgbin=${4:-/tmp/qdbg/smg}; d=/tmp/qload; B=${B:-/tmp/qdbg}
rm -f $d/$name.reqlog $d/$name.mock.out $d/$name.lg.jsonl
env $MOCKENV $B/mockworker --host 127.0.0.1 --port 0 --count 8 --model mock-model --mode engine --time-scale 1 \
  --kv-tokens 65536 --seed 1 --decode-factors 6=2,7=2 --max-running 32 --request-log $d/$name.reqlog $MOCKFLAGS > $d/$name.mock.out 2>&1 &
mpid=$!
for i in $(seq 50); do [ "$(grep -c listening $d/$name.mock.out)" = 8 ] && break; sleep 0.1; done
urls=$(grep -o 'http://127.0.0.1:[0-9]*' $d/$name.mock.out | tr "\n" " " | cut -d" " -f1-$nurls)
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
prom=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$smgbin launch --host 127.0.0.1 --port $port --prometheus-host 127.0.0.1 --prometheus-port $prom --log-level warn \
  --policy $policy --load-monitor-interval 4 --worker-urls $urls $SMGFLAGS > $d/$name.smg.out 2>&1 &
gpid=$!
for i in $(seq 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/health)" = 200 ] && break; sleep 0.1; done
QLOAD_LG_LOG=$d/$name.lg.jsonl $B/loadgen run --base-url http://127.0.0.1:$port/v1 --model mock-model --stream=true --duration 10s --seed 1 --progress off \
  --output $d/$name.json --workload random --random-input-len 128 --random-output-len 64 --random-range-ratio 1 \
  --random-num-prompts 4096 --request-rate 101.22 --max-concurrency 1024 --warmup 1619 $LGFLAGS > $d/$name.lg.out 2>&1 || true
kill $gpid; kill $mpid; wait $gpid $mpid 2>/dev/null || true
