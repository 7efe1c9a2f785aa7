package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/loadgen"
)

// Binaries are the programs a suite runs.
type Binaries struct {
	SMG, MockWorker, LoadGen, BareProxy string
}

// BinariesIn returns the binaries as `make build` leaves them in dir.
func BinariesIn(dir string) Binaries {
	return Binaries{SMG: dir + "/smg", MockWorker: dir + "/mockworker", LoadGen: dir + "/loadgen", BareProxy: dir + "/bareproxy"}
}

// proc is a started process pinned to a core.
type proc struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

// start runs bin pinned to core (taskset) with GOMAXPROCS=1, so that each side of a
// measurement has one core of its own. core < 0 runs it unpinned with the Go default
// GOMAXPROCS (the routing-quality runs, where timing fidelity matters more than attribution).
// taskset execs the program, so the process id is the program's own and /proc reports its CPU.
func start(core int, bin string, args ...string) (*proc, error) {
	return startAt(pinned(core), bin, args...)
}

// placement is where a process runs: the CPU list taskset pins it to ("" unpinned) and its
// GOMAXPROCS (0: Go's default).
type placement struct {
	cpus  string
	procs int
}

// pinned is one core with GOMAXPROCS=1, or unpinned with Go's default for core < 0.
func pinned(core int) placement {
	if core < 0 {
		return placement{}
	}
	return placement{cpus: strconv.Itoa(core), procs: 1}
}

// startAt runs bin where pl says.
func startAt(pl placement, bin string, args ...string) (*proc, error) {
	name, all := bin, args
	env := os.Environ()
	if pl.procs > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(pl.procs))
	}
	if pl.cpus != "" {
		if tp, err := exec.LookPath("taskset"); err == nil {
			name, all = tp, append([]string{"-c", pl.cpus, bin}, args...)
		}
	}
	p := &proc{cmd: exec.Command(name, all...), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop interrupts the process and waits for it (killing it after 10 s).
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// wait waits for the process to exit on its own.
func (p *proc) wait() error {
	<-p.done
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("%s exited with %v:\n%s", p.cmd.Path, p.cmd.ProcessState, tail(p.out.String()))
	}
	return nil
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}

// waitOutput waits until the process printed n matches of re and returns their first groups.
func (p *proc) waitOutput(re *regexp.Regexp, n int, d time.Duration) ([]string, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ms := re.FindAllStringSubmatch(p.out.String(), -1)
		if len(ms) >= n {
			out := make([]string, 0, n)
			for _, m := range ms[:n] {
				out = append(out, m[1])
			}
			return out, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited early:\n%s", p.cmd.Path, tail(p.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("%s did not print %s within %v:\n%s", p.cmd.Path, re, d, tail(p.out.String()))
}

// startListening starts bin where pl says and waits up to within for its first n lines
// matching ready, returning their first groups (the listening URLs); a process that does not
// print them in time is stopped.
func startListening(pl placement, bin string, ready *regexp.Regexp, n int, within time.Duration, args ...string) (*proc, []string, error) {
	p, err := startAt(pl, bin, args...)
	if err != nil {
		return nil, nil, err
	}
	urls, err := p.waitOutput(ready, n, within)
	if err != nil {
		p.stop()
		return nil, nil, err
	}
	return p, urls, nil
}

// cpuSeconds returns the user+system CPU time the process has used, from /proc/<pid>/stat.
func (p *proc) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name: state is field 3; utime, stime are 14, 15.
	s := string(b)
	rest := s[strings.LastIndexByte(s, ')')+2:]
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat: %q", s)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks, nil
}

// cpuTime returns the CPU time the process and its child processes (nginx's workers in the
// scaling rows) have used, in seconds with nanosecond resolution: the sum of their threads'
// /proc/<pid>/task/*/schedstat first field (time on a CPU). The overhead suite measures with
// it because /proc/<pid>/stat counts 10 ms ticks, too coarse for a short run of a proxy using
// a fraction of its core (an open-loop run at 2,000 req/s uses ~0.1 s a second: ±10% from
// rounding alone). Threads that exited during the run are not counted (Go's and the peers'
// threads live as long as the process). Falls back to cpuSeconds where schedstat is missing.
func (p *proc) cpuTime() (float64, error) {
	pid := p.cmd.Process.Pid
	ns, ok, err := threadsCPU(pid)
	if err != nil {
		return 0, err
	}
	if !ok {
		return p.cpuSeconds() // no schedstat on this kernel
	}
	for _, child := range childPIDs(pid) {
		if c, _, err := threadsCPU(child); err == nil {
			ns += c
		}
	}
	return float64(ns) / 1e9, nil
}

// threadsCPU sums the schedstat run time of pid's threads; ok is false without schedstat.
func threadsCPU(pid int) (ns int64, ok bool, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if errors.Is(err, fs.ErrNotExist) {
			if _, statErr := os.Stat(dir + "/" + t.Name()); statErr == nil {
				return 0, false, nil // the thread is there, its schedstat is not
			}
		}
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false, fmt.Errorf("empty %s/%s/schedstat", dir, t.Name())
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		ns += v
	}
	return ns, true, nil
}

// childPIDs lists the processes whose parent is pid, from every /proc/<n>/stat.
func childPIDs(pid int) []int {
	var out []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 > len(s) {
			continue
		}
		// After the command name: state, then the parent's pid.
		if f := strings.Fields(s[i+2:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux build.
const clockTicks = 100

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP waits until GET url answers 200.
func waitHTTP(url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second); err == nil {
			fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.Contains(line, " 200 ") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s/health did not answer 200 within %v", url, d)
}

// waitReadiness waits until GET base/readiness answers 200: every worker probed healthy (an
// EPD gateway needs all three roles).
func waitReadiness(base string, d time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if r, err := c.Get(base + "/readiness"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s/readiness did not answer 200 within %v", base, d)
}

// runLoadgen runs loadgen with args on core, waits for it and reads the JSON result it wrote
// to out (args must include --output out).
func runLoadgen(core int, bin, out string, args ...string) (*loadgen.Result, error) {
	r, _, err := runLoadgenCPU(core, bin, out, args...)
	return r, err
}

// runLoadgenCPU is runLoadgen that also returns the CPU seconds (user + system) loadgen used.
func runLoadgenCPU(core int, bin, out string, args ...string) (*loadgen.Result, float64, error) {
	lg, err := start(core, bin, args...)
	if err != nil {
		return nil, 0, err
	}
	if err := lg.wait(); err != nil {
		return nil, 0, err
	}
	cpu := (lg.cmd.ProcessState.UserTime() + lg.cmd.ProcessState.SystemTime()).Seconds()
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, 0, err
	}
	var r loadgen.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, 0, fmt.Errorf("cannot read loadgen result %s: %w", out, err)
	}
	return &r, cpu, nil
}

// prepareSuite is how a suite with a WorkDir starts: validate its config, then make *dir a
// fresh temporary directory named after prefix when it is empty (the WorkDir left to the
// suite). It returns what removes that directory again; a directory the caller gave is kept.
func prepareSuite(validate func() error, dir *string, prefix string) (cleanup func(), err error) {
	if err := validate(); err != nil {
		return nil, err
	}
	if *dir != "" {
		return func() {}, nil
	}
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	*dir = d
	return func() { os.RemoveAll(d) }, nil
}
