package main

import (
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/smg-go/smg/internal/cli"
)

// registerPprofFlags registers the flag that opens /debug/pprof/ beyond loopback.
func registerPprofFlags(fs *cli.FlagSet, allowRemote *bool) {
	fs.Bool("pprof-allow-remote", allowRemote, false,
		"Serve /debug/pprof/ on the Prometheus port to every client; by default only connections over loopback (kubectl port-forward, a shell in the pod) get it")
}

// handlePprof serves net/http/pprof's handlers on mux. Unless allowRemote, only a
// connection made over loopback gets them, one whose peer and local addresses are both
// loopback; everyone else gets 403: profiles and the heap hold request data and the metrics
// port is usually reachable by the whole cluster, while kubectl port-forward and a shell in
// the pod still reach it over loopback. The local address matters because a service-mesh
// sidecar hands on remote clients' connections from a loopback peer address (Istio's
// 127.0.0.6) but to the pod's own IP.
func handlePprof(mux *http.ServeMux, allowRemote bool) {
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		if allowRemote {
			return h
		}
		return func(w http.ResponseWriter, r *http.Request) {
			local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
			if local == nil || !loopbackPeer(local.String()) || !loopbackPeer(r.RemoteAddr) {
				http.Error(w, "smg: /debug/pprof/ answers connections over loopback only: use kubectl port-forward or curl localhost from inside the pod, or start smg with --pprof-allow-remote", http.StatusForbidden)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/debug/pprof/", guard(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", guard(redactedCmdline))
	mux.HandleFunc("/debug/pprof/profile", guard(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", guard(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", guard(pprof.Trace))
}

// loopbackPeer reports whether addr ("ip:port", as http.Request.RemoteAddr) is a loopback
// address (127.0.0.0/8, ::1, or an IPv4-mapped loopback).
func loopbackPeer(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
