#!/usr/bin/env python3
"""Failure detection with real processes (docs/mesh.md, Fleet scale): 5 `smg launch
--enable-mesh` routers on 127.0.0.11-15 (ports 18000, 19000 and 39527 on each), bootstrapped
from the first. Once every pair has its stream, SIGKILL one router (three times, restarting it
between), then SIGSTOP one (three times: a frozen router keeps its connections open and
answers nothing); poll the others' /mesh/status every 10 ms and print when the victim was
SUSPECTED and DOWN on all of them.

Usage: make build && python3 hack/mesh-failure-detection.py [path/to/smg]   (default bin/smg)
Logs: $TMPDIR/mesh-failure-detection/r<i>.log."""
import json, os, signal, subprocess, sys, time, urllib.request

SMG = sys.argv[1] if len(sys.argv) > 1 else "bin/smg"
LOGS = os.path.join(os.environ.get("TMPDIR", "/tmp"), "mesh-failure-detection")
N = 5
hosts = [f"127.0.0.{11+i}" for i in range(N)]
names = [f"R{i}" for i in range(N)]
procs = {}

def start(i):
    args = [SMG, "launch", "--host", hosts[i], "--port", "18000",
            "--prometheus-host", hosts[i], "--prometheus-port", "19000",
            "--enable-mesh", "--mesh-server-name", names[i], "--mesh-host", hosts[i],
            "--mesh-advertise-host", hosts[i], "--mesh-port", "39527", "--log-level", "warn"]
    if i > 0:
        args += ["--mesh-peer-urls", f"{hosts[0]}:39527"]
    procs[i] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(LOGS, f"r{i}.log"), "a"))

def status(i):
    try:
        with urllib.request.urlopen(f"http://{hosts[i]}:18000/mesh/status", timeout=0.5) as r:
            return json.load(r)
    except Exception:
        return None

def view(i):
    s = status(i)
    if not s:
        return {}
    return {m["name"]: m["status"] for m in s["members"]}

def streams(i):
    s = status(i)
    return len(s["streams"]) if s else 0

def wait(cond, what, limit=60):
    t0 = time.time()
    while time.time() - t0 < limit:
        if cond():
            return time.time() - t0
        time.sleep(0.05)
    sys.exit(f"timeout: {what}")

def all_alive():
    return all(all(view(i).get(n) == "ALIVE" for n in names) for i in range(N))

def trial(victim, sig):
    others = [i for i in range(N) if i != victim]
    wait(all_alive, "all ALIVE")
    wait(lambda: all(streams(i) == N - 1 for i in range(N)), "a stream per pair")
    time.sleep(2)
    t0 = time.time()
    os.kill(procs[victim].pid, sig)
    sus, down = {}, {}
    while len(down) < len(others) and time.time() - t0 < 60:
        for i in others:
            st = view(i).get(names[victim])
            t = time.time() - t0
            if st in ("SUSPECTED", "DOWN") and i not in sus:
                sus[i] = t
            if st == "DOWN" and i not in down:
                down[i] = t
        time.sleep(0.01)
    print(f"{signal.Signals(sig).name} {names[victim]}: SUSPECTED (polled) {max(sus.values()):.2f} s, DOWN on all {len(others)} others {max(down.values()):.2f} s (first {min(down.values()):.2f} s)", flush=True)
    if sig == signal.SIGSTOP:
        os.kill(procs[victim].pid, signal.SIGKILL)
    procs[victim].wait()
    start(victim)

os.makedirs(LOGS, exist_ok=True)
try:
    for i in range(N):
        start(i)
        time.sleep(0.3)
    for victim in (4, 2, 3):
        trial(victim, signal.SIGKILL)
    for victim in (4, 2, 3):
        trial(victim, signal.SIGSTOP)
finally:
    for p in procs.values():
        p.kill()
        p.wait()
