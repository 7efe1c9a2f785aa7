#!/bin/bash
# nullbench.sh: CPU per request of the mock worker's null path, gnet against fasthttp.
#
# The mock runs alone on core 1 (taskset, GOMAXPROCS=1, one gnet event loop); wrk drives it
# from core 0 with small keep-alive JSON requests. CPU is the mock's utime+stime from
# /proc/PID/stat over the measured run; µs/req = CPU / requests completed. The servers
# alternate, ROUNDS times, so that both see the same machine noise.
#
# usage: mockworker/scripts/nullbench.sh [SECONDS=5] [CONNS=32] [ROUNDS=3] [ROUTE=chat|chat-stream]
# run from the repository root; needs wrk (apt-get install -y wrk). With COMPARE_BIN set to
# another mockworker binary (an older build), each round also measures it with gnet.
set -eu
secs=${1:-5}
conns=${2:-32}
rounds=${3:-3}
route=${4:-chat}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/mockworker" ./cmd/mockworker
stream=false
[ "$route" = chat-stream ] && stream=true
cat >"$tmp/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"mock-model","messages":[{"role":"user","content":"Hello, how are you today? Tell me a story."}],"max_tokens":16,"stream":$stream}'
LUA
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

one() { # server [binary]
	bin=${2:-$tmp/mockworker}
	rm -f "$tmp/out" # the next run's redirect truncates it only once the child starts
	: >"$tmp/out.new"
	mv "$tmp/out.new" "$tmp/out"
	GOMAXPROCS=1 taskset -c 1 "$bin" --port 0 --server "$1" --event-loops 1 >"$tmp/out" 2>&1 &
	pid=$!
	url=
	while [ -z "$url" ]; do
		sleep 0.05
		url=$(grep -o 'http://[0-9.:]*[0-9]' "$tmp/out" | head -1 || true)
	done
	taskset -c 0 wrk -t1 -c"$conns" -d1s -s "$tmp/post.lua" "$url/v1/chat/completions" >/dev/null # warm up
	t0=$(cpu_ticks $pid)
	taskset -c 0 wrk -t1 -c"$conns" -d"${secs}s" -s "$tmp/post.lua" "$url/v1/chat/completions" >"$tmp/wrk"
	t1=$(cpu_ticks $pid)
	kill $pid
	wait $pid || true
	reqs=$(awk '/requests in/ {print $1}' "$tmp/wrk")
	rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/wrk")
	non2xx=$(awk '/Non-2xx/ {print $4}' "$tmp/wrk")
	label=$1
	[ -n "${2:-}" ] && label="$1-cmp"
	awk -v s="$label" -v r="$reqs" -v rps="$rps" -v d=$((t1 - t0)) -v tck="$tck" -v bad="${non2xx:-0}" 'BEGIN {
		cpu = d / tck
		printf "%-9s %9.0f req/s  %6.2f CPU-s  %6.2f us/req  %8.0f req/s per core  non-2xx %s\n", s, rps, cpu, cpu * 1e6 / r, r / cpu, bad
	}'
}

echo "route=$route conns=$conns secs=$secs"
for i in $(seq "$rounds"); do
	one gnet
	one fasthttp
	if [ -n "${COMPARE_BIN:-}" ]; then one gnet "$COMPARE_BIN"; fi
done
