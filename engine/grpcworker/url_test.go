package grpcworker

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestParseWorkerURL(t *testing.T) {
	for _, tc := range []struct {
		in      string
		addr    string
		rank    int
		hasRank bool
	}{
		{"grpc://worker1:50051", "worker1:50051", 0, false},
		{"GRPC://worker1:50051", "worker1:50051", 0, false},
		{"grpc://worker1:50051/", "worker1:50051", 0, false},
		{"grpc://10.0.0.7:50051@0", "10.0.0.7:50051", 0, true},
		{"grpc://10.0.0.7:50051@3", "10.0.0.7:50051", 3, true},
		{"grpc://[::1]:50051", "[::1]:50051", 0, false},
		{"grpc://[2001:db8::7]:50051@12", "[2001:db8::7]:50051", 12, true},
		{"grpc://[fe80::1%eth0]:1", "[fe80::1%eth0]:1", 0, false},
		{"grpc://w.ns.svc.cluster.local:050051", "w.ns.svc.cluster.local:50051", 0, false},
		{"grpc://w:65535@2147483647", "w:65535", 2147483647, true},
	} {
		addr, rank, hasRank, err := ParseWorkerURL(tc.in)
		if err != nil || addr != tc.addr || rank != tc.rank || hasRank != tc.hasRank {
			t.Errorf("ParseWorkerURL(%q) = %q, %d, %v, %v; want %q, %d, %v", tc.in, addr, rank, hasRank, err, tc.addr, tc.rank, tc.hasRank)
		}
	}
}

func TestParseWorkerURLErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no scheme"},
		{"worker1:50051", "no scheme; give grpc://host:port"},
		{"http://worker1:8000", `scheme "http" is not gRPC`},
		{"grpcs://worker1:50051", "TLS to gRPC workers is not supported yet"},
		{"grpc://", "no host"},
		{"grpc://:50051", "no host"},
		{"grpc://worker1", "no port; gRPC has no default port"},
		{"grpc://worker1@2", "no port"},
		{"grpc://[::1]", "no port"},
		{"grpc://::1:50051", "an IPv6 address goes in brackets"},
		{"grpc://2001:db8::1", "an IPv6 address goes in brackets"},
		{"grpc://[1.2.3.4]:1", "is not an IPv6 address"},
		{"grpc://[zz]:1", "is not an IPv6 address"},
		{"grpc://w:0", `port "0" is not in 1-65535`},
		{"grpc://w:65536", "not in 1-65535"},
		{"grpc://w:http", "not in 1-65535"},
		{"grpc://w:-1", "not in 1-65535"},
		{"grpc://w:1@", `DP rank "": give a decimal number`},
		{"grpc://w:1@-1", "give a decimal number in 0-2147483647"},
		{"grpc://w:1@+1", "give a decimal number"},
		{"grpc://w:1@01", "no leading zeros"},
		{"grpc://w:1@2147483648", "give a decimal number"},
		{"grpc://w:1@x", "give a decimal number"},
		{"grpc://user@w:1@2", "credentials are not allowed"},
		{"grpc://user@w:1", "DP rank"},
		{"grpc://w:1/v1", "no path, query or fragment"},
		{"grpc://w:1?x=1", "no path, query or fragment"},
		{"grpc://w:1#f", "no path, query or fragment"},
		{"grpc://w w:1", "is not a host name or IPv4 address"},
		{"grpc://w%41:1", "is not a host name"},
	} {
		_, _, _, err := ParseWorkerURL(tc.in)
		if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), strconv.Quote(tc.in)) {
			t.Errorf("ParseWorkerURL(%q) = %v; want ErrInvalidURL quoting the input and saying %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseWorkerURL: no input panics; an accepted URL's address is a dialable host:port,
// and rebuilding the URL from the results parses to the same results (one canonical form).
func FuzzParseWorkerURL(f *testing.F) {
	for _, s := range []string{"grpc://w:1", "grpc://w:1@0", "grpc://[::1]:50051@3", "grpc://10.0.0.1:050051/", "GRPC://x:2@01",
		"grpc://[fe80::1%eth0]:1", "grpc://a@b:1@2", "grpcs://w:1", "grpc://w:1/@2", "grpc://[::ffff:1.2.3.4]:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, rank, hasRank, err := ParseWorkerURL(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("error %v does not wrap ErrInvalidURL", err)
			}
			return
		}
		host, port, serr := net.SplitHostPort(addr)
		if serr != nil || host == "" {
			t.Fatalf("%q gave address %q: %v", s, addr, serr)
		}
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			t.Fatalf("%q gave port %q", s, port)
		}
		if rank < 0 || (!hasRank && rank != 0) {
			t.Fatalf("%q gave rank %d (has %v)", s, rank, hasRank)
		}
		again := "grpc://" + addr
		if hasRank {
			again += "@" + strconv.Itoa(rank)
		}
		a2, r2, h2, err := ParseWorkerURL(again)
		if err != nil || a2 != addr || r2 != rank || h2 != hasRank {
			t.Fatalf("%q → %q → %q, %d, %v, %v; want %q, %d, %v", s, again, a2, r2, h2, err, addr, rank, hasRank)
		}
	})
}
