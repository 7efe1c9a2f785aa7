package mockworker

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// ownGoroutines returns the stacks of goroutines running this package's code, other than
// test goroutines.
func ownGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "smg-go/smg/mockworker.") && !strings.Contains(g, "testing.tRunner") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseLeavesNoGoroutines closes fleets in the middle of hanging, delayed, paced and
// engine-mode answers and checks that every goroutine the fleet started has returned.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	for _, mode := range []Mode{ModeInstant, ModeEngine} {
		forEachServer(t, func(t *testing.T, kind ServerKind) {
			f, err := Start(config(func(c *Config) { c.Server, c.Mode, c.TokenInterval, c.DecodeBase = kind, mode, time.Hour, time.Hour }))
			if err != nil {
				t.Fatal(err)
			}
			var conns []net.Conn
			for _, fault := range []string{"hang", "slow-ttft=3600000", ""} {
				c, err := net.Dial("tcp", f.Addrs()[0])
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				body := `{"prompt":"x","stream":true}`
				if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: mock\r\nX-Mock-Fault: "+fault+"\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
					t.Fatal(err)
				}
			}
			testutil.Eventually(t, "three answers in progress", func() bool { return f.Workers()[0].Active() == 3 })
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			for _, c := range conns {
				_ = c.Close()
			}
			if got := f.Workers()[0].Active(); got != 0 {
				t.Errorf("%s: %d answers still active after Close", mode, got)
			}
			for deadline := time.Now().Add(10 * time.Second); len(ownGoroutines()) > 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: goroutines left after Close:\n%s", mode, strings.Join(ownGoroutines(), "\n\n"))
				}
			}
		})
	}
}
