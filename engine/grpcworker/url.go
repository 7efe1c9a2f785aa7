package grpcworker

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ErrInvalidURL is wrapped by every error of ParseWorkerURL.
var ErrInvalidURL = errors.New("invalid grpc worker URL")

// maxRank bounds a DP rank: data_parallel_rank is an int32 on the wire.
const maxRank = math.MaxInt32

// ParseWorkerURL parses a gRPC worker URL, grpc://host:port or grpc://host:port@RANK, the
// second naming one data-parallel rank of the engine at host:port (spec: service discovery,
// "each DP rank registered there (<address>@<rank>)"). It returns the dial address in its
// canonical form (host as given, IPv6 in brackets, the port without leading zeros), and the
// rank when there is one. The scheme is case-insensitive; one trailing slash is allowed.
//
// Refused with an error saying what to write instead: another scheme (grpcs:// too: TLS is
// not supported yet), a missing port (gRPC has no default port), a path, query, fragment or
// credentials, an IPv6 address without brackets, a rank that is not a decimal number in
// 0-2147483647 or has leading zeros (two spellings would be two workers).
func ParseWorkerURL(s string) (addr string, rank int, hasRank bool, err error) {
	fail := func(format string, args ...any) (string, int, bool, error) {
		return "", 0, false, fmt.Errorf("%w %q: %s", ErrInvalidURL, s, fmt.Sprintf(format, args...))
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return fail("no scheme; give grpc://host:port or grpc://host:port@RANK")
	}
	switch strings.ToLower(scheme) {
	case "grpc":
	case "grpcs":
		return fail("TLS to gRPC workers is not supported yet; give grpc://host:port")
	default:
		return fail("scheme %q is not gRPC; give grpc://host:port", scheme)
	}
	rest = strings.TrimSuffix(rest, "/")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		return fail("only grpc://host:port[@RANK] is allowed (no path, query or fragment)")
	}
	hostport := rest
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		hostport = rest[:i]
		r := rest[i+1:]
		if strings.IndexByte(hostport, '@') >= 0 {
			return fail("credentials are not allowed; '@' may appear once, before the DP rank")
		}
		rank, err = parseRank(r)
		if err != nil {
			return fail("DP rank %q: %v", r, err)
		}
		hasRank = true
	}
	if hostport == "" {
		return fail("no host; give grpc://host:port")
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.Count(hostport, ":") > 1 && !strings.HasPrefix(hostport, "[") {
			return fail("an IPv6 address goes in brackets: grpc://[%s]:port", hostport)
		}
		if !strings.Contains(hostport, ":") || strings.HasSuffix(hostport, "]") {
			return fail("no port; gRPC has no default port, give grpc://host:port")
		}
		return fail("%v", err)
	}
	if host == "" {
		return fail("no host; give grpc://host:port")
	}
	if strings.HasPrefix(hostport, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return fail("%q in brackets is not an IPv6 address", host)
		}
	} else if !validHost(host) {
		return fail("host %q is not a host name or IPv4 address", host)
	}
	n, err := parseDecimal(port, 65535)
	if err != nil || n == 0 {
		return fail("port %q is not in 1-65535", port)
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), rank, hasRank, nil
}

func parseRank(s string) (int, error) {
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("no leading zeros")
	}
	n, err := parseDecimal(s, maxRank)
	if err != nil {
		return 0, fmt.Errorf("give a decimal number in 0-%d", maxRank)
	}
	return n, nil
}

// parseDecimal reads a non-empty run of ASCII digits no greater than max.
func parseDecimal(s string, max int) (int, error) {
	if s == "" || len(s) > 10 {
		return 0, errors.New("not a number")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errors.New("not a number")
		}
		n = n*10 + int(c-'0')
	}
	if n > max {
		return 0, errors.New("out of range")
	}
	return n, nil
}

// validHost accepts DNS names (letters, digits, '-', '_', '.') and IPv4 literals: what a
// resolver can look up, nothing that would change the URL's meaning.
func validHost(h string) bool {
	if len(h) > 253 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
