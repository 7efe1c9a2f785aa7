package k8stest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/smg-go/smg/internal/ownedtmp"
)

// BinDir is where the apiserver binaries are cached: $SMG_K8S_BIN, else
// ~/.cache/k8s-test-bin/v1.37.2.
func BinDir() string {
	if d := os.Getenv("SMG_K8S_BIN"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "k8s-test-bin", "v1.37.2")
}

func hackDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "k8s")
}

// Server is a running kube-apiserver.
type Server struct {
	// Config reaches the API server as its admin.
	Config *rest.Config
	// Client is a clientset for Config.
	Client *kubernetes.Clientset
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string
	state      string
}

// Start builds the binaries if they are not cached (build.sh is idempotent and serialises
// concurrent builds), stops what test processes that ended without Stop left running, then
// starts etcd and kube-apiserver with fresh data in a temporary directory. log receives the
// scripts' output.
func Start(log func(string)) (*Server, error) {
	bin := BinDir()
	if out, err := script("build.sh", bin); err != nil {
		return nil, fmt.Errorf("cannot build kube-apiserver (hack/k8s/build.sh %s): %v\n%s", bin, err, tail(out))
	}
	// start.sh picks its ports at random: on a busy machine one may be taken by the time the
	// server binds it, so a failed start is retried with fresh ports and data.
	stopOrphans()
	var state string
	var out string
	var err error
	for attempt := 1; ; attempt++ {
		if state, err = ownedtmp.Make(statePrefix); err != nil {
			return nil, err
		}
		out, err = script("start.sh", "start", state, bin)
		log(strings.TrimSpace(out))
		if err == nil {
			break
		}
		_, _ = script("start.sh", "stop", state)
		_ = os.RemoveAll(state)
		if attempt == 3 {
			return nil, fmt.Errorf("cannot start kube-apiserver (3 attempts): %v\n%s", err, tail(out))
		}
	}
	s := &Server{Kubeconfig: filepath.Join(state, "kubeconfig"), state: state}
	if s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		s.Stop()
		return nil, err
	}
	s.Config.QPS, s.Config.Burst = 500, 1000 // tests create pods in bulk
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// statePrefix names the directories that hold a server's data, logs and PID files.
const statePrefix = "smg-k8s-"

// stopOrphans stops the servers of test processes that ended without Stop (killed by a
// timeout or a signal: etcd and kube-apiserver run in their own sessions and outlive them)
// and removes their data.
func stopOrphans() {
	for _, state := range ownedtmp.Orphans(statePrefix) {
		_, _ = script("start.sh", "stop", state)
		_ = os.RemoveAll(state)
	}
}

// Stop stops the API server and etcd and removes their data.
func (s *Server) Stop() {
	_, _ = script("start.sh", "stop", s.state)
	_ = os.RemoveAll(s.state)
}

// Via returns a copy of the admin config that dials host:port (a proxy) instead.
func (s *Server) Via(hostPort string) *rest.Config {
	c := rest.CopyConfig(s.Config)
	c.Host = "https://" + hostPort
	return c
}

// Addr is the API server's host:port.
func (s *Server) Addr() string {
	return strings.TrimPrefix(s.Config.Host, "https://")
}

func script(name string, args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "bash", append([]string{filepath.Join(hackDir(), name)}, args...)...)
	cmd.Env = append(os.Environ(), "STOP_GRACE=2")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
