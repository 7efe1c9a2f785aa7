#!/bin/bash
# pdpair.sh: requests per second and CPU per request of a PD mock pair alone.
#
# The setup of the PD direct row of `make bench` (docs/benchmarks.md): an instant prefill
# mock, an instant decode mock asking the prefill's rendezvous, and loadgen in PD mode
# (SGLang's mini load balancer's part: the same body to both) all on core 1 (taskset,
# GOMAXPROCS=1, one gnet event loop each), 32 closed-loop connections, small JSON requests,
# SECONDS after 2,000 warm-up requests. CPU is each mock's utime+stime from /proc/PID/stat
# over the run (warm-up included) divided by the requests (warm-up included). Binaries
# alternate round by round, so that they see the same machine noise.
#
# usage: mockworker/scripts/pdpair.sh [SECONDS=5] [ROUNDS=3] [BINDIR...]
# run from the repository root. Each BINDIR holds a mockworker and a loadgen (default: a
# build of the working tree). MOCK_ARGS adds mock flags (the bench passes
# --token-interval-ms 1).
set -eu
secs=${1:-5}
rounds=${2:-3}
shift 2 || shift $#
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -eq 0 ]; then
	go build -o "$tmp/bin/" ./cmd/mockworker ./cmd/loadgen
	set -- "$tmp/bin"
fi
tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

start_mock() { # bin out role bootstrap-port
	: >"$2"
	GOMAXPROCS=1 taskset -c 1 "$1/mockworker" --host 127.0.0.1 --port 0 --model mock-model --event-loops 1 \
		${MOCK_ARGS:-} --role "$3" --bootstrap-port "$4" >"$2" 2>&1 &
	until grep -q listening "$2"; do sleep 0.05; done
}

one() { # bindir
	start_mock "$1" "$tmp/p.out" prefill 0
	pp=$!
	purl=$(grep -o 'http://[0-9.:]*' "$tmp/p.out")
	port=$(grep -o 'bootstrap port [0-9]*' "$tmp/p.out" | awk '{print $3}')
	start_mock "$1" "$tmp/d.out" decode "$port"
	dp=$!
	durl=$(grep -o 'http://[0-9.:]*' "$tmp/d.out")
	p0=$(cpu_ticks $pp) d0=$(cpu_ticks $dp)
	GOMAXPROCS=1 taskset -c 1 "$1/loadgen" run --pd-prefill "$purl" --pd-bootstrap-port "$port" --pd-decode "$durl" \
		--model mock-model --workload raw --stream=false --max-concurrency 32 --duration "${secs}s" \
		--warmup 2000 --progress off --output "$tmp/lg.json" >/dev/null
	p1=$(cpu_ticks $pp) d1=$(cpu_ticks $dp)
	kill $pp $dp
	wait $pp $dp 2>/dev/null || true
	python3 - "$tmp/lg.json" "$1" $((p1 - p0)) $((d1 - d0)) "$tck" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = r["completed"] + r["failed"] + 2000
tck = float(sys.argv[5])
us = lambda ticks: int(ticks) / tck / n * 1e6
print("%-28s %7.0f req/s  p50 %6.2f ms  p99 %6.2f ms  failed %d  prefill %5.1f µs/req  decode %5.1f µs/req"
      % (sys.argv[2][-28:], r["request_throughput"], r["e2e_latency_ms"]["median"], r["e2e_latency_ms"]["p99"],
         r["failed"], us(sys.argv[3]), us(sys.argv[4])))
PY
}

for round in $(seq "$rounds"); do
	echo "round $round ($(cut -d' ' -f1-3 /proc/loadavg))"
	for b in "$@"; do one "$b"; done
done
