package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The peers are nginx and HAProxy from Debian's packages, configured the way an operator would
// put them in front of LLM engines: round robin, keep-alive to the workers, no response
// buffering (so a server-sent event leaves as soon as it arrives), one worker process or
// thread, pinned to the proxy core like the gateway (docs/benchmarks.md).

// peerPackages are the Debian packages EnsurePeers installs, and the program each provides:
// the reference proxies of the overhead suite, and wrk, the routes suite's load (loadgen
// speaks the generation APIs only).
var peerPackages = []struct{ pkg, program string }{
	{"nginx-light", "nginx"},
	{"haproxy", "haproxy"},
	{"wrk", "wrk"},
}

// EnsurePeers finds nginx, HAProxy and wrk, installing the missing ones with apt-get when running
// as root, and returns the program paths it found (absent keys: not available). It never
// fails: a missing peer is reported in the table as "not installed", not as a regression.
func EnsurePeers(install bool, logf func(format string, args ...any)) map[string]string {
	found := map[string]string{}
	var missing []string
	for _, p := range peerPackages {
		if path := lookPeer(p.program); path != "" {
			found[p.program] = path
		} else {
			missing = append(missing, p.pkg)
		}
	}
	if len(missing) == 0 || !install {
		return found
	}
	if os.Geteuid() != 0 {
		logf("bench: %s missing and not root: those rows will say \"not installed\"", strings.Join(missing, ", "))
		return found
	}
	logf("bench: installing %s from Debian's packages", strings.Join(missing, ", "))
	cmd := exec.Command("apt-get", append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		logf("bench: apt-get install %s failed (%v): %s", strings.Join(missing, " "), err, tail(string(out)))
	}
	for _, p := range peerPackages {
		if path := lookPeer(p.program); path != "" {
			found[p.program] = path
		}
	}
	return found
}

// lookPeer finds a program on PATH or in /usr/sbin, which a non-login root shell may lack.
func lookPeer(program string) string {
	if path, err := exec.LookPath(program); err == nil {
		return path
	}
	if path := "/usr/sbin/" + program; fileExists(path) {
		return path
	}
	return ""
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// hostPorts strips the scheme of worker base URLs: "http://127.0.0.1:4000" → "127.0.0.1:4000".
func hostPorts(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/")
	}
	return out
}

// nginxConfig is a one-process nginx (master_process off, so the process we pin and measure is
// the one doing the work) in the foreground, round robin over workers with upstream keep-alive,
// and proxy_buffering off so SSE events are relayed as they arrive. Every path nginx writes is
// under dir. processes > 1 (the scaling rows) runs a master and that many worker processes,
// whose CPU proc.cpuTime adds to the master's.
func nginxConfig(dir, listen string, workers []string, processes int) string {
	var sb strings.Builder
	master := "off"
	if processes > 1 {
		master = "on"
	}
	fmt.Fprintf(&sb, `daemon off;
master_process %[2]s;
worker_processes %[3]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    keepalive_requests 1000000;
    upstream workers {
`, dir, master, max(processes, 1))
	for _, w := range workers {
		fmt.Fprintf(&sb, "        server %s;\n", w)
	}
	fmt.Fprintf(&sb, `        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen %s;
        location / {
            proxy_pass http://workers;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
`, listen)
	return sb.String()
}

// haproxyConfig is a HAProxy of threads threads (one but in the scaling rows) in HTTP mode, round robin, reusing idle server
// connections for any client (http-reuse always), with option http-no-delay so the first SSE
// event is not held back by TCP corking (docs/benchmarks.md measured 207 ms without it).
func haproxyConfig(listen string, workers []string, threads int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `global
    nbthread %d
    maxconn 4096

defaults
    mode http
    option http-no-delay
    http-reuse always
    timeout connect 5s
    timeout client 120s
    timeout server 120s

frontend fe
    bind %s
    default_backend workers

backend workers
    balance roundrobin
`, max(threads, 1), listen)
	for i, w := range workers {
		fmt.Fprintf(&sb, "    server w%d %s\n", i, w)
	}
	return sb.String()
}

// startNginx writes the configuration into a fresh directory under workDir and starts nginx in
// the foreground where pl says, with one worker process per GOMAXPROCS of pl.
func startNginx(program, workDir string, pl placement, port int, workers []string) (*proc, error) {
	dir, err := os.MkdirTemp(workDir, "nginx-")
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	if err := os.WriteFile(conf, []byte(nginxConfig(dir, listen, workers, pl.procs)), 0o644); err != nil {
		return nil, err
	}
	return startAt(pl, program, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
}

// startHAProxy writes the configuration into workDir and starts HAProxy in the foreground
// (-db) where pl says, with one thread per GOMAXPROCS of pl.
func startHAProxy(program, workDir string, pl placement, port int, workers []string) (*proc, error) {
	conf := filepath.Join(workDir, "haproxy.cfg")
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	if err := os.WriteFile(conf, []byte(haproxyConfig(listen, workers, pl.procs)), 0o644); err != nil {
		return nil, err
	}
	return startAt(pl, program, "-db", "-f", conf)
}
