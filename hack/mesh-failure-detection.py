#!/usr/bin/env python3
"""The mesh with real processes, optionally at packet loss (docs/mesh.md, Fleet scale).

N `smg launch --enable-mesh` routers (default 5) on 127.0.0.11.. in a network namespace of their
own (ports 18000, 19000 and 39527 on each), bootstrapped from the first. With --loss P,
hack/lossnet drops P% of the mesh's packets (TCP port 39527, either direction) on the
namespace's loopback, after checking the rate with 10,000 UDP datagrams; the HTTP ports this
script polls stay lossless. Once every pair has its sync stream:

 1. worker sync: a worker registered on one router (a different one each time) → listed on
    every other, then its removal → gone from every other;
 2. false deaths: --watch-minutes of nothing, every router's
    smg_mesh_member_status_changes_total{to="DOWN"} and {to="SUSPECTED"} before and after
    (a live router marked DOWN is a false death; SUSPECTED marks are refuted suspicions);
 3. failure detection: SIGKILL one router (--trials times, restarting it between), then
    SIGSTOP one (a frozen router keeps its connections open and answers nothing); the others'
    /mesh/status polled every 10 ms: when the victim was SUSPECTED and DOWN on all of them.

Exits 1 when a target is missed: a live router marked DOWN, or a victim not DOWN on every
other router within the 5 s suspicion timeout (mesh.DefaultSuspectTimeout) of the signal.
Needs root (a network namespace; lossnet loads a BPF program).

Usage: make build && go build -o bin/ ./hack/lossnet &&
       python3 hack/mesh-failure-detection.py [--smg bin/smg] [--lossnet bin/lossnet]
           [--routers 5] [--loss 5] [--watch-minutes 10] [--trials 3]
Logs: $TMPDIR/mesh-failure-detection/r<i>.log."""
import argparse, ctypes, json, os, re, signal, subprocess, sys, time, urllib.request

SUSPICION_TIMEOUT = 5.0  # mesh.DefaultSuspectTimeout
MESH_PORT = 39527
CLONE_NEWNET = 0x40000000

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("smg_path", nargs="?", help="the smg binary (as --smg)")
ap.add_argument("--smg", default="bin/smg")
ap.add_argument("--lossnet", default="bin/lossnet")
ap.add_argument("--routers", type=int, default=5)
ap.add_argument("--loss", type=float, default=0, help="percent of the mesh's packets dropped")
ap.add_argument("--watch-minutes", type=float, default=0, help="minutes watched for false deaths")
ap.add_argument("--trials", type=int, default=3, help="SIGKILLs and SIGSTOPs each")
args = ap.parse_args()
SMG = os.path.abspath(args.smg_path or args.smg)
N = args.routers
LOGS = os.path.join(os.environ.get("TMPDIR", "/tmp"), "mesh-failure-detection")
hosts = [f"127.0.0.{11+i}" for i in range(N)]
names = [f"R{i}" for i in range(N)]
procs = {}
missed = []


def enter_namespace(name):
    """Makes network namespace name and moves this process (and so its children) into it."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        sys.exit(f"setns {name}: errno {ctypes.get_errno()}")
    os.close(fd)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def start(i):
    a = [SMG, "launch", "--host", hosts[i], "--port", "18000",
         "--prometheus-host", hosts[i], "--prometheus-port", "19000",
         "--enable-mesh", "--mesh-server-name", names[i], "--mesh-host", hosts[i],
         "--mesh-advertise-host", hosts[i], "--mesh-port", str(MESH_PORT), "--log-level", "warn"]
    if i > 0:
        a += ["--mesh-peer-urls", f"{hosts[0]}:{MESH_PORT}"]
    procs[i] = subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=open(os.path.join(LOGS, f"r{i}.log"), "a"))


def get(i, path, port=18000):
    try:
        with urllib.request.urlopen(f"http://{hosts[i]}:{port}{path}", timeout=0.5) as r:
            return r.read()
    except Exception:
        return None


def status(i):
    b = get(i, "/mesh/status")
    return json.loads(b) if b else None


def view(i):
    s = status(i)
    return {m["name"]: m["status"] for m in s["members"]} if s else {}


def streams(i):
    s = status(i)
    return len(s["streams"]) if s else 0


def listed(i, url):
    b = get(i, "/workers")
    return b is not None and any(w["url"] == url for w in json.loads(b)["workers"])


def changes(i, to):
    b = get(i, "/metrics", 19000)
    if b is None:
        sys.exit(f"{names[i]}: no /metrics")
    m = re.search(r'^smg_mesh_member_status_changes_total\{to="%s"\} (\S+)$' % to, b.decode(), re.M)
    return float(m.group(1)) if m else 0.0


def wait(cond, what, limit=60, step=0.01):
    t0 = time.time()
    while time.time() - t0 < limit:
        if cond():
            return time.time() - t0
        time.sleep(step)
    sys.exit(f"timeout: {what}")


def all_alive():
    return all(all(view(i).get(n) == "ALIVE" for n in names) for i in range(N))


def settle():
    wait(all_alive, "all ALIVE", step=0.05)
    wait(lambda: all(streams(i) == N - 1 for i in range(N)), "a stream per pair", step=0.05)


def request(i, method, path, body=None):
    req = urllib.request.Request(f"http://{hosts[i]}:18000{path}", method=method,
                                 data=body and json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r) if r.status != 204 else None


def worker_sync(trials):
    for k in range(trials):
        owner = (N - 1 - k) % N
        others = [i for i in range(N) if i != owner]
        url = f"http://127.0.0.250:{9000 + k}"
        wid = request(owner, "POST", "/workers", {"url": url})["worker_id"]
        added = wait(lambda: all(listed(i, url) for i in others), f"{url} on every router")
        request(owner, "DELETE", f"/workers/{wid}")
        gone = wait(lambda: not any(listed(i, url) for i in others), f"{url} gone from every router")
        print(f"worker added on {names[owner]}: listed on all {len(others)} others {added:.2f} s; removed: gone {gone:.2f} s", flush=True)


def watch(minutes):
    down0 = [changes(i, "DOWN") for i in range(N)]
    sus0 = [changes(i, "SUSPECTED") for i in range(N)]
    seen = {"SUSPECTED": 0, "DOWN": 0}
    t0 = time.time()
    while time.time() - t0 < minutes * 60:
        for i in range(N):
            for st in view(i).values():
                if st in seen:
                    seen[st] += 1
        for i, p in procs.items():
            if p.poll() is not None:
                sys.exit(f"{names[i]} exited during the watch: see {LOGS}/r{i}.log")
        time.sleep(1)
    down = sum(changes(i, "DOWN") - down0[i] for i in range(N))
    sus = sum(changes(i, "SUSPECTED") - sus0[i] for i in range(N))
    print(f"{minutes:g} min at {args.loss:g}% loss: live routers marked DOWN {down:.0f} "
          f"(SUSPECTED marks {sus:.0f}, refuted; polls a second seeing SUSPECTED {seen['SUSPECTED']}, DOWN {seen['DOWN']})", flush=True)
    if down:
        missed.append(f"{down:.0f} false deaths")


def trial(victim, sig):
    others = [i for i in range(N) if i != victim]
    settle()
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
    name = signal.Signals(sig).name
    if len(down) < len(others):
        missed.append(f"{name} {names[victim]} not DOWN everywhere in 60 s")
        print(f"{name} {names[victim]}: DOWN on {len(down)} of {len(others)} after 60 s", flush=True)
    else:
        print(f"{name} {names[victim]}: SUSPECTED (polled) {max(sus.values()):.2f} s, DOWN on all {len(others)} others {max(down.values()):.2f} s (first {min(down.values()):.2f} s)", flush=True)
        if max(down.values()) > SUSPICION_TIMEOUT:
            missed.append(f"{name} {names[victim]} DOWN everywhere after {max(down.values()):.2f} s")
    if sig == signal.SIGSTOP:
        os.kill(procs[victim].pid, signal.SIGKILL)
    procs[victim].wait()
    start(victim)


os.makedirs(LOGS, exist_ok=True)
ns = f"smg-meshloss-{os.getpid()}"
lossnet = None
enter_namespace(ns)
try:
    if args.loss > 0:
        lossnet = subprocess.Popen([os.path.abspath(args.lossnet), "-dev", "lo", "-percent", str(args.loss),
                                    "-ports", str(MESH_PORT), "-verify", "10000"], stdout=subprocess.PIPE, text=True)
        for line in lossnet.stdout:
            print("lossnet", line.strip(), flush=True)
            m = re.match(r"verify: .*: ([0-9.]+)% lost", line)
            # 10,000 datagrams at 5%: a standard deviation of 0.22 points.
            if m and abs(float(m.group(1)) - args.loss) > 1:
                sys.exit(f"lossnet lost {m.group(1)}% of its datagrams, not {args.loss:g}%: not measuring on that")
            if line.startswith("attached"):
                break
        else:
            sys.exit("lossnet did not attach")
    for i in range(N):
        start(i)
        time.sleep(0.3)
    t = wait(all_alive, "all ALIVE", step=0.05)
    t += wait(lambda: all(streams(i) == N - 1 for i in range(N)), "a stream per pair", step=0.05)
    print(f"{N} routers at {args.loss:g}% loss: every router ALIVE on every router and a stream per pair {t:.2f} s after the last started", flush=True)
    worker_sync(args.trials)
    if args.watch_minutes > 0:
        watch(args.watch_minutes)
    victims = [N - 1, N // 2, 1][:args.trials]
    for victim in victims:
        trial(victim, signal.SIGKILL)
    for victim in victims:
        trial(victim, signal.SIGSTOP)
finally:
    for p in procs.values():
        p.kill()
        p.wait()
    if lossnet:
        lossnet.send_signal(signal.SIGTERM)
        print("lossnet", lossnet.stdout.read().strip(), flush=True)
        lossnet.wait()
    subprocess.run(["ip", "netns", "del", ns])
if missed:
    sys.exit("missed: " + "; ".join(missed))
