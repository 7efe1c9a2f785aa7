package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
)

// TestRouterDiscoveryJoinsTheMesh: two real smg routers with --enable-mesh,
// --service-discovery and --router-selector, and no --mesh-peer-urls, find each other
// through their Ready router pods on a real kube-apiserver and form one mesh.
func TestRouterDiscoveryJoinsTheMesh(t *testing.T) {
	api, ns := startAPIServer(t, "routers")
	ctx := context.Background()
	hosts := []string{"127.0.0.1", "127.0.0.2"}
	names := []string{"router-a", "router-b"}
	var gws []*Gateway
	for i, host := range hosts {
		meshPort := FreePort(t, host)
		g := startGatewayEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig},
			"--service-discovery", "--selector", "app=engine", "--service-discovery-namespace", ns,
			"--router-selector", "app=smg-router", "--enable-mesh", "--mesh-server-name", names[i],
			"--mesh-host", host, "--mesh-port", strconv.Itoa(meshPort))
		gws = append(gws, g)
		spec := k8stest.PodSpec{Namespace: ns, Name: names[i], Labels: map[string]string{"app": "smg-router"},
			Annotations: map[string]string{annotationMeshPort: strconv.Itoa(meshPort)}}
		if _, err := api.ReadyPod(ctx, spec, host); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for i, g := range gws {
		other := names[1-i]
		testutil.Eventually(t, names[i]+" sees "+other+" ALIVE", func() bool {
			r, err := Do(http.MethodGet, g.URL+"/mesh/status", "", nil)
			return err == nil && r.Status == 200 && MeshMemberAlive(r.Body, other)
		})
	}
	t.Logf("routers joined through router discovery in %v", time.Since(start).Round(time.Millisecond))
	if out := gws[0].Output(); !strings.Contains(out, `msg="Router node discovery enabled" selector="app=smg-router"`) {
		t.Errorf("router-a never logged the spec's router discovery line:\n%s", out)
	}
	// On SIGTERM the mesh and the watchers stop before the last line, "Gateway stopped":
	// nothing logs after it.
	if err := gws[0].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	if code := gws[0].Wait(60 * time.Second); code != 0 {
		t.Fatalf("router-a exit %d:\n%s", code, gws[0].Output())
	}
	exited := time.Now()
	out := strings.TrimRight(gws[0].Output(), "\n")
	last := out[strings.LastIndexByte(out, '\n')+1:]
	if !strings.Contains(last, `msg="Gateway stopped"`) {
		t.Fatalf("the last line is %q, not \"Gateway stopped\":\n%s", last, out)
	}
	// For the record (a measurement, not a bound): how long the process took after the
	// line; the issue saw 5.3 s, with mesh retries logged in between.
	if ts, _, ok := strings.Cut(strings.TrimPrefix(last, "time="), " "); ok {
		if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			t.Logf("SIGTERM to exit %v; \"Gateway stopped\" logged %v before the exit", exited.Sub(signalled).Round(time.Millisecond), exited.Sub(at).Round(time.Millisecond))
		}
	}
	for _, stopped := range []string{`msg="mesh stopped"`, `msg="Service discovery stopped"`} {
		if !strings.Contains(out, stopped) {
			t.Errorf("router-a never logged %s before \"Gateway stopped\":\n%s", stopped, out)
		}
	}
}
