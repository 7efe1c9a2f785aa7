package evloop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startPartial dials addr and sends a request head that waits for its body; it returns once
// the server has read the head (its "100 Continue" arrived), so the connection is known to
// hold part of a request, which is never shed.
func startPartial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	cont := make([]byte, len("HTTP/1.1 100 Continue\r\n\r\n"))
	if _, err := io.ReadFull(c, cont); err != nil || string(cont) != "HTTP/1.1 100 Continue\r\n\r\n" {
		t.Fatalf("no 100 Continue: %q %v", cont, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// cpuSelf is the process's user and system CPU time.
func cpuSelf(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAcceptBacksOffWhenDescriptorsRunOut: with the connection cap above what the process
// may open and no idle connection to shed (every client has sent part of a request), accept
// fails with EMFILE. The loop stops watching the listener and retries after a pause instead
// of being woken again at once: over a second of exhaustion the process uses less than half
// a core (the spin used a whole one), and once descriptors are free again the waiting
// connection is served.
func TestAcceptBacksOffWhenDescriptorsRunOut(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	addr := startProxy(t, &proxy{addr: up}, func(c *Config) { c.Loops, c.MaxConns = 1, 1<<20 })
	var busy []net.Conn
	defer func() {
		for _, c := range busy {
			_ = c.Close()
		}
	}()
	for range 4 { // connections with part of a request: not idle, so not shed
		busy = append(busy, startPartial(t, addr))
	}

	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	probe, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(probe)
	low := saved
	low.Cur = uint64(probe + 64)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var fillers []int
	release := func() {
		for _, fd := range fillers {
			_ = unix.Close(fd)
		}
		fillers = nil
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &saved)
	}
	defer release()
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			break // EMFILE: the table is full
		}
		fillers = append(fillers, fd)
	}
	// Free one descriptor for the client's socket: the gateway's accept then finds none.
	_ = unix.Close(fillers[len(fillers)-1])
	fillers = fillers[:len(fillers)-1]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial with one descriptor free: %v", err)
	}
	defer c.Close()

	t0, cpu0 := time.Now(), cpuSelf(t)
	time.Sleep(time.Second)
	ratio := (cpuSelf(t) - cpu0).Seconds() / time.Since(t0).Seconds()
	release()
	t.Logf("CPU over 1 s of EMFILE: %.0f%% of a core", 100*ratio)
	if ratio >= 0.5 {
		t.Fatalf("%.0f%% of a core while accept had no descriptor (a spinning accept loop uses 100%%)", 100*ratio)
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute)) // a hang guard: the pause is at most 1 s
	fmt.Fprint(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the connection that waited for a descriptor: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "ok") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestNewConnectionPastTheCapTakesTheOldestIdleOnesPlace: at MaxConns a new connection
// closes the loop's oldest idle keep-alive connection instead of being refused, as nginx
// reuses idle keep-alive connections; a connection with part of a request is never shed.
func TestNewConnectionPastTheCapTakesTheOldestIdleOnesPlace(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	addr := startProxy(t, &proxy{addr: up}, func(c *Config) { c.Loops, c.MaxConns = 1, 2 })
	partial := startPartial(t, addr)
	defer partial.Close()
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprint(idle, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}") // one answer: it is open and idle
	idleBR := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(idleBR, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the idle connection's request: %v %v", resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	fresh, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fmt.Fprint(fresh, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(fresh), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the new connection past the cap: %v %v", resp, err)
	}
	_ = idle.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := idleBR.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("the idle connection was not closed: %d %v", n, err)
	}
	fmt.Fprint(partial, "{}")
	resp, err = http.ReadResponse(bufio.NewReader(partial), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the connection with part of a request: %v %v", resp, err)
	}
}

// TestInputWaitingSeesUnreadBytes: shedding skips a connection whose client has sent bytes
// the loop has not read yet; the check peeks and leaves them for the read.
func TestInputWaitingSeesUnreadBytes(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if inputWaiting(fds[0]) {
		t.Fatal("an empty socket reported input")
	}
	if _, err := unix.Write(fds[1], []byte("GET")); err != nil {
		t.Fatal(err)
	}
	if !inputWaiting(fds[0]) {
		t.Fatal("three unread bytes were not seen")
	}
	buf := make([]byte, 8)
	if n, err := unix.Read(fds[0], buf); err != nil || string(buf[:n]) != "GET" {
		t.Fatalf("the peek consumed input: %q %v", buf[:n], err)
	}
	_ = unix.Close(fds[1])
	if inputWaiting(fds[0]) {
		t.Fatal("a closed peer with nothing unread reported input")
	}
}
