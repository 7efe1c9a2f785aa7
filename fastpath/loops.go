package fastpath

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Forwarding loops: a gateway registered as its own worker, directly or through
// another gateway, sent a request around until connections ran out (two requests made 4,096
// self-hops). Two guards:
//
//   - Every forwarded request carries X-SMG-Hop, the list of gateways it went through; each
//     gateway adds its own random id and refuses (508 forwarding_loop) a request whose list
//     already holds it. Gateways in a chain that is not a loop pass requests on as before.
//   - The worker API and --worker-urls refuse a worker URL that is one of the gateway's own
//     listen addresses (IsListenAddress).

const headerHop = "X-Smg-Hop"

// maxHopHeader bounds the X-SMG-Hop value the gateway extends: a longer one is a loop
// through gateways that do not check, or an attack; it is refused like a loop.
const maxHopHeader = 1024

// newHopID returns a gateway's id in X-SMG-Hop: 16 random hex digits.
func newHopID() []byte {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return []byte(hex.EncodeToString(b[:]))
}

// hopListHas reports whether the comma-separated list holds id.
func hopListHas(list, id []byte) bool {
	for len(list) > 0 {
		var item []byte
		item, list, _ = bytes.Cut(list, []byte{','})
		if bytes.Equal(bytes.TrimSpace(item), id) {
			return true
		}
	}
	return false
}

// IsListenAddress reports whether rawURL (a canonical worker URL) names the address a
// gateway listening on host:port serves: the same port on the same IP or, when host is
// unspecified (0.0.0.0, ::), on any local address, names resolved. It is for the control
// plane: it may resolve names (bounded by ctx).
func IsListenAddress(ctx context.Context, rawURL, host string, port int) bool {
	u, err := url.Parse(rawURL)
	if err != nil || port == 0 {
		return false
	}
	p := u.Port()
	if p == "" {
		p = "80"
		if u.Scheme == "https" {
			p = "443"
		}
	}
	if n, err := strconv.Atoi(p); err != nil || n != port {
		return false
	}
	ips := resolve(ctx, u.Hostname())
	listen := net.ParseIP(host)
	if listen == nil {
		for _, ip := range resolve(ctx, host) {
			listen = ip
			break
		}
	}
	if listen == nil {
		return false
	}
	for _, ip := range ips {
		if ip.Equal(listen) {
			return true
		}
		if listen.IsUnspecified() && isLocalIP(ip) {
			return true
		}
	}
	return false
}

func resolve(ctx context.Context, host string) []net.IP {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil
	}
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	return ips
}

// isLocalIP reports whether ip is a loopback address or one of this host's interfaces.
func isLocalIP(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// isOwnAddress reports whether a worker URL names this gateway's listen address.
func (s *Server) isOwnAddress(ctx context.Context, rawURL string) bool {
	host, port := s.cfg.Host, s.cfg.Port
	if a := s.listen.Load(); a != nil {
		host, port = a.IP.String(), a.Port
	}
	return IsListenAddress(ctx, rawURL, host, port)
}
