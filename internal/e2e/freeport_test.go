package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const freePortChild = "SMG_E2E_FREEPORT_CHILD"

// TestFreePortIsReservedAcrossProcesses: two test processes (this one and a copy of it, as two
// packages of `go test ./...` run side by side) each take 300 ports from FreePort while the
// other holds its own; no port is handed to both, and none lies in the kernel's ephemeral
// range, from which the :0 listeners of every other test (mocks, gateways) take theirs.
func TestFreePortIsReservedAcrossProcesses(t *testing.T) {
	const n = 300
	if os.Getenv(freePortChild) != "" { // the copy: print its ports, hold them until stdin closes
		for range n {
			fmt.Println(FreePort(t, "127.0.0.1"))
		}
		fmt.Println("held")
		_, _ = os.Stdin.Read(make([]byte, 1))
		return
	}
	mine := map[int]bool{}
	for range n / 2 {
		mine[FreePort(t, "127.0.0.1")] = true
	}
	child := exec.Command(os.Args[0], "-test.run=^TestFreePortIsReservedAcrossProcesses$", "-test.count=1")
	child.Env = append(os.Environ(), freePortChild+"=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &strings.Builder{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for range n / 2 { // taken while the child takes its own
		mine[FreePort(t, "127.0.0.1")] = true
	}
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lo, hi := reservablePorts()
	theirs := 0
	for _, f := range strings.Fields(out.String()) {
		p, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		theirs++
		if mine[p] {
			t.Errorf("port %d handed to both processes", p)
		}
		if p < lo || p >= hi {
			t.Errorf("child's port %d outside the reservable range %d-%d", p, lo, hi-1)
		}
	}
	if theirs != n || len(mine) != n {
		t.Fatalf("got %d ports here and %d in the child, want %d each:\n%s", len(mine), theirs, n, out)
	}
	for p := range mine {
		if p < lo || p >= hi {
			t.Errorf("port %d outside the reservable range %d-%d", p, lo, hi-1)
		}
	}
}

// TestGatewayAddressesAreReadBack: StartGateway lets smg bind port 0 and takes the addresses
// it logs, so the URL it returns is the one the process listens on.
func TestGatewayAddressesAreReadBack(t *testing.T) {
	g := StartGateway(t)
	for _, raw := range []string{g.URL, g.MetricsURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Port() == "" || u.Port() == "0" {
			t.Fatalf("address %q not read back", raw)
		}
	}
	if r := MustDo(t, "GET", g.MetricsURL, "", nil); r.Status != 200 || !strings.Contains(r.Body, "smg_") {
		t.Fatalf("GET %s: %d", g.MetricsURL, r.Status)
	}
	if !strings.Contains(g.Output(), "address="+strings.TrimPrefix(g.URL, "http://")) {
		t.Fatalf("URL %s is not the address the gateway logged:\n%s", g.URL, g.Output())
	}
}
